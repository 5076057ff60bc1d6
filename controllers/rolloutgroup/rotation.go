package rolloutgroup

import (
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// trackRotation sets the rotation's status (status.rotation, each member's
// podsToRestart, status.restartedAt) from the old status and the plan, and
// reports whether a rotation is open: from the first pass that sees a pod to
// restart until no pod is left to restart and the group is complete. A
// paused group opens it too, so that it shows Paused rather than Complete.
// Every field is derived from the pods at each pass but the start and end
// times, which change once per rotation.
func trackRotation(st *v1alpha1.RolloutGroupStatus, up *statusUpdate, rg *v1alpha1.RolloutGroup, plan rollout.Plan, now time.Time) bool {
	old := rg.Status
	ts := metav1.NewTime(now)
	rot := old.Rotation.DeepCopy()
	for i, m := range plan.Members {
		st.StatefulSets[i].PodsToRestart = int32(len(m.ToRestart))
	}
	open := rot != nil && rot.StartTime != nil && rot.CompletionTime == nil
	if !open && plan.ToRestart > 0 && plan.Settled && plan.Blocked == nil {
		rot, open, up.rotationStarted = &v1alpha1.RotationStatus{StartTime: &ts}, true, true
		st.LastProgressTime = &ts // progressDeadline counts from the start, as for a rollout
	}
	if rot != nil {
		rot.PodsToRestart = plan.ToRestart
	}
	if open && plan.Complete {
		rot.CompletionTime, open, up.rotationCompleted = &ts, false, true
	}
	st.Rotation = rot
	st.RestartedAt = old.RestartedAt
	// Complete means no pod left to restart and every member whole.
	if ra := rg.Spec.RestartAt; ra != nil && !now.Before(ra.Time) && plan.Complete &&
		(st.RestartedAt == nil || !st.RestartedAt.Equal(ra)) {
		st.RestartedAt = ra.DeepCopy()
	}
	return open
}

// rotateMarked reports whether a node cycler asked for the pod's replacement.
func rotateMarked(pod *corev1.Pod) bool {
	_, ok := pod.Annotations[v1alpha1.AnnotationRotate]
	return ok
}

// rotationChanged reports whether a rotation began or ended, or a restartAt
// was honoured, between two statuses: a user waits on those (kubectl wait).
// The count of pods to restart waits for the next progress write.
func rotationChanged(written, next v1alpha1.RolloutGroupStatus) bool {
	w, n := written.Rotation, next.Rotation
	if (w == nil) != (n == nil) {
		return true
	}
	if w != nil && (!equality.Semantic.DeepEqual(w.StartTime, n.StartTime) || !equality.Semantic.DeepEqual(w.CompletionTime, n.CompletionTime)) {
		return true
	}
	return !equality.Semantic.DeepEqual(written.RestartedAt, next.RestartedAt)
}

// recordRestarts counts and announces one batch of a rotation: the
// PodsRestarted Event names each pod, as PodsRolled does for a rollout.
func (r *Reconciler) recordRestarts(rg *v1alpha1.RolloutGroup, plan rollout.Plan, removed []*corev1.Pod, evict bool) {
	metrics.PodsRestarted.WithLabelValues(rg.Namespace, rg.Name, plan.Current).Add(float64(len(removed)))
	verb := "deleted"
	if evict {
		verb = "evicted"
	}
	names := make([]string, 0, len(removed))
	for _, pod := range removed {
		names = append(names, fmt.Sprintf("%s (created %s)", pod.Name, pod.CreationTimestamp.UTC().Format(time.RFC3339)))
	}
	// The first pod is the related object: it keeps the batches' Events
	// apart (see removePods).
	r.events.Eventf(rg, removed[0], corev1.EventTypeNormal, "PodsRestarted", removalAction(evict),
		"%s %s of StatefulSet %s to restart them with no template change: %s",
		verb, rollout.Plural(len(removed), "pod"), plan.Current, strings.Join(names, ", "))
}

// recordRotation announces the start and the end of a rotation.
func (r *Reconciler) recordRotation(rg *v1alpha1.RolloutGroup, up statusUpdate) {
	st := up.status
	if up.rotationStarted {
		r.events.Eventf(rg, nil, corev1.EventTypeNormal, "RestartStarted", "Restart",
			"restart started: %s to replace with no template change%s", rollout.Plural(int(st.Rotation.PodsToRestart), "pod"), restartAtNote(rg))
	}
	if up.rotationCompleted {
		r.events.Eventf(rg, nil, corev1.EventTypeNormal, "RestartComplete", "Restart",
			"restart complete in %s: every pod asked for was replaced and every StatefulSet is whole%s",
			st.Rotation.CompletionTime.Sub(st.Rotation.StartTime.Time).Round(time.Second), restartAtNote(rg))
	}
}

func restartAtNote(rg *v1alpha1.RolloutGroup) string {
	if ra := rg.Spec.RestartAt; ra != nil {
		return fmt.Sprintf(" (spec.restartAt %s)", ra.UTC().Format(time.RFC3339))
	}
	return ""
}
