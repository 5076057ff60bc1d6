package lookup

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Cache index names. Every event about a StatefulSet, pod, RolloutGroup,
// PodDisruptionBudget or source resource is mapped to the objects it concerns through them, so no
// event causes a scan of every group, policy or pod.
const (
	// IndexGroupMember indexes RolloutGroups by each listed member name.
	IndexGroupMember = "echelon.dev/member"
	// IndexGroupUsesSelector indexes RolloutGroups that select members by label.
	IndexGroupUsesSelector = "echelon.dev/uses-selector"
	// IndexGroupUsesPodDisruptionBudgets indexes RolloutGroups that take
	// maxUnavailable from PodDisruptionBudgets.
	IndexGroupUsesPodDisruptionBudgets = "echelon.dev/uses-pod-disruption-budgets"
	// IndexPodOwner indexes pods by the name of the StatefulSet controlling them.
	IndexPodOwner = "echelon.dev/owner-statefulset"
	// IndexPolicyTarget indexes ScalingPolicies by PolicyTargetKey of their
	// target: its name for a StatefulSet, "<Kind>/<name>" otherwise.
	IndexPolicyTarget = "echelon.dev/policy-target"
	// IndexPolicyLeader indexes ScalingPolicies by spec.replicasFrom.leader.name.
	IndexPolicyLeader = "echelon.dev/policy-leader"
	// IndexPolicyResource indexes ScalingPolicies by their source resource,
	// and by a target that is not a StatefulSet, as ResourceKey: the metadata
	// watches of those kinds map their events through it.
	IndexPolicyResource = "echelon.dev/policy-resource"
	// IndexDelayedTarget indexes DelayedDownscales by spec.targetRef.name.
	IndexDelayedTarget = "echelon.dev/delayed-target"
)

// Register adds every index (indexes, below) to the manager's cache. It must run before
// the cache starts, once per manager.
func Register(ctx context.Context, idx client.FieldIndexer) error {
	for _, ix := range indexes {
		if err := idx.IndexField(ctx, ix.obj, ix.name, ix.fn); err != nil {
			return fmt.Errorf("index %T by %s: %w", ix.obj, ix.name, err)
		}
	}
	return nil
}

// fieldIndex is one index of the cache: objects of obj's kind by fn, named name.
type fieldIndex struct {
	obj  client.Object
	name string
	fn   client.IndexerFunc
}

// indexes are the cache's indexes.
var indexes = []fieldIndex{
	{&v1alpha1.RolloutGroup{}, IndexGroupMember, func(o client.Object) []string {
		rg := o.(*v1alpha1.RolloutGroup)
		names := make([]string, 0, len(rg.Spec.StatefulSets))
		for _, m := range rg.Spec.StatefulSets {
			names = append(names, m.Name)
		}
		return names
	}},
	{&v1alpha1.RolloutGroup{}, IndexGroupUsesSelector, func(o client.Object) []string {
		if o.(*v1alpha1.RolloutGroup).Spec.Selector != nil {
			return []string{"true"}
		}
		return nil
	}},
	{&v1alpha1.RolloutGroup{}, IndexGroupUsesPodDisruptionBudgets, func(o client.Object) []string {
		if UsesPodDisruptionBudgets(o.(*v1alpha1.RolloutGroup)) {
			return []string{"true"}
		}
		return nil
	}},
	{&corev1.Pod{}, IndexPodOwner, func(o client.Object) []string {
		if name := OwnerStatefulSet(o); name != "" {
			return []string{name}
		}
		return nil
	}},
	{&v1alpha1.ScalingPolicy{}, IndexPolicyTarget, func(o client.Object) []string {
		ref := o.(*v1alpha1.ScalingPolicy).Spec.TargetRef
		return []string{PolicyTargetKey(ref.Kind, ref.Name)}
	}},
	{&v1alpha1.ScalingPolicy{}, IndexPolicyLeader, func(o client.Object) []string {
		if from := o.(*v1alpha1.ScalingPolicy).Spec.ReplicasFrom; from != nil && from.Leader != nil {
			return []string{from.Leader.Name}
		}
		return nil
	}},
	{&v1alpha1.ScalingPolicy{}, IndexPolicyResource, func(o client.Object) []string {
		spec := o.(*v1alpha1.ScalingPolicy).Spec
		var keys []string
		if from := spec.ReplicasFrom; from != nil && from.Resource != nil {
			if gv, err := schema.ParseGroupVersion(from.Resource.APIVersion); err == nil {
				keys = append(keys, ResourceKey(gv.Group, from.Resource.Kind, from.Resource.Name))
			}
		}
		if !spec.TargetRef.IsStatefulSet() {
			keys = append(keys, ResourceKey(appsv1.GroupName, spec.TargetRef.Kind, spec.TargetRef.Name))
		}
		return keys
	}},
	{&v1alpha1.DelayedDownscale{}, IndexDelayedTarget, func(o client.Object) []string {
		return []string{o.(*v1alpha1.DelayedDownscale).Spec.TargetRef.Name}
	}},
}

// OwnerStatefulSet is the name of the StatefulSet controlling o, or "".
func OwnerStatefulSet(o client.Object) string {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "StatefulSet" || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return ""
	}
	return ref.Name
}

// ResourceKey is the key of a resource in IndexPolicyResource.
func ResourceKey(group, kind, name string) string { return group + "/" + kind + "/" + name }

// PolicyTargetKey is the key of a ScalingPolicy's target in IndexPolicyTarget:
// the name of a StatefulSet (kind "" or StatefulSet), "<Kind>/<name>" of a
// Deployment or ReplicaSet. StatefulSet names hold no "/", so the two never
// collide.
func PolicyTargetKey(kind, name string) string {
	ref := v1alpha1.PolicyTargetReference{Kind: kind, Name: name}
	if ref.IsStatefulSet() {
		return name
	}
	return kind + "/" + name
}
