package gate

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// handleControls acts on each annotation whose value it has not acted on yet,
// and on a new spec.rolloutId, which retries a failed group as
// echelon.dev/retry does.
func (ap *Pass) handleControls(pre rollout.Plan) {
	if id := ap.spec.RolloutID; id != "" && id != ap.rolloutID && (ap.st.Failure != nil || ap.st.Rollback != nil) {
		ap.event(corev1.EventTypeNormal, "RetryRequested", "Retry", fmt.Sprintf("spec.rolloutId=%s: %s", id, ap.retry()))
	}
	if v := ap.annotations[v1alpha1.AnnotationRetry]; v != "" && v != ap.st.HandledRetry {
		ap.st.HandledRetry = v
		ap.event(corev1.EventTypeNormal, "RetryRequested", "Retry", fmt.Sprintf("%s=%s: %s", v1alpha1.AnnotationRetry, v, ap.retry()))
	}
	if v := ap.annotations[v1alpha1.AnnotationSkipGate]; v != "" && v != ap.st.HandledSkip {
		ap.st.HandledSkip = v
		ap.event(corev1.EventTypeNormal, "GateSkipped", "SkipGate", fmt.Sprintf("%s=%s: %s", v1alpha1.AnnotationSkipGate, v, ap.skip()))
	}
	if v := ap.annotations[v1alpha1.AnnotationAbort]; v != "" && v != ap.st.HandledAbort {
		ap.st.HandledAbort = v
		ap.abort(pre, v)
	}
}

// retry clears a failure: a failed gate is evaluated again from the start; after
// a rollback the group goes on with the templates as they are now.
func (ap *Pass) retry() string {
	f := ap.st.Failure
	switch {
	case f == nil && ap.st.Rollback == nil:
		return "nothing to retry: the group has not failed"
	case ap.st.Rollback != nil:
		ap.st.Failure, ap.st.Rollback = nil, nil
		return "failure and rollback cleared; the group goes on with the StatefulSet templates as they are now"
	case f.Gate != nil && ap.spec.Analysis != nil:
		g := *f.Gate
		g.StartTime, g.SoakUntil = ap.timeNow(), nil
		if g.Kind == v1alpha1.GateAfterMember {
			g.SoakUntil = ap.soakEnd()
		}
		ap.st.Failure, ap.st.Gate, ap.st.Checks = nil, &g, nil
		ap.syncChecks()
		return fmt.Sprintf("%s gate of %s (revision %s) evaluated again from the start", g.Kind, g.Member, g.Revision)
	}
	ap.st.Failure = nil
	return "failure cleared"
}

// skip passes the pending gate, or the failed gate that holds the group.
func (ap *Pass) skip() string {
	switch {
	case ap.st.Gate != nil:
		g := *ap.st.Gate
		ap.passGate(g)
		return fmt.Sprintf("%s gate of %s (revision %s) passed by hand", g.Kind, g.Member, g.Revision)
	case ap.st.Failure != nil && ap.st.Rollback == nil && ap.st.Failure.Gate != nil:
		g := *ap.st.Failure.Gate
		ap.st.Failure = nil
		ap.passGate(g)
		return fmt.Sprintf("failed %s gate of %s (revision %s) passed by hand; the rollout goes on", g.Kind, g.Member, g.Revision)
	case ap.st.Rollback != nil:
		return "nothing skipped: the group is rolling back or rolled back (retry clears it)"
	}
	return "no gate pending or failed: nothing skipped"
}

// abort rolls the group back now, whatever spec.onFailure says.
func (ap *Pass) abort(pre rollout.Plan, value string) {
	say := func(effect string) {
		ap.event(corev1.EventTypeWarning, "AbortRequested", "Abort", fmt.Sprintf("%s=%s: %s", v1alpha1.AnnotationAbort, value, effect))
	}
	switch rb := ap.st.Rollback; {
	case rb != nil && rb.CompletionTime != nil:
		say("already rolled back")
		return
	case rb != nil:
		say("already rolling back")
		return
	case len(ap.rollbackMembers(pre)) == 0:
		say("nothing to roll back: every member runs its stable revision")
		return
	}
	say("rolling back")
	if ap.st.Failure == nil {
		ap.st.Failure = &v1alpha1.AnalysisFailure{
			Reason: v1alpha1.ReasonAborted, Message: fmt.Sprintf("rollback requested with %s=%s", v1alpha1.AnnotationAbort, value),
			Time: metav1.NewTime(ap.now), Gate: ap.st.Gate, Revisions: revisionsOf(pre),
		}
	}
	ap.st.Gate = nil
	ap.startRollback(pre)
}
