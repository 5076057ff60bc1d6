package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/analysis"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/metrics"
)

// Reasons of the validation webhook's decisions (metric label).
const (
	reasonValid   = "valid"
	reasonInvalid = "invalid"
)

// EventReasonInvalidChange is the reason of the Warning Event on a
// RolloutGroup, ScalingPolicy or DelayedDownscale whose update the
// validation webhook refused.
const EventReasonInvalidChange = "InvalidChange"

// NamespaceObjects are the objects of one namespace that the cross-object
// rules read. The rules are pure functions of them, so a table states each
// rule; the webhook fills them from the operator's cache.
type NamespaceObjects struct {
	RolloutGroups   []v1alpha1.RolloutGroup
	ScalingPolicies []v1alpha1.ScalingPolicy
	// StatefulSets are needed for their labels: a group's selector claims
	// the StatefulSets it matches.
	StatefulSets      []appsv1.StatefulSet
	DelayedDownscales []v1alpha1.DelayedDownscale
}

// ValidateRolloutGroup checks the rules of rg that need other objects: each
// StatefulSet it claims, by name or by selector, is claimed by no other
// RolloutGroup. (Rules on rg alone are CEL rules on its CRD, but for its
// checks' query templates and its disruption budget's partition regex, which
// CEL cannot parse.)
func ValidateRolloutGroup(rg *v1alpha1.RolloutGroup, objs NamespaceObjects) field.ErrorList {
	errs := analysis.ValidateChecks(rg.Spec.Analysis)
	errs = append(errs, validateZoneBudget(rg.Spec.DisruptionBudget, field.NewPath("spec", "disruptionBudget"))...)
	others := othersByName(objs.RolloutGroups, rg.Name)
	if rg.Spec.Selector == nil {
		for i, m := range rg.Spec.StatefulSets {
			sts := statefulSetNamed(objs.StatefulSets, m.Name)
			if claimants := claimantsOf(others, m.Name, sts); len(claimants) > 0 {
				errs = append(errs, field.Invalid(field.NewPath("spec", "statefulSets").Index(i).Child("name"), m.Name,
					fmt.Sprintf("StatefulSet %s is already a member of RolloutGroup %s: a StatefulSet belongs to one group at most", m.Name, claimants)))
			}
		}
		return errs
	}
	path := field.NewPath("spec", "selector")
	sel, err := lookup.MemberSelector(rg)
	if err != nil {
		return append(errs, field.Invalid(path, rg.Spec.Selector, err.Error()))
	}
	sets := slices.Clone(objs.StatefulSets)
	slices.SortFunc(sets, func(a, b appsv1.StatefulSet) int { return strings.Compare(a.Name, b.Name) })
	for i := range sets {
		sts := &sets[i]
		if !lookup.Claims(rg, sts.Name, sts) {
			continue
		}
		if claimants := claimantsOf(others, sts.Name, sts); len(claimants) > 0 {
			errs = append(errs, field.Invalid(path, sel.String(),
				fmt.Sprintf("selects StatefulSet %s, which is already a member of RolloutGroup %s: a StatefulSet belongs to one group at most", sts.Name, claimants)))
		}
	}
	return errs
}

