package lookup

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/migrate"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/internal/scaling"
)

// errEmptySelector refuses a selector that would claim every StatefulSet of
// the namespace. CEL refuses it at admission; this covers objects stored
// before that rule.
var errEmptySelector = errors.New("must not be empty: set matchLabels or matchExpressions")

// MemberSelector is the group's spec.selector as a label selector; an error
// when it is invalid or empty. Only for a group with a selector.
func MemberSelector(rg *v1alpha1.RolloutGroup) (labels.Selector, error) {
	sel, err := metav1.LabelSelectorAsSelector(rg.Spec.Selector)
	if err != nil {
		return nil, err
	}
	if sel.Empty() {
		return nil, errEmptySelector
	}
	return sel, nil
}

// Claims reports whether rg claims the StatefulSet name: by listing it, or by
// a valid selector matching its labels (sts nil: it does not exist, or its
// labels are unknown, so no selector claims it). The one definition of group
// membership: the index lookups, the controllers and the validation webhook
// all use it.
func Claims(rg *v1alpha1.RolloutGroup, name string, sts *appsv1.StatefulSet) bool {
	if rg.Spec.Selector == nil {
		return slices.ContainsFunc(rg.Spec.StatefulSets, func(m v1alpha1.RolloutMember) bool { return m.Name == name })
	}
	if sts == nil {
		return false
	}
	sel, err := MemberSelector(rg)
	return err == nil && sel.Matches(labels.Set(sts.Labels))
}

// GroupsClaiming lists the RolloutGroups of the namespace that claim the
// StatefulSet name (see Claims), through the cache indexes.
func GroupsClaiming(ctx context.Context, c client.Reader, namespace, name string, sts *appsv1.StatefulSet) ([]v1alpha1.RolloutGroup, error) {
	var byName v1alpha1.RolloutGroupList
	if err := c.List(ctx, &byName, client.InNamespace(namespace), client.MatchingFields{IndexGroupMember: name}); err != nil {
		return nil, fmt.Errorf("list RolloutGroups listing %s: %w", name, err)
	}
	groups := byName.Items
	if sts == nil {
		return groups, nil
	}
	var bySelector v1alpha1.RolloutGroupList
	if err := c.List(ctx, &bySelector, client.InNamespace(namespace), client.MatchingFields{IndexGroupUsesSelector: "true"}); err != nil {
		return nil, fmt.Errorf("list RolloutGroups with selectors: %w", err)
	}
	for i := range bySelector.Items {
		if Claims(&bySelector.Items[i], name, sts) {
			groups = append(groups, bySelector.Items[i])
		}
	}
	return groups, nil
}

