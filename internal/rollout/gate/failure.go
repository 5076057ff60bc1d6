package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/analysis"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// fail records the failure of the pending gate on a check, and rolls back
// when spec.onFailure says so.
func (ap *Pass) fail(pre rollout.Plan, st v1alpha1.CheckStatus) {
	g := *ap.st.Gate
	c, _ := ap.checkSpec(st.Name)
	reason, eventReason := v1alpha1.ReasonAnalysisFailed, "GateFailed"
	if st.Phase == v1alpha1.CheckErrored {
		reason, eventReason = v1alpha1.ReasonAnalysisError, v1alpha1.ReasonAnalysisError
	}
	msg := fmt.Sprintf("%s, at the %s gate of %s (revision %s)", analysis.Explain(c, st), g.Kind, g.Member, g.Revision)
	ap.st.Failure = &v1alpha1.AnalysisFailure{Reason: reason, Check: st.Name, Message: msg, Time: metav1.NewTime(ap.now),
		Gate: &g, Revisions: revisionsOf(pre)}
	ap.st.Gate = nil
	if ap.spec.OnFailure != v1alpha1.FailureRollback {
		ap.event(corev1.EventTypeWarning, eventReason, "Analyze",
			msg+"; onFailure Pause: the group holds until the templates change or echelon.dev/retry or echelon.dev/skip-gate is set")
		return
	}
	ap.event(corev1.EventTypeWarning, eventReason, "Analyze", msg+"; onFailure Rollback: rolling back")
	ap.startRollback(pre)
}

// startRollback starts rolling back every member that moved, most recently
// rolled first, and says so in an Event. With no member to roll back the
// failure holds the group as with onFailure Pause.
func (ap *Pass) startRollback(pre rollout.Plan) {
	members := ap.rollbackMembers(pre)
	if len(members) == 0 {
		ap.event(corev1.EventTypeWarning, "RollbackStarted", "Rollback", "nothing to roll back: every member runs its stable revision; the group holds")
		return
	}
	ap.st.Rollback = &v1alpha1.RollbackStatus{StartTime: metav1.NewTime(ap.now), Members: members}
	ap.rollbackStarted = ap.st.Failure.Reason
	var parts []string
	for _, m := range members {
		parts = append(parts, fmt.Sprintf("%s (%s to %s)", m.Name, m.From, m.To))
	}
	ap.event(corev1.EventTypeWarning, "RollbackStarted", "Rollback", fmt.Sprintf("rolling back %s, most recently rolled first: %s (cause: %s)",
		rollout.Plural(len(members), "StatefulSet"), strings.Join(parts, ", "), ap.st.Failure.Message))
}

// rollbackMembers are the members that moved, in the order they come back:
// the one partly rolled first, then the others in reverse list order.
func (ap *Pass) rollbackMembers(pre rollout.Plan) []v1alpha1.RollbackMember {
	var partly, rest []v1alpha1.RollbackMember
	for i := len(pre.Members) - 1; i >= 0; i-- {
		ms := pre.Members[i]
		stable := ap.stable[ms.Name]
		if stable == "" || ms.UpdateRevision == "" || ms.UpdateRevision == stable {
			continue
		}
		m := v1alpha1.RollbackMember{Name: ms.Name, From: ms.UpdateRevision, To: stable}
		if ms.Updated > 0 && ms.Updated < ms.Replicas {
			partly = append(partly, m)
		} else {
			rest = append(rest, m)
		}
	}
	return append(partly, rest...)
}

// RollbackRecorded reports whether written, the status the API server
// holds, already records the rollback under way (its members and their
// revisions). The controller writes GateRecord before restoring any template
// when it does not: a process that dies between two template writes must
// leave the rollback to the next leader, which would otherwise take a
// restored template for a new rollout and leave the other members on the
// failed revision. An abort starts its rollback the same way.
func (ap *Pass) RollbackRecorded(written v1alpha1.RolloutGroupStatus) bool {
	return !ap.RollingBack() ||
		(written.Analysis != nil && equality.Semantic.DeepEqual(written.Analysis.Rollback, ap.st.Rollback) &&
			equality.Semantic.DeepEqual(written.Analysis.Failure, ap.st.Failure))
}

// SetRestore records how the restoration of the rollback's templates stands:
// the members whose template is not restored yet, and why a template cannot
// be restored ("" when it can).
func (ap *Pass) SetRestore(pending []string, failed string) {
	ap.restorePending, ap.restoreFailed = pending, failed
}