// ValidateScalingPolicy checks the rules of sp that need other objects: no
// other ScalingPolicy has the same target, and a leader is in the target's
// RolloutGroup when both are in one. (Rules on sp alone are CEL rules.)
func ValidateScalingPolicy(sp *v1alpha1.ScalingPolicy, objs NamespaceObjects) field.ErrorList {
	var errs field.ErrorList
	ref := sp.Spec.TargetRef
	key := lookup.PolicyTargetKey(ref.Kind, ref.Name)
	var sharing []string
	for _, other := range objs.ScalingPolicies {
		if other.Name != sp.Name && lookup.PolicyTargetKey(other.Spec.TargetRef.Kind, other.Spec.TargetRef.Name) == key {
			sharing = append(sharing, other.Name)
		}
	}
	if len(sharing) > 0 {
		slices.Sort(sharing)
		errs = append(errs, field.Invalid(field.NewPath("spec", "targetRef", "name"), ref.Name,
			fmt.Sprintf("%s %s is already the target of ScalingPolicy %s: a target has one policy at most", ref.KindOrDefault(), ref.Name, strings.Join(sharing, ", "))))
	}
	if from := sp.Spec.ReplicasFrom; from != nil && from.Leader != nil && ref.KindOrDefault() == v1alpha1.TargetKindStatefulSet {
		leader := from.Leader.Name
		targetGroups := claimantsOf(objs.RolloutGroups, ref.Name, statefulSetNamed(objs.StatefulSets, ref.Name))
		leaderGroups := claimantsOf(objs.RolloutGroups, leader, statefulSetNamed(objs.StatefulSets, leader))
		if len(targetGroups) > 0 && len(leaderGroups) > 0 && !slices.ContainsFunc(leaderGroups, func(g string) bool { return slices.Contains(targetGroups, g) }) {
			errs = append(errs, field.Invalid(field.NewPath("spec", "replicasFrom", "leader", "name"), leader,
				fmt.Sprintf("leader StatefulSet %s is in RolloutGroup %s, and the target %s in RolloutGroup %s: a leader and its follower are zones of one group, whose zone delay spaces their downscales",
					leader, strings.Join(leaderGroups, ", "), ref.Name, strings.Join(targetGroups, ", "))))
		}
	}
	return errs
}

// ValidateDelayedDownscale checks the rule of dd that needs other objects:
// no other DelayedDownscale has the same target StatefulSet. (Rules on dd
// alone are CEL rules; the controller blocks every DelayedDownscale of a
// target that has two, since admission judges on the cache.)
func ValidateDelayedDownscale(dd *v1alpha1.DelayedDownscale, objs NamespaceObjects) field.ErrorList {
	target := dd.Spec.TargetRef.Name
	var sharing []string
	for _, other := range objs.DelayedDownscales {
		if other.Name != dd.Name && other.Spec.TargetRef.Name == target {
			sharing = append(sharing, other.Name)
		}
	}
	if len(sharing) == 0 {
		return nil
	}
	slices.Sort(sharing)
	return field.ErrorList{field.Invalid(field.NewPath("spec", "targetRef", "name"), target,
		fmt.Sprintf("StatefulSet %s is already the target of DelayedDownscale %s: a StatefulSet has one DelayedDownscale at most", target, strings.Join(sharing, ", ")))}
}

// groupClaimants names groups for messages.
type groupClaimants []string

func (g groupClaimants) String() string { return strings.Join(g, ", ") }

// claimantsOf names, sorted, the groups that claim the StatefulSet name
// (lookup.Claims; sts nil: it does not exist, so no selector claims it).
func claimantsOf(groups []v1alpha1.RolloutGroup, name string, sts *appsv1.StatefulSet) groupClaimants {
	var out groupClaimants
	for i := range groups {
		if lookup.Claims(&groups[i], name, sts) {
			out = append(out, groups[i].Name)
		}
	}
	slices.Sort(out)
	return out
}

func othersByName(groups []v1alpha1.RolloutGroup, self string) []v1alpha1.RolloutGroup {
	return slices.DeleteFunc(slices.Clone(groups), func(g v1alpha1.RolloutGroup) bool { return g.Name == self })
}

func statefulSetNamed(sets []appsv1.StatefulSet, name string) *appsv1.StatefulSet {
	for i := range sets {
		if sets[i].Name == name {
			return &sets[i]
		}
	}
	return nil
}

// Validate is the validating webhook of RolloutGroups, ScalingPolicies and
// DelayedDownscales for the rules that need other objects
// (ValidateRolloutGroup, ValidateScalingPolicy, ValidateDelayedDownscale). An UPDATE is refused only for errors the old object
// did not already have, so that an object that predates a rule (or the
// webhook) can still be labelled, edited or fixed step by step; the errors it
// keeps come back as warnings. Two objects created at the same moment may
// both pass (each is judged on the cache); the controllers then block both
// and say so in status.
type Validate struct {
	Cluster Cluster
}