// ResolveMembers returns the group's members in rollout order, with their
// StatefulSets (nil when missing) and maxUnavailable (from the spec, or from
// the PodDisruptionBudget that covers their pods with spec.maxUnavailableFrom
// PodDisruptionBudget), read from c. The string explains an empty result.
func ResolveMembers(ctx context.Context, c client.Reader, rg *v1alpha1.RolloutGroup) ([]rollout.Member, string, error) {
	groupMax := rg.Spec.MaxUnavailable
	if rg.Spec.Selector == nil {
		members := make([]rollout.Member, 0, len(rg.Spec.StatefulSets))
		for _, spec := range rg.Spec.StatefulSets {
			m := rollout.Member{Name: spec.Name, MaxUnavailable: groupMax}
			if spec.MaxUnavailable != nil {
				m.MaxUnavailable = spec.MaxUnavailable
			}
			sts := &appsv1.StatefulSet{}
			err := c.Get(ctx, types.NamespacedName{Namespace: rg.Namespace, Name: spec.Name}, sts)
			switch {
			case err == nil:
				m.StatefulSet = sts
			case !apierrors.IsNotFound(err):
				return nil, "", fmt.Errorf("get StatefulSet %s: %w", spec.Name, err)
			}
			members = append(members, m)
		}
		return members, "", budgetsFor(ctx, c, rg, members)
	}

	sel, err := MemberSelector(rg)
	if err != nil {
		return nil, InvalidSelectorReason(err), nil
	}
	var list appsv1.StatefulSetList
	if err := c.List(ctx, &list, client.InNamespace(rg.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, "", fmt.Errorf("list StatefulSets for spec.selector: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b appsv1.StatefulSet) int { return strings.Compare(a.Name, b.Name) })
	members := make([]rollout.Member, 0, len(list.Items))
	for i := range list.Items {
		members = append(members, rollout.Member{Name: list.Items[i].Name, StatefulSet: &list.Items[i], MaxUnavailable: groupMax})
	}
	if len(members) == 0 {
		return nil, fmt.Sprintf("blocked: spec.selector %s matches no StatefulSet in namespace %s", sel, rg.Namespace), nil
	}
	return members, "", budgetsFor(ctx, c, rg, members)
}

// GroupsUsingBudgets lists the RolloutGroups of the namespace that take
// maxUnavailable from PodDisruptionBudgets, through the cache index: a
// budget's event concerns each of them, whose members it may start or stop
// covering.
func GroupsUsingBudgets(ctx context.Context, c client.Reader, namespace string) ([]v1alpha1.RolloutGroup, error) {
	var list v1alpha1.RolloutGroupList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{IndexGroupUsesPodDisruptionBudgets: "true"}); err != nil {
		return nil, fmt.Errorf("list RolloutGroups taking maxUnavailable from PodDisruptionBudgets: %w", err)
	}
	return list.Items, nil
}

// InvalidSelectorReason is what status says of a selector MemberSelector refused.
func InvalidSelectorReason(err error) string {
	return fmt.Sprintf("blocked: spec.selector is invalid: %v", err)
}

// ClaimingGroup returns the RolloutGroup that claims target, nil when none
// does. A StatefulSet claimed by two groups blocks both; the first by name
// is the one whose rules its downscales follow.
func ClaimingGroup(ctx context.Context, c client.Reader, target *appsv1.StatefulSet) (*v1alpha1.RolloutGroup, error) {
	groups, err := GroupsClaiming(ctx, c, target.Namespace, target.Name, target)
	if err != nil || len(groups) == 0 {
		return nil, err
	}
	slices.SortFunc(groups, func(a, b v1alpha1.RolloutGroup) int { return strings.Compare(a.Name, b.Name) })
	return &groups[0], nil
}

// DownscaleGroup returns the RolloutGroup that claims target, with its other
// members' last downscales (from their ScalingPolicies'
// status.lastDownscaleTime): what scaling.DownscaleGate needs. Nil when no
// group claims target.
func DownscaleGroup(ctx context.Context, c client.Reader, target *appsv1.StatefulSet) (*scaling.Group, error) {
	rg, err := ClaimingGroup(ctx, c, target)
	if err != nil || rg == nil {
		return nil, err
	}
	return DownscaleGroupOf(ctx, c, rg, target)
}

// DownscaleGroupOf is DownscaleGroup for rg, known to claim target. In a
// group compat mode keeps (v1alpha1.GrafanaCompatLabel), a member's
// grafana.com/last-downscale annotation counts as a downscale too. Whether
// the other members are whole is not read here: the group's disruption
// budget judges that on their pods (package budget).
func DownscaleGroupOf(ctx context.Context, c client.Reader, rg *v1alpha1.RolloutGroup, target *appsv1.StatefulSet) (*scaling.Group, error) {
	g := &scaling.Group{Name: rg.Name,
		RollingTarget: rg.Status.CurrentStatefulSet == target.Name &&
			(rg.Status.Phase == v1alpha1.PhaseProgressing || rg.Status.Phase == v1alpha1.PhaseStalled)}
	members, _, err := ResolveMembers(ctx, c, rg)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		if m.Name == target.Name {
			continue
		}
		member := scaling.Member{Name: m.Name}
		policies, err := PoliciesForTarget(ctx, c, target.Namespace, v1alpha1.TargetKindStatefulSet, m.Name)
		if err != nil {
			return nil, err
		}
		for _, p := range policies {
			if t := p.Status.LastDownscaleTime; t != nil && t.After(member.LastDownscale) {
				member.LastDownscale = t.Time
			}
		}
		if rg.Labels[v1alpha1.GrafanaCompatLabel] == "true" {
			// A group compat mode keeps also counts the downscales the
			// Grafana operator recorded before the handover; an unreadable
			// value counts as none (compat mode warns about it).
			if t, err := migrate.LastDownscaleOf(m.StatefulSet); err == nil && t.After(member.LastDownscale) {
				member.LastDownscale = t
			}
		}
		g.Others = append(g.Others, member)
	}
	return g, nil
}
