package rolloutgroup

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// stepStatus is status.step for the plan's step: the value of
// echelon.dev/promote acted on is the one the plan used, else the one
// recorded, else (a rollout starting) the annotation's current value.
//
// A plan that did not look at the steps (a blocked group, a StatefulSet its
// controller has not observed yet) keeps the recorded step: it must not
// start the steps over. A group that has never started a rollout has no
// step: the planner's "past the last step" would read as a rollout that
// went through its steps.
func stepStatus(rg *v1alpha1.RolloutGroup, step *rollout.StepState, rolloutStarted bool) *v1alpha1.StepStatus {
	if len(rg.Spec.Steps) == 0 || (rg.Status.RolloutStartTime == nil && !rolloutStarted) {
		return nil
	}
	if step == nil {
		return rg.Status.Step.DeepCopy()
	}
	promote := rg.Annotations[v1alpha1.AnnotationPromote]
	st := &v1alpha1.StepStatus{Index: step.Index, Percent: step.Percent, TargetReplicas: step.Target, WaitingFor: step.WaitingFor}
	switch {
	case step.PromoteUsed || rolloutStarted || rg.Status.Step == nil:
		st.Promoted = promote
	default:
		st.Promoted = rg.Status.Step.Promoted
	}
	if step.WaitingFor != v1alpha1.StepWaitDone {
		since := metav1.NewTime(step.Since)
		st.Since = &since
	}
	if !step.Until.IsZero() {
		until := metav1.NewTime(step.Until)
		st.Until = &until
	}
	return st
}

// stepChanged reports whether status.step moved in a way a user must see at
// once, and that must survive a restart: the step, what it waits for, the
// promote acted on.
func stepChanged(written, next *v1alpha1.StepStatus) bool {
	if (written == nil) != (next == nil) {
		return true
	}
	return written != nil && (written.Index != next.Index || written.WaitingFor != next.WaitingFor || written.Promoted != next.Promoted)
}

// recordStep emits the Events and metrics of the rollout's steps: a promote
// acted on, a step that starts, a step that pauses.
func (r *Reconciler) recordStep(rg *v1alpha1.RolloutGroup, old, next *v1alpha1.StepStatus, step *rollout.StepState) {
	if next == nil {
		return
	}
	metrics.StepIndex.WithLabelValues(rg.Namespace, rg.Name).Set(float64(next.Index))
	waiting := 0.0
	if next.WaitingFor == v1alpha1.StepWaitPromote {
		waiting = 1
	}
	metrics.StepWaitingForPromote.WithLabelValues(rg.Namespace, rg.Name).Set(waiting)
	if step != nil && step.PromoteUsed {
		metrics.Promotes.WithLabelValues(rg.Namespace, rg.Name).Inc()
		r.events.Eventf(rg, nil, corev1.EventTypeNormal, "Promoted", "Promote",
			"promoted by %s=%s: the rollout goes on to step %d of %d", v1alpha1.AnnotationPromote, next.Promoted, next.Index+1, len(rg.Spec.Steps))
	}
	if old != nil && old.Index == next.Index && old.WaitingFor == next.WaitingFor {
		return
	}
	n := len(rg.Spec.Steps)
	switch next.WaitingFor {
	case v1alpha1.StepWaitPods:
		r.events.Eventf(rg, nil, corev1.EventTypeNormal, "StepStarted", "Step",
			"step %d of %d started: rolling up to %d%% of the group's pods (%d of %d)", next.Index+1, n, next.Percent, next.TargetReplicas, rg.Status.Replicas)
	case v1alpha1.StepWaitPromote:
		r.events.Eventf(rg, nil, corev1.EventTypeNormal, "StepPaused", "Step",
			"step %d of %d done (%d pods updated): waiting for a promote (%s=<new value>)", next.Index+1, n, next.TargetReplicas, v1alpha1.AnnotationPromote)
	case v1alpha1.StepWaitDuration:
		r.events.Eventf(rg, nil, corev1.EventTypeNormal, "StepPaused", "Step",
			"step %d of %d done (%d pods updated): paused until %s", next.Index+1, n, next.TargetReplicas, next.Until.UTC().Format("2006-01-02T15:04:05Z"))
	}
}
