package rolloutgroup

import (
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// observe reads the group's members and their pods from the cache into the
// planner's input. It makes no API calls: every read is served by informers
// (a batch is confirmed by a live read before it is deleted: confirmWithLiveRead).
func (r *Reconciler) observe(ctx context.Context, rg *v1alpha1.RolloutGroup, now time.Time) (rollout.Input, error) {
	in := rollout.Input{
		GroupDeleting:   rg.DeletionTimestamp != nil,
		Paused:          rg.Spec.Paused,
		MinReadySeconds: rg.Spec.MinReadySeconds,
		Now:             now,
		DisruptionHold:  disruption.HoldOf(rg.Status.Disruption),
		Holder:          "RolloutGroup " + rg.Name,
		Steps:           stepsInput(rg),
	}
	if rg.Spec.BatchInterval != nil {
		in.BatchInterval = rg.Spec.BatchInterval.Duration
	}
	if rg.Status.LastBatchTime != nil {
		in.LastBatchTime = rg.Status.LastBatchTime.Time
	}
	if rg.Spec.RestartAt != nil {
		in.RestartAt = rg.Spec.RestartAt.Time
	}

	if rg.Spec.Selector != nil {
		if _, err := lookup.MemberSelector(rg); err != nil {
			in.InvalidSpec = lookup.InvalidSelectorReason(err)
			return in, nil
		}
	}
	members, reason, err := lookup.ResolveMembers(ctx, r.Client, rg)
	if err != nil {
		return in, err
	}
	in.NoMembersReason = reason
	var allPods []*corev1.Pod
	for _, m := range members {
		if m.StatefulSet != nil {
			pods, err := r.podsOf(ctx, m.StatefulSet)
			if err != nil {
				return in, err
			}
			m.Pods = pods
			allPods = append(allPods, pods...)
		}
		claims, err := lookup.GroupsClaiming(ctx, r.Client, rg.Namespace, m.Name, m.StatefulSet)
		if err != nil {
			return in, err
		}
		for _, other := range claims {
			if other.UID != rg.UID && !slices.Contains(m.ClaimedBy, other.Name) {
				m.ClaimedBy = append(m.ClaimedBy, other.Name)
			}
		}
		in.Members = append(in.Members, m)
	}
	in.Deleting = r.deletions.Pending(types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}, allPods, now)
	return in, nil
}

// podsOf returns the pods the StatefulSet controls, from the cache index.
func (r *Reconciler) podsOf(ctx context.Context, sts *appsv1.StatefulSet) ([]*corev1.Pod, error) {
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(sts.Namespace), client.MatchingFields{lookup.IndexPodOwner: sts.Name}); err != nil {
		return nil, fmt.Errorf("list pods of StatefulSet %s: %w", sts.Name, err)
	}
	return kube.ControlledBy(list.Items, sts), nil
}