func (h *Validate) decide(ctx context.Context, req *admissionv1.AdmissionRequest) verdict {
	if req.Resource.Group != v1alpha1.GroupVersion.Group || req.SubResource != "" ||
		(req.Operation != admissionv1.Create && req.Operation != admissionv1.Update) {
		return unhandled(metrics.WebhookValidate, describe(req))
	}
	var validate validator
	switch req.Resource.Resource {
	case "rolloutgroups":
		validate = decodeAndValidate("RolloutGroup", ValidateRolloutGroup)
	case "scalingpolicies":
		validate = decodeAndValidate("ScalingPolicy", ValidateScalingPolicy)
	case "delayeddownscales":
		validate = decodeAndValidate("DelayedDownscale", ValidateDelayedDownscale)
	case "zonedisruptionbudgets":
		validate = decodeAndValidate("ZoneDisruptionBudget", ValidateZoneDisruptionBudget)
	default:
		return unhandled(metrics.WebhookValidate, describe(req))
	}
	if !h.Cluster.Watches(req.Namespace) {
		return allow(reasonNamespaceNotWatched, notWatchedWarning(req.Namespace))
	}
	objs, err := h.Cluster.Objects(ctx, req.Namespace)
	if err != nil {
		return failed(reasonLookupFailed, http.StatusInternalServerError, err)
	}
	obj, errs, err := validate(req.Object, "object", objs)
	if err != nil {
		return failed(reasonMalformed, http.StatusBadRequest, err)
	}
	var kept field.ErrorList
	if req.Operation == admissionv1.Update {
		_, oldErrs, err := validate(req.OldObject, "oldObject", objs)
		if err != nil {
			return failed(reasonMalformed, http.StatusBadRequest, err)
		}
		errs, kept = newErrors(errs, oldErrs)
	}
	var warnings []string
	for _, e := range kept {
		warnings = append(warnings, "already so before this change: "+e.Error())
	}
	if len(errs) == 0 {
		return allow(reasonValid, warnings...)
	}
	gk := obj.GetObjectKind().GroupVersionKind().GroupKind()
	status := apierrors.NewInvalid(gk, req.Name, errs).ErrStatus
	v := verdict{reason: reasonInvalid, code: status.Code, message: status.Message, status: &status, warnings: warnings}
	if req.Operation == admissionv1.Update { // on CREATE there is no object yet to attach an Event to
		v.event = &denialEvent{regarding: obj, reason: EventReasonInvalidChange, action: "Validate"}
	}
	return v
}

// validator decodes one of a request's objects (field names it) and
// validates it.
type validator func(raw runtime.RawExtension, field string, objs NamespaceObjects) (runtime.Object, field.ErrorList, error)

// decodeAndValidate is the validator of kind, an echelon.dev kind whose Go
// type is T.
func decodeAndValidate[T any, PT interface {
	*T
	runtime.Object
}](kind string, fn func(PT, NamespaceObjects) field.ErrorList) validator {
	gvk := v1alpha1.GroupVersion.WithKind(kind)
	return func(raw runtime.RawExtension, name string, objs NamespaceObjects) (runtime.Object, field.ErrorList, error) {
		obj := PT(new(T))
		if err := decodeObject(name, raw, gvk, obj); err != nil {
			return nil, nil, err
		}
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		return obj, fn(obj, objs.withoutGrafanaCompat(obj)), nil
	}
}

// newErrors splits errs into those the old object did not have and those it
// had. Errors match by type, value and detail, not by path: inserting a list
// item moves the paths of the errors below it without making them new.
func newErrors(errs, old field.ErrorList) (fresh, kept field.ErrorList) {
	for _, e := range errs {
		if slices.ContainsFunc(old, func(o *field.Error) bool {
			return o.Type == e.Type && o.Detail == e.Detail && fmt.Sprint(o.BadValue) == fmt.Sprint(e.BadValue)
		}) {
			kept = append(kept, e)
		} else {
			fresh = append(fresh, e)
		}
	}
	return fresh, kept
}
