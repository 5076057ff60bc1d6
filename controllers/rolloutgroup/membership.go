package rolloutgroup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/predicates"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// The member label (v1alpha1.MemberLabel, the group's UID) is what keeps the
// downscale-budget webhook's reach to the StatefulSets a budget judges: the
// webhook configuration's objectSelector sends it the writes of labelled
// StatefulSets only, so an operator that is down or failing cannot block a
// write to any other StatefulSet. The label is derived from the groups (no
// finalizer, no memory): set on each member, taken off a StatefulSet that
// left the group, and taken off every StatefulSet of a namespace whose label
// names no group there once a group of the namespace is gone. A label that a
// GitOps tool or `kubectl replace` removes is put back at once (the write
// that removes it wakes the group); until then the webhook is not asked,
// and the write that removes it is still judged, since the objectSelector
// matches the old object as well as the new one.
//
// MemberLabeler keeps it with a controller of its own, apart from the
// rollout's Reconciler: a label write that fails (the webhooks not serving
// yet, a conflict) is retried on its own backoff and never fails, delays or
// changes a rollout's pass.
type MemberLabeler struct {
	client.Client
}

// NewMemberLabeler returns the member label's controller.
func NewMemberLabeler(mgr ctrl.Manager) *MemberLabeler {
	return &MemberLabeler{Client: mgr.GetClient()}
}

// Reconcile labels the members of one group, or, when the group is gone,
// unlabels the StatefulSets of its namespace that name no group. A group
// whose spec cannot be resolved (an invalid selector) touches nothing.
func (r *MemberLabeler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rg := &v1alpha1.RolloutGroup{}
	if err := r.Get(ctx, req.NamespacedName, rg); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, r.sweepMemberLabels(ctx, req.Namespace)
		}
		return ctrl.Result{}, fmt.Errorf("get RolloutGroup: %w", err)
	}
	members, _, err := lookup.ResolveMembers(ctx, r.Client, rg)
	if err != nil {
		return ctrl.Result{}, nil //nolint:nilerr // an invalid selector: the rollout's controller reports it; nothing to label
	}
	return ctrl.Result{}, r.syncMemberLabels(ctx, rg, members)
}

// SetupWithManager registers the member label's controller: a group's
// spec (generation) and every change of a StatefulSet's labels, mapped to
// the groups that claim it and to the group its label names.
func (r *MemberLabeler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RolloutGroup{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.requestsForStatefulSet),
			builder.WithPredicates(predicates.UpdatedWhen(func(o, n *appsv1.StatefulSet) bool {
				return !equality.Semantic.DeepEqual(o.Labels, n.Labels)
			}))).
		Named(controllerName + "-members").
		Complete(r)
}

// requestsForStatefulSet maps a StatefulSet to the groups that claim it and
// to the group its member label names, which must take it off.
func (r *MemberLabeler) requestsForStatefulSet(ctx context.Context, o client.Object) []reconcile.Request {
	sts, ok := o.(*appsv1.StatefulSet)
	if !ok {
		return nil
	}
	groups, err := lookup.GroupsClaiming(ctx, r.Client, sts.Namespace, sts.Name, sts)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map StatefulSet to RolloutGroups", "statefulset", sts.Name)
		return nil
	}
	return toRequests(withGroupOfUID(ctx, r.Client, sts.Namespace, sts.Labels[v1alpha1.MemberLabel], groups))
}

// withGroupOfUID is groups with the RolloutGroup of namespace whose UID is
// uid added, when there is one and groups lacks it: the group a label of a
// StatefulSet names (a partition's holder, a member's group) must hear of
// the StatefulSet even once it claims it no more.
func withGroupOfUID(ctx context.Context, c client.Reader, namespace, uid string, groups []v1alpha1.RolloutGroup) []v1alpha1.RolloutGroup {
	if uid == "" || slices.ContainsFunc(groups, func(g v1alpha1.RolloutGroup) bool { return string(g.UID) == uid }) {
		return groups
	}
	var all v1alpha1.RolloutGroupList
	if err := c.List(ctx, &all, client.InNamespace(namespace)); err == nil {
		for _, g := range all.Items {
			if string(g.UID) == uid {
				groups = append(groups, g)
			}
		}
	}
	return groups
}

