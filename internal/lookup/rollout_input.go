package lookup

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// GroupReads says how ObserveRolloutGroup finds a member's pods and the
// groups claiming a member: through the cache's indexes (IndexedReads, the
// controller) or by listing and filtering (ListedReads, any reader without
// those indexes, such as the API server itself for the kubectl plugin).
type GroupReads interface {
	PodsOf(ctx context.Context, c client.Reader, sts *appsv1.StatefulSet) ([]*corev1.Pod, error)
	GroupsClaiming(ctx context.Context, c client.Reader, namespace, name string, sts *appsv1.StatefulSet) ([]v1alpha1.RolloutGroup, error)
}

// IndexedReads reads through the indexes Register adds to the manager's cache.
type IndexedReads struct{}

// PodsOf returns the pods the StatefulSet controls, from the cache index.
func (IndexedReads) PodsOf(ctx context.Context, c client.Reader, sts *appsv1.StatefulSet) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(sts.Namespace), client.MatchingFields{IndexPodOwner: sts.Name}); err != nil {
		return nil, fmt.Errorf("list pods of StatefulSet %s: %w", sts.Name, err)
	}
	return kube.ControlledBy(list.Items, sts), nil
}

// GroupsClaiming is GroupsClaiming through the cache indexes.
func (IndexedReads) GroupsClaiming(ctx context.Context, c client.Reader, namespace, name string, sts *appsv1.StatefulSet) ([]v1alpha1.RolloutGroup, error) {
	return GroupsClaiming(ctx, c, namespace, name, sts)
}

// ListedReads reads with plain lists that any reader serves: the pods
// matching the StatefulSet's selector, and every RolloutGroup of the
// namespace, filtered by Claims.
type ListedReads struct{}

// PodsOf returns the pods matching the StatefulSet's selector that it controls.
func (ListedReads) PodsOf(ctx context.Context, c client.Reader, sts *appsv1.StatefulSet) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of StatefulSet %s: %w", sts.Name, err)
	}
	var list corev1.PodList
	if err := c.List(ctx, &list, client.InNamespace(sts.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("list pods of StatefulSet %s: %w", sts.Name, err)
	}
	return kube.ControlledBy(list.Items, sts), nil
}

// GroupsClaiming lists every RolloutGroup of the namespace and keeps those
// that claim the StatefulSet.
func (ListedReads) GroupsClaiming(ctx context.Context, c client.Reader, namespace, name string, sts *appsv1.StatefulSet) ([]v1alpha1.RolloutGroup, error) {
	var list v1alpha1.RolloutGroupList
	if err := c.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list RolloutGroups: %w", err)
	}
	var claiming []v1alpha1.RolloutGroup
	for i := range list.Items {
		if Claims(&list.Items[i], name, sts) {
			claiming = append(claiming, list.Items[i])
		}
	}
	return claiming, nil
}

// ObserveRolloutGroup reads the group's members and their pods into the
// planner's input, and returns every pod read. It is the one observation of
// a group: the controller reads it from its cache, the kubectl plugin's
// `plan` from the API server, so that the plugin's dry run plans on what the
// controller would see. What only a running controller knows (its deletion
// expectations: Input.Deleting) is left for the caller to add.
// Besides the members it reads where the rollout stands in spec.steps and
// the restart spec.restartAt asks for.
func ObserveRolloutGroup(ctx context.Context, c client.Reader, reads GroupReads, rg *v1alpha1.RolloutGroup, now time.Time) (rollout.Input, []*corev1.Pod, error) {
	in := rollout.Input{
		GroupDeleting:   rg.DeletionTimestamp != nil,
		Paused:          rg.Spec.Paused,
		MinReadySeconds: rg.Spec.MinReadySeconds,
		Now:             now,
		Intents:         disruption.IntentsOf(rg.Status.Disruption),
		Holder:          "RolloutGroup " + rg.Name,
		Steps:           StepsInput(rg),
	}
	if rg.Spec.RestartAt != nil {
		in.RestartAt = rg.Spec.RestartAt.Time
	}
	if rg.Spec.BatchInterval != nil {
		in.BatchInterval = rg.Spec.BatchInterval.Duration
	}
	if rg.Status.LastBatchTime != nil {
		in.LastBatchTime = rg.Status.LastBatchTime.Time
	}

	if rg.Spec.Selector != nil {
		if _, err := MemberSelector(rg); err != nil {
			in.InvalidSpec = InvalidSelectorReason(err)
			return in, nil, nil
		}
	}
	members, reason, err := ResolveMembers(ctx, c, rg)
	if err != nil {
		return in, nil, err
	}
	in.NoMembersReason = reason
	var allPods []*corev1.Pod
	for _, m := range members {
		if m.StatefulSet != nil {
			pods, err := reads.PodsOf(ctx, c, m.StatefulSet)
			if err != nil {
				return in, nil, err
			}
			m.Pods = pods
			allPods = append(allPods, pods...)
		}
		claims, err := reads.GroupsClaiming(ctx, c, rg.Namespace, m.Name, m.StatefulSet)
		if err != nil {
			return in, nil, err
		}
		for _, other := range claims {
			if other.UID != rg.UID && !slices.Contains(m.ClaimedBy, other.Name) {
				m.ClaimedBy = append(m.ClaimedBy, other.Name)
			}
		}
		in.Members = append(in.Members, m)
	}
	return in, allPods, nil
}

// StepsInput is where the group's rollout stands in spec.steps, from
// status.step; nil without steps. A rollout not yet open starts at step 0,
// and a promote given before it began does not count.
func StepsInput(rg *v1alpha1.RolloutGroup) *rollout.StepsInput {
	if len(rg.Spec.Steps) == 0 {
		return nil
	}
	in := &rollout.StepsInput{Steps: rg.Spec.Steps}
	st := rg.Status.Step
	if !RolloutOpen(rg.Status) || st == nil {
		return in
	}
	in.Index, in.WaitingFor = st.Index, st.WaitingFor
	if st.Since != nil {
		in.Since = st.Since.Time
	}
	promote := rg.Annotations[v1alpha1.AnnotationPromote]
	in.Promoted = promote != "" && promote != st.Promoted
	return in
}

// RolloutOpen reports whether the status records a rollout that has started
// and not completed.
func RolloutOpen(st v1alpha1.RolloutGroupStatus) bool {
	return st.RolloutStartTime != nil && (st.RolloutCompletionTime == nil || st.RolloutCompletionTime.Before(st.RolloutStartTime))
}
