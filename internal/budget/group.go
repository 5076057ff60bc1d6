package budget

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// GroupView reads the group's members and their pods from r (the API
// server, for a decision that admits a disruption) and builds the view a
// request of reason is judged on: each member a zone, with the budget that
// reason spends (a rollout the members' maxUnavailable; an eviction the
// group's disruptionBudget, which defaults to it), the group's recorded intents
// and whether a rollout of it is open. A member that does not exist is left
// out: the group is Blocked and rolls nothing, and it has no pods to take.
func GroupView(ctx context.Context, r client.Reader, rg *v1alpha1.RolloutGroup, reason v1alpha1.DisruptionReason, now time.Time) (disruption.View, error) {
	members, _, err := lookup.ResolveMembers(ctx, r, rg)
	if err != nil {
		return disruption.View{}, err
	}
	for i := range members {
		m := &members[i]
		if m.StatefulSet == nil {
			continue
		}
		if m.Pods, err = livePods(ctx, r, m); err != nil {
			return disruption.View{}, err
		}
	}
	return ViewOf(rg, members, reason, now, nil)
}

// ViewOf builds the view of a group from members already read (their
// StatefulSets and pods), for a request of reason. deleting holds pod UIDs
// this process deleted that the members' pods may not show yet.
func ViewOf(rg *v1alpha1.RolloutGroup, members []rollout.Member, reason v1alpha1.DisruptionReason, now time.Time, deleting func(types.UID) bool) (disruption.View, error) {
	v := disruption.View{Now: now, Intents: disruption.IntentsOf(rg.Status.Disruption), RolloutOpen: RolloutOpen(rg)}
	budget := rg.Spec.DisruptionBudget
	var partition func(string) string
	if reason == v1alpha1.DisruptionEviction && budget != nil {
		if budget.CrossZoneDelay != nil {
			v.CrossZoneDelay = budget.CrossZoneDelay.Duration
		}
		group := int32(1)
		if budget.PodNamePartitionGroup != nil {
			group = *budget.PodNamePartitionGroup
		}
		var err error
		if partition, err = disruption.PartitionFunc(budget.PodNamePartitionRegex, group); err != nil {
			return v, fmt.Errorf("spec.disruptionBudget.%w", err)
		}
	}
	for _, m := range members {
		if m.StatefulSet == nil {
			continue
		}
		replicas := kube.Replicas(m.StatefulSet)
		maxUnavailable := rollout.ResolveMaxUnavailable(m.MaxUnavailable, replicas)
		if reason == v1alpha1.DisruptionEviction && budget != nil {
			maxUnavailable = disruption.ResolveBudget(budget.MaxUnavailable, replicas, maxUnavailable)
		}
		opts := disruption.ZoneOptions{MaxUnavailable: maxUnavailable, MinReadySeconds: rg.Spec.MinReadySeconds,
			Now: now, Partition: partition}
		pods := m.Pods
		if deleting != nil {
			pods = markDeleting(pods, deleting)
		}
		v.Zones = append(v.Zones, disruption.ZoneOf(m.StatefulSet, pods, opts))
	}
	return v, nil
}

// markDeleting returns pods with a deletionTimestamp set on copies of those
// deleting names, so that they count as terminating.
func markDeleting(pods []*corev1.Pod, deleting func(types.UID) bool) []*corev1.Pod {
	out := make([]*corev1.Pod, len(pods))
	for i, pod := range pods {
		if pod.DeletionTimestamp == nil && deleting(pod.UID) {
			pod = pod.DeepCopy()
			pod.DeletionTimestamp = &metav1.Time{}
		}
		out[i] = pod
	}
	return out
}

// RolloutOpen names the member a rollout of the group is at, when one has
// started and not completed (whatever its phase: progressing, analyzing,
// paused or failed half-way); "" when none.
func RolloutOpen(rg *v1alpha1.RolloutGroup) string {
	st := rg.Status
	if st.RolloutStartTime == nil || (st.RolloutCompletionTime != nil && !st.RolloutCompletionTime.Before(st.RolloutStartTime)) {
		return ""
	}
	if st.Phase == v1alpha1.PhaseComplete || st.Phase == v1alpha1.PhaseWaiting {
		return ""
	}
	if st.CurrentStatefulSet != "" {
		return st.CurrentStatefulSet
	}
	return "RolloutGroup " + rg.Name
}

// livePods lists the pods a member's StatefulSet controls from r.
func livePods(ctx context.Context, r client.Reader, m *rollout.Member) ([]*corev1.Pod, error) {
	return statefulSetPods(ctx, r, m.StatefulSet)
}