// syncMemberLabels labels every member of rg and unlabels the StatefulSets
// of its namespace that carry rg's UID but are members no more. A member
// labelled for another group that still exists keeps that label: two groups
// claiming one StatefulSet are reported Blocked, and either label asks the
// webhook, which reads the claiming group itself.
func (r *MemberLabeler) syncMemberLabels(ctx context.Context, rg *v1alpha1.RolloutGroup, members []rollout.Member) error {
	groups, err := r.groupUIDs(ctx, rg.Namespace)
	if err != nil {
		return err
	}
	uid := string(rg.UID)
	var errs []error
	isMember := map[string]bool{}
	for _, m := range members {
		isMember[m.Name] = true
		sts := m.StatefulSet
		if sts == nil {
			continue
		}
		if have, ok := sts.Labels[v1alpha1.MemberLabel]; ok && (have == uid || groups[have]) {
			continue
		}
		errs = append(errs, r.setMemberLabel(ctx, sts, &uid))
	}
	var labelled appsv1.StatefulSetList
	if err := r.List(ctx, &labelled, client.InNamespace(rg.Namespace), client.MatchingLabels{v1alpha1.MemberLabel: uid}); err != nil {
		return errors.Join(append(errs, fmt.Errorf("list the StatefulSets labelled members of RolloutGroup %s: %w", rg.Name, err))...)
	}
	for i := range labelled.Items {
		if sts := &labelled.Items[i]; !isMember[sts.Name] {
			errs = append(errs, r.setMemberLabel(ctx, sts, nil))
		}
	}
	return errors.Join(errs...)
}

// sweepMemberLabels unlabels the StatefulSets of namespace whose member
// label names no RolloutGroup there: those of a group just deleted.
func (r *MemberLabeler) sweepMemberLabels(ctx context.Context, namespace string) error {
	groups, err := r.groupUIDs(ctx, namespace)
	if err != nil {
		return err
	}
	var labelled appsv1.StatefulSetList
	if err := r.List(ctx, &labelled, client.InNamespace(namespace), client.HasLabels{v1alpha1.MemberLabel}); err != nil {
		return fmt.Errorf("list the StatefulSets labelled members of a RolloutGroup: %w", err)
	}
	var errs []error
	for i := range labelled.Items {
		if sts := &labelled.Items[i]; !groups[sts.Labels[v1alpha1.MemberLabel]] {
			errs = append(errs, r.setMemberLabel(ctx, sts, nil))
		}
	}
	return errors.Join(errs...)
}

// groupUIDs are the UIDs of the RolloutGroups of namespace.
func (r *MemberLabeler) groupUIDs(ctx context.Context, namespace string) (map[string]bool, error) {
	var groups v1alpha1.RolloutGroupList
	if err := r.List(ctx, &groups, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list RolloutGroups: %w", err)
	}
	uids := make(map[string]bool, len(groups.Items))
	for _, g := range groups.Items {
		uids[string(g.UID)] = true
	}
	return uids, nil
}

// setMemberLabel sets the member label of sts to uid, or removes it when
// uid is nil, with a merge patch of that one label: it cannot conflict with
// the StatefulSet controller's writes, and touches nothing else.
func (r *MemberLabeler) setMemberLabel(ctx context.Context, sts *appsv1.StatefulSet, uid *string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{v1alpha1.MemberLabel: uid}}})
	if err != nil {
		return err
	}
	if err := r.Patch(ctx, sts.DeepCopy(), client.RawPatch(types.MergePatchType, body)); err != nil && !apierrors.IsNotFound(err) {
		if uid == nil {
			return fmt.Errorf("remove the member label of StatefulSet %s: %w", sts.Name, err)
		}
		return fmt.Errorf("label StatefulSet %s a member: %w", sts.Name, err)
	}
	return nil
}
