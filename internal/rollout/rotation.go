package rollout

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// A rotation replaces pods that need no new revision, only a restart: pods
// created before spec.restartAt once that time has come, and pods a node
// cycler annotated echelon.dev/rotate. It deletes them (or evicts them, per
// spec.podDeletion) as a rollout deletes outdated pods, under the same
// guarantees: one member at a time, in rollout order, only while every other
// member is whole, never more than the member's maxUnavailable not
// available, through the group's disruption budget, and never while paused,
// held by a gate, or within batchInterval.
//
// A revision rollout goes first: while any pod of the group needs a new
// revision (a template change, a step of spec.steps not yet reached, a
// rollback), nothing is rotated. The pods the rollout replaces are created
// after restartAt anyway, so the rotation that follows only replaces what
// the rollout left. The rule keeps one kind of batch in flight at a time and
// the rollout's own accounting (steps, gates, leaked pods) untouched.
//
// A RollingUpdate member's pods are deleted too (a rotation moves no
// partition), but only once its status.currentRevision is its update
// revision: the partition Echelon holds at its replicas then recreates a
// deleted pod on the revision it ran.

// untilRestart is how long until spec.restartAt comes; zero when it is
// unset or has come.
func untilRestart(in Input) time.Duration {
	if in.RestartAt.IsZero() || !in.Now.Before(in.RestartAt) {
		return 0
	}
	return in.RestartAt.Sub(in.Now)
}

// needsRestart reports whether a pod must be replaced without a template
// change: it was created before restartAt, which has come, or it carries
// echelon.dev/rotate and its template does not (a template that carried the
// annotation would have every replacement replaced again, forever).
func needsRestart(pod *corev1.Pod, restartAt, now time.Time, templated bool) bool {
	if _, marked := pod.Annotations[v1alpha1.AnnotationRotate]; marked && !templated {
		return true
	}
	return !restartAt.IsZero() && !now.Before(restartAt) && pod.CreationTimestamp.Time.Before(restartAt)
}

// observeRotation lists the member's live wanted pods (by ordinal) that need
// a restart, lowest ordinal first.
func observeRotation(ms *MemberState, sts *appsv1.StatefulSet, live map[int]*corev1.Pod, in Input) {
	_, templated := sts.Spec.Template.Annotations[v1alpha1.AnnotationRotate]
	for _, ord := range slices.Sorted(maps.Keys(live)) {
		if pod := live[ord]; needsRestart(pod, in.RestartAt, in.Now, templated) {
			ms.ToRestart = append(ms.ToRestart, pod)
		}
	}
}

// decideRotation plans the rotation when no pod of the group needs a new
// revision and some need a restart, and reports whether it did; the group
// then is not complete. It is called once no more than one member uses
// availability.
func decideRotation(in Input, p *Plan) bool {
	if p.ToRestart == 0 {
		return false
	}
	for i := range p.Members {
		if ms := &p.Members[i]; len(ms.Outdated) > 0 || ms.ToRoll > 0 {
			return false // a revision rollout goes first
		}
	}
	p.Rotation = true
	for i := range p.Members {
		if ms := &p.Members[i]; len(ms.ToRestart) > 0 && ms.Phase == v1alpha1.MemberComplete {
			ms.Phase = v1alpha1.MemberPending
			ms.Message = Plural(len(ms.ToRestart), "pod") + " to restart"
		}
	}
	for _, i := range rotationOrder(p.Members) {
		ms := &p.Members[i]
		if len(ms.ToRestart) == 0 {
			if d := ms.disruption(); d != "" {
				// The member rotated last: its pods come back before the
				// next member starts.
				p.Current = ms.Name
				p.Message = fmt.Sprintf("%s: restarted, waiting: %s", ms.Name, d)
				p.Reason = v1alpha1.ReasonRestartingPods
				if ms.scaling() {
					p.Reason = v1alpha1.ReasonWaitingForScale
				}
				return true
			}
			continue
		}
		p.Current = ms.Name
		ms.Phase = v1alpha1.MemberRolling
		ms.Message = Plural(len(ms.ToRestart), "pod") + " to restart"
		if ms.Partitioned && ms.CurrentRevision != ms.UpdateRevision {
			p.Message = fmt.Sprintf("%s: %s to restart, waiting for the StatefulSet controller to set status.currentRevision to %s, so that a deleted pod comes back on it",
				ms.Name, Plural(len(ms.ToRestart), "pod"), ms.UpdateRevision)
			p.Reason = v1alpha1.ReasonWaitingForStatefulSet
			return true
		}
		p.Delete, p.Message, p.Reason = planRestarts(in, ms, p.GateDue)
		askBudget(in, p)
		if wait := in.LastBatchTime.Add(in.BatchInterval).Sub(in.Now); len(p.Delete) == 0 && !in.Paused && in.BatchInterval > 0 && wait > 0 {
			p.RequeueAfter = MinPositive(p.RequeueAfter, wait)
		}
		return true
	}
	return true // unreachable: some member has pods to restart
}

// rotationOrder is the order in which members are rotated: a member that uses
// availability first (it is finished, or waited for, before another starts),
// then list order.
func rotationOrder(members []MemberState) []int {
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	rank := func(ms MemberState) int {
		if ms.disruption() != "" {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rank(members[a]), rank(members[b])) })
	return order
}

// planRestarts picks the pods of the member being rotated to delete now,
// within its maxUnavailable, and says why in a message and a reason.
func planRestarts(in Input, ms *MemberState, gateDue string) ([]*corev1.Pod, string, string) {
	progress := fmt.Sprintf("%s: %s to restart", ms.Name, Plural(len(ms.ToRestart), "pod"))
	if msg, reason := waitBeforeBatch(in, ms, gateDue, progress); reason != "" {
		return nil, msg, reason
	}
	used := ms.Unavailable + ms.Leaving
	del := pickBatch(ms.Name, ms.ToRestart, max(0, int(ms.MaxUnavailable-used)), -1, in)
	if len(del) == 0 {
		return nil, fmt.Sprintf("%s, %d/%d pods unavailable, waiting before restarting more", progress, used, ms.MaxUnavailable),
			v1alpha1.ReasonRestartingPods
	}
	return del, fmt.Sprintf("%s, restarting %s", progress, Plural(len(del), "pod")), v1alpha1.ReasonRestartingPods
}
