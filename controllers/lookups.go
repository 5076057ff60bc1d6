package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/scaling"
)

// Lookups the admission webhooks share with the controllers. Both read the
// manager's cache through the same indexes (registered by Setup), so a
// webhook and a controller never disagree about which policy guards a target
// or which group a StatefulSet belongs to.

// ScalingPolicyFieldManager is the field manager of the ScalingPolicy
// controller's writes of a target's spec.replicas. With the operator's own
// user name it tells the no-downscale webhook that a downscale is the policy's
// own: a user may name any field manager, but not act as the operator's
// ServiceAccount without being granted impersonation.
const ScalingPolicyFieldManager = "echelon-scalingpolicy"

// PoliciesForTarget lists the ScalingPolicies whose target is the named
// StatefulSet, Deployment or ReplicaSet (kind "" means StatefulSet).
func PoliciesForTarget(ctx context.Context, c client.Reader, namespace, kind, name string) ([]v1alpha1.ScalingPolicy, error) {
	var list v1alpha1.ScalingPolicyList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{indexPolicyTarget: PolicyTargetKey(kind, name)}); err != nil {
		return nil, fmt.Errorf("list ScalingPolicies of %s %s: %w", kindOrStatefulSet(kind), name, err)
	}
	return list.Items, nil
}

// GroupsClaiming lists the RolloutGroups that claim the StatefulSet, by name
// or by selector.
func GroupsClaiming(ctx context.Context, c client.Reader, sts *appsv1.StatefulSet) ([]v1alpha1.RolloutGroup, error) {
	return groupsClaiming(ctx, c, sts.Namespace, sts.Name, sts)
}

// DownscaleGroup returns the RolloutGroup that claims target, with its other
// members' readiness and last downscales (from their ScalingPolicies'
// status.lastDownscaleTime): what scaling.DownscaleGate needs. Nil when no
// group claims target.
func DownscaleGroup(ctx context.Context, c client.Reader, target *appsv1.StatefulSet) (*scaling.Group, error) {
	groups, err := groupsClaiming(ctx, c, target.Namespace, target.Name, target)
	if err != nil {
		return nil, err
	}
	if len(groups) == 0 {
		return nil, nil
	}
	// A StatefulSet claimed by two groups blocks both; the first by name is
	// enough to space downscales.
	slices.SortFunc(groups, func(a, b v1alpha1.RolloutGroup) int { return strings.Compare(a.Name, b.Name) })
	rg := &groups[0]
	g := &scaling.Group{Name: rg.Name,
		RollingTarget: rg.Status.CurrentStatefulSet == target.Name &&
			(rg.Status.Phase == v1alpha1.PhaseProgressing || rg.Status.Phase == v1alpha1.PhaseStalled)}
	members, _, err := resolveMembers(ctx, c, rg)
	if err != nil {
		return nil, err
	}
	for _, m := range members {
		if m.Name == target.Name {
			continue
		}
		member := scaling.Member{Name: m.Name, Ready: m.StatefulSet != nil && allReady(m.StatefulSet)}
		policies, err := policiesTargeting(ctx, c, target.Namespace, m.Name)
		if err != nil {
			return nil, err
		}
		for _, p := range policies {
			if t := p.Status.LastDownscaleTime; t != nil && t.After(member.LastDownscale) {
				member.LastDownscale = t.Time
			}
		}
		g.Others = append(g.Others, member)
	}
	return g, nil
}

func kindOrStatefulSet(kind string) string {
	if kind == "" {
		return v1alpha1.TargetKindStatefulSet
	}
	return kind
}
