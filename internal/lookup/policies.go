package lookup

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

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
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{IndexPolicyTarget: PolicyTargetKey(kind, name)}); err != nil {
		ref := v1alpha1.PolicyTargetReference{Kind: kind, Name: name}
		return nil, fmt.Errorf("list ScalingPolicies of %s %s: %w", ref.KindOrDefault(), name, err)
	}
	return list.Items, nil
}

// DelayedFor lists the DelayedDownscales of the named StatefulSet.
func DelayedFor(ctx context.Context, c client.Reader, namespace, name string) ([]v1alpha1.DelayedDownscale, error) {
	var list v1alpha1.DelayedDownscaleList
	if err := c.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{IndexDelayedTarget: name}); err != nil {
		return nil, fmt.Errorf("list DelayedDownscales of StatefulSet %s: %w", name, err)
	}
	return list.Items, nil
}