// AfterAct opens the gates the pass's action (deleted pods deleted) and plan
// call for, and completes a rollback whose members all run their stable
// revision again.
func (ap *Pass) AfterAct(plan rollout.Plan, deleted int32) {
	if rb := ap.st.Rollback; rb != nil && rb.CompletionTime == nil && plan.Complete && ap.restoreFailed == "" && len(ap.restorePending) == 0 {
		done := true
		for _, m := range rb.Members {
			if ms := memberOf(plan, m.Name); ms != nil && ms.UpdateRevision != m.To {
				done = false
			}
		}
		if done {
			rb.CompletionTime = ap.timeNow()
			ap.rolledBack = true
			ap.event(corev1.EventTypeNormal, "RollbackComplete", "Rollback", fmt.Sprintf("rollback complete in %s: %s back on their stable revision; the group stays Failed until the templates change or echelon.dev/retry is set",
				ap.now.Sub(rb.StartTime.Time).Round(time.Second), rollout.Plural(len(rb.Members), "StatefulSet")))
		}
	}
	if ap.spec.Analysis == nil || ap.st.Failure != nil || ap.st.Rollback != nil || plan.Blocked != nil {
		return
	}
	if deleted > 0 && len(checksOf(ap.spec.Analysis, v1alpha1.GateAfterBatch)) > 0 {
		if ms := memberOf(plan, plan.Current); ms != nil {
			ap.openBatchGate(ms.Name, ms.UpdateRevision)
		}
	}
	if ap.st.Gate == nil && plan.GateDue != "" {
		ap.openMemberGate(plan)
	}
}

// releaseOnNewTemplate ends a failure once the templates moved on: with
// onFailure Pause, any member's update revision differing from the one it had
// when the group failed; after a rollback, any member on a revision that is
// neither the one rolled back nor its stable one (re-applying the failed
// template does not restart the rollout: retry does).
func (ap *Pass) releaseOnNewTemplate(pre rollout.Plan) {
	f := ap.st.Failure
	if f == nil && ap.st.Rollback == nil {
		return
	}
	for _, ms := range pre.Members {
		if ms.UpdateRevision == "" {
			continue
		}
		changed := false
		if rb := ap.st.Rollback; rb != nil {
			allowed := []string{ap.stable[ms.Name]}
			for _, m := range rb.Members {
				if m.Name == ms.Name {
					allowed = []string{m.From, m.To}
				}
			}
			changed = !slices.Contains(allowed, ms.UpdateRevision)
		} else if i := slices.IndexFunc(f.Revisions, func(r v1alpha1.MemberRevision) bool { return r.Name == ms.Name }); i >= 0 {
			changed = f.Revisions[i].Revision != ms.UpdateRevision
		}
		if changed {
			what := "the failure"
			if f != nil {
				what = fmt.Sprintf("the failure (%s)", f.Reason)
			}
			ap.event(corev1.EventTypeNormal, "FailureCleared", "Release",
				fmt.Sprintf("StatefulSet %s moved to revision %s: %s no longer holds the group", ms.Name, ms.UpdateRevision, what))
			ap.st.Failure, ap.st.Rollback = nil, nil
			return
		}
	}
}

// GateRecord is the status to write before the deletions that open an
// AfterBatch gate, and before the first template write of a rollback: the
// written status with the whole analysis of the pass
// (the new gate, its fresh check records, the controls acted on) and the
// members' stable and gate-passed revisions. Recording the gate alone would
// let a crash after the deletions forget a skip-gate or retry acted on in the
// pass, and the restarted operator would act on it again, against the new gate.
func (ap *Pass) GateRecord(written v1alpha1.RolloutGroupStatus) v1alpha1.RolloutGroupStatus {
	next := *written.DeepCopy()
	next.Analysis = ap.Status()
	for i := range next.StatefulSets {
		m := &next.StatefulSets[i]
		if rev := ap.stable[m.Name]; rev != "" {
			m.StableRevision = rev
		}
		if rev, ok := ap.gatePassed[m.Name]; ok {
			m.GatePassedRevision = rev
		}
	}
	return next
}

// FailOnStall fails a rollout that made no progress for stalledFor, past
// deadline (spec.progressDeadline), and rolls it back, when spec.onFailure is
// Rollback: a release whose pods never become Ready (a crash loop) fills the
// member's maxUnavailable and holds the rollout for good, so it fails as a
// failed gate does. The controller says when the rollout is stalled (open,
// not paused, the deadline passed); a pending gate, a group blocked or
// already failed, or any other onFailure leaves it Stalled, as a Deployment
// is: the rollout goes on.
func (ap *Pass) FailOnStall(pre rollout.Plan, stalledFor, deadline time.Duration) {
	if ap.spec.OnFailure != v1alpha1.FailureRollback || ap.spec.Paused || deadline <= 0 || stalledFor < deadline ||
		ap.st.Failure != nil || ap.st.Rollback != nil || ap.st.Gate != nil || pre.Blocked != nil {
		return
	}
	msg := fmt.Sprintf("no progress for %s (progressDeadline %s)", stalledFor.Round(time.Second), deadline)
	if pre.Message != "" {
		msg += ": " + pre.Message
	}
	ap.st.Failure = &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonProgressDeadlineExceeded, Message: msg,
		Time: metav1.NewTime(ap.now), Revisions: revisionsOf(pre)}
	ap.event(corev1.EventTypeWarning, v1alpha1.ReasonProgressDeadlineExceeded, "Stall", msg+"; onFailure Rollback: rolling back")
	ap.startRollback(pre)
}
