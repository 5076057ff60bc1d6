package controllers

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

// The analysis of a RolloutGroup, as one state machine kept in
// status.analysis: gates open after a batch of pods (AfterBatch) or once a
// member is complete (AfterMember), their checks are queried until each passes
// or one fails, a failure holds the group (onFailure Pause) or rolls it back
// (onFailure Rollback, or echelon.dev/abort), and the manual controls act once
// per annotation value. Everything here is client-free: the controller runs
// the queries and restores the templates between the steps.

// analysisRequeueFloor is the shortest wait before a gate's next step: a check
// due now (initialDelay 0 on a gate just opened) is queried on the next pass.
const analysisRequeueFloor = 100 * time.Millisecond

// analysisEvent is an Event the analysis asks the controller to emit.
type analysisEvent struct {
	eventType string
	reason    string
	action    string
	message   string
}

// checkResult is one query's result, for the metrics.
type checkResult struct {
	check  string
	result string // success, failure or error
}

// analysisPass carries a group's analysis through one reconcile.
type analysisPass struct {
	namespace, name string
	spec            v1alpha1.RolloutGroupSpec
	annotations     map[string]string
	st              v1alpha1.AnalysisStatus
	// stable and gatePassed are each member's stable revision and the
	// revision whose AfterMember gate it passed.
	stable     map[string]string
	gatePassed map[string]string
	now        time.Time

	events  []analysisEvent
	results []checkResult
	// rollbackStarted is the reason of a rollback started in this pass.
	rollbackStarted string
	// rolledBack is true on the pass where a rollback completed.
	rolledBack bool
	// restorePending names the members whose template is not restored yet;
	// restoreFailed says why a template cannot be restored.
	restorePending []string
	restoreFailed  string
	// restoreErr is an API error restoring templates: the pass holds, is
	// saved, and fails after its status is written.
	restoreErr error
}

func newAnalysisPass(rg *v1alpha1.RolloutGroup, now time.Time) *analysisPass {
	ap := &analysisPass{
		namespace: rg.Namespace, name: rg.Name, spec: rg.Spec, annotations: rg.Annotations, now: now,
		stable: map[string]string{}, gatePassed: map[string]string{},
	}
	if rg.Status.Analysis != nil {
		ap.st = *rg.Status.Analysis.DeepCopy()
	}
	for _, m := range rg.Status.StatefulSets {
		ap.stable[m.Name] = m.StableRevision
		ap.gatePassed[m.Name] = m.GatePassedRevision
	}
	return ap
}

// resolveStable fills in the stable revision of members that status does not
// know yet (a new group, or one that started before Echelon recorded it): the
// revision every pod runs, else the StatefulSet's currentRevision when it
// differs from the update revision.
func (ap *analysisPass) resolveStable(members []rollout.MemberState) {
	for _, ms := range members {
		if ap.stable[ms.Name] != "" {
			continue
		}
		switch {
		case ms.UniformRevision != "":
			ap.stable[ms.Name] = ms.UniformRevision
		case ms.CurrentRevision != "" && ms.CurrentRevision != ms.UpdateRevision:
			ap.stable[ms.Name] = ms.CurrentRevision
		}
	}
}

// applyTo sets the planner's input from the analysis state: the holds, the
// rollback mode, the AfterMember gates and each member's revisions.
func (ap *analysisPass) applyTo(in *rollout.Input) {
	for i := range in.Members {
		in.Members[i].StableRevision = ap.stable[in.Members[i].Name]
		in.Members[i].GatePassedRevision = ap.gatePassed[in.Members[i].Name]
	}
	in.Hold, in.RollingBack = ap.hold(), ap.rollingBack()
	in.MemberGates = ap.spec.Analysis != nil && hasMemberGate(ap.spec.Analysis) && ap.st.Failure == nil && ap.st.Rollback == nil
}

// rollingBack reports whether a rollback is under way.
func (ap *analysisPass) rollingBack() bool {
	return ap.st.Rollback != nil && ap.st.Rollback.CompletionTime == nil
}

// hold says why nothing may be deleted now, or nil.
func (ap *analysisPass) hold() *rollout.Hold {
	switch {
	case ap.rollingBack() && ap.restoreFailed != "":
		return &rollout.Hold{Reason: v1alpha1.ReasonRollbackFailed, Message: ap.restoreFailed}
	case ap.rollingBack() && len(ap.restorePending) > 0:
		return &rollout.Hold{Reason: v1alpha1.ReasonRollingBack,
			Message: "restoring the template of " + strings.Join(ap.restorePending, ", ")}
	case ap.rollingBack():
		return nil
	case ap.st.Failure != nil:
		return &rollout.Hold{Reason: ap.st.Failure.Reason, Message: "failed: " + ap.st.Failure.Message}
	case ap.st.Gate != nil && ap.st.Gate.StartTime == nil:
		return &rollout.Hold{Reason: v1alpha1.ReasonWaitingForPods,
			Message: fmt.Sprintf("waiting for the batch's pods before the AfterBatch gate of %s", ap.st.Gate.Member)}
	case ap.st.Gate != nil:
		reason, msg := ap.gateProgress()
		return &rollout.Hold{Reason: reason, Message: msg}
	}
	return nil
}

// begin runs the steps that come before the queries, on the plan made with
// the state as it was: the manual controls, the end of a failure whose
// templates changed, and the opening, start and cancelling of gates.
func (ap *analysisPass) begin(pre rollout.Plan) {
	ap.resolveStable(pre.Members)
	if ap.spec.Analysis == nil {
		ap.st.Gate, ap.st.Checks = nil, nil
	}
	ap.handleControls(pre)
	if pre.Settled {
		ap.releaseOnNewTemplate(pre)
	}
	if ap.spec.Analysis == nil || ap.st.Failure != nil || ap.st.Rollback != nil || pre.Blocked != nil {
		return
	}
	if g := ap.st.Gate; g != nil {
		ms := memberOf(pre, g.Member)
		switch {
		case ms == nil || (pre.Settled && ms.UpdateRevision != g.Revision):
			// The member's template changed again (or it left the group): the
			// gate was about a revision that is no longer rolled out.
			ap.st.Gate = nil
		case g.StartTime == nil && ms.Unavailable == 0 && ms.Leaving == 0:
			// The batch's pods are back and available: the checks' clock starts.
			g.StartTime = ap.timeNow()
		}
	}
	if ap.st.Gate == nil && pre.GateDue != "" {
		ap.openMemberGate(pre)
	}
	ap.syncChecks()
}

// handleControls acts on each annotation whose value it has not acted on yet.
func (ap *analysisPass) handleControls(pre rollout.Plan) {
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
func (ap *analysisPass) retry() string {
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
func (ap *analysisPass) skip() string {
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
func (ap *analysisPass) abort(pre rollout.Plan, value string) {
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

// releaseOnNewTemplate ends a failure once the templates moved on: with
// onFailure Pause, any member's update revision differing from the one it had
// when the group failed; after a rollback, any member on a revision that is
// neither the one rolled back nor its stable one (re-applying the failed
// template does not restart the rollout: retry does).
func (ap *analysisPass) releaseOnNewTemplate(pre rollout.Plan) {
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

// openMemberGate opens the AfterMember gate of the member the plan names.
func (ap *analysisPass) openMemberGate(plan rollout.Plan) {
	ms := memberOf(plan, plan.GateDue)
	if ms == nil || ap.gatePassed[ms.Name] == ms.UpdateRevision {
		return // passed in this pass (skipped), after the plan was made
	}
	ap.st.Gate = &v1alpha1.GateStatus{Member: ms.Name, Kind: v1alpha1.GateAfterMember, Revision: ms.UpdateRevision,
		StartTime: ap.timeNow(), SoakUntil: ap.soakEnd()}
	ap.st.Checks = nil
	ap.syncChecks()
}

// openBatchGate opens the AfterBatch gate of a batch just deleted; its clock
// starts once the batch's pods are back.
// openBatchGateBefore opens, before plan's deletions are made, the AfterBatch
// gate they will open, and says whether it did. The controller records it in
// status before deleting: a crash between the two must not let the next batch
// go ungated. A gate opened for deletions that then fail costs one evaluation
// of its checks, nothing more.
func (ap *analysisPass) openBatchGateBefore(plan rollout.Plan) bool {
	if ap.spec.Analysis == nil || ap.st.Failure != nil || ap.st.Rollback != nil || plan.Blocked != nil ||
		len(plan.Delete) == 0 || len(checksOf(ap.spec.Analysis, v1alpha1.GateAfterBatch)) == 0 {
		return false
	}
	ms := memberOf(plan, plan.Current)
	if ms == nil {
		return false
	}
	ap.openBatchGate(ms.Name, ms.UpdateRevision)
	return true
}

func (ap *analysisPass) openBatchGate(member, revision string) {
	ap.st.Gate = &v1alpha1.GateStatus{Member: member, Kind: v1alpha1.GateAfterBatch, Revision: revision}
	ap.st.Checks = nil
	ap.syncChecks()
}

// syncChecks keeps one record per check of the pending gate's kind, in spec
// order, keeping the counts of checks already there.
func (ap *analysisPass) syncChecks() {
	if ap.st.Gate == nil || ap.spec.Analysis == nil {
		return
	}
	var next []v1alpha1.CheckStatus
	for _, c := range checksOf(ap.spec.Analysis, ap.st.Gate.Kind) {
		st := analysis.NewCheckStatus(c.Name)
		if i := slices.IndexFunc(ap.st.Checks, func(s v1alpha1.CheckStatus) bool { return s.Name == c.Name }); i >= 0 {
			st = ap.st.Checks[i]
			st.Phase = analysis.PhaseOf(analysis.SettingsOf(c), st)
		}
		next = append(next, st)
	}
	ap.st.Checks = next
}

// dueChecks are the checks of the started gate to query now.
func (ap *analysisPass) dueChecks() []v1alpha1.AnalysisCheck {
	g := ap.st.Gate
	if g == nil || g.StartTime == nil || ap.spec.Analysis == nil {
		return nil
	}
	var due []v1alpha1.AnalysisCheck
	for _, c := range checksOf(ap.spec.Analysis, g.Kind) {
		if st, ok := ap.check(c.Name); ok && analysis.Due(analysis.SettingsOf(c), st, g.StartTime.Time, ap.now) {
			due = append(due, c)
		}
	}
	return due
}

// queryVars are the template variables of the pending gate's queries.
func (ap *analysisPass) queryVars() analysis.Vars {
	return analysis.Vars{Member: ap.st.Gate.Member, Namespace: ap.namespace, Group: ap.name, Revision: ap.st.Gate.Revision}
}

// record counts the outcomes of the queries just run.
func (ap *analysisPass) record(outcomes map[string]analysis.Outcome) {
	for i := range ap.st.Checks {
		st := &ap.st.Checks[i]
		o, ok := outcomes[st.Name]
		c, known := ap.checkSpec(st.Name)
		if !ok || !known {
			continue
		}
		*st = analysis.Record(analysis.SettingsOf(c), *st, o, ap.now)
		result := "failure"
		switch {
		case o.Err != nil:
			result = "error"
		case o.Verdict.Success:
			result = "success"
		}
		ap.results = append(ap.results, checkResult{check: st.Name, result: result})
	}
}

// decide passes or fails the started gate, on its checks and, for an
// AfterMember gate, the soak: the member must have been whole for soakTime.
func (ap *analysisPass) decide(pre rollout.Plan) {
	g := ap.st.Gate
	if g == nil || g.StartTime == nil || ap.spec.Analysis == nil {
		return
	}
	for _, st := range ap.st.Checks {
		if st.Phase == v1alpha1.CheckFailed || st.Phase == v1alpha1.CheckErrored {
			ap.fail(pre, st)
			return
		}
	}
	if g.Kind == v1alpha1.GateAfterMember {
		ms := memberOf(pre, g.Member)
		switch {
		case ms == nil || !ms.Whole():
			g.SoakUntil = nil // the soak starts again once the member is whole
		case g.SoakUntil == nil:
			g.SoakUntil = ap.soakEnd()
		}
	}
	for _, st := range ap.st.Checks {
		if st.Phase != v1alpha1.CheckPassed {
			return
		}
	}
	if g.Kind == v1alpha1.GateAfterMember && (g.SoakUntil == nil || ap.now.Before(g.SoakUntil.Time)) {
		return
	}
	passed := *g
	ap.passGate(passed)
	ap.event(corev1.EventTypeNormal, "GatePassed", "Analyze", fmt.Sprintf("%s gate of %s (revision %s) passed: %s",
		passed.Kind, passed.Member, passed.Revision, ap.describeChecks()))
}

// passGate records a gate as passed and closes it.
func (ap *analysisPass) passGate(g v1alpha1.GateStatus) {
	if g.Kind == v1alpha1.GateAfterMember {
		ap.gatePassed[g.Member] = g.Revision
	}
	ap.st.Gate = nil
}

// fail records the failure of the pending gate on a check, and rolls back
// when spec.onFailure says so.
func (ap *analysisPass) fail(pre rollout.Plan, st v1alpha1.CheckStatus) {
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
func (ap *analysisPass) startRollback(pre rollout.Plan) {
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
		plural(len(members), "StatefulSet"), strings.Join(parts, ", "), ap.st.Failure.Message))
}

// rollbackMembers are the members that moved, in the order they come back:
// the one partly rolled first, then the others in reverse list order.
func (ap *analysisPass) rollbackMembers(pre rollout.Plan) []v1alpha1.RollbackMember {
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

// setRestore records how the restoration of the rollback's templates stands.
func (ap *analysisPass) setRestore(pending []string, failed string) {
	ap.restorePending, ap.restoreFailed = pending, failed
}

// afterAct opens the gates the pass's action and plan call for, and completes
// a rollback whose members all run their stable revision again.
func (ap *analysisPass) afterAct(plan rollout.Plan, acted actionResult) {
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
				ap.now.Sub(rb.StartTime.Time).Round(time.Second), plural(len(rb.Members), "StatefulSet")))
		}
	}
	if ap.spec.Analysis == nil || ap.st.Failure != nil || ap.st.Rollback != nil || plan.Blocked != nil {
		return
	}
	if acted.deleted > 0 && len(checksOf(ap.spec.Analysis, v1alpha1.GateAfterBatch)) > 0 {
		if ms := memberOf(plan, plan.Current); ms != nil {
			ap.openBatchGate(ms.Name, ms.UpdateRevision)
		}
	}
	if ap.st.Gate == nil && plan.GateDue != "" {
		ap.openMemberGate(plan)
	}
}

// analysisView is what status shows of the analysis.
type analysisView struct {
	// phase is PhaseFailed or PhaseAnalyzing, or "" when the analysis does
	// not decide the phase.
	phase   v1alpha1.RolloutPhase
	reason  string
	message string
	// rollingBack: a rollback rolls pods (phase Progressing, reason RollingBack).
	rollingBack bool
	// rolledBack: the rollback completed in this pass.
	rolledBack bool
	// holding: a gate is pending or the group failed, so the rollout is not over.
	holding bool
}

func (ap *analysisPass) view() analysisView {
	v := analysisView{rolledBack: ap.rolledBack}
	f := ap.st.Failure
	switch {
	case ap.rollingBack() && ap.restoreFailed != "":
		v.phase, v.reason, v.message = v1alpha1.PhaseFailed, v1alpha1.ReasonRollbackFailed, ap.restoreFailed
	case ap.rollingBack():
		v.rollingBack = true
		v.message = "rolling back"
		if f != nil {
			v.message += " (" + f.Message + ")"
		}
	case f != nil:
		v.phase, v.reason = v1alpha1.PhaseFailed, f.Reason
		v.message = f.Message
		if rb := ap.st.Rollback; rb != nil {
			v.message += fmt.Sprintf("; rolled back %s to their stable revision", plural(len(rb.Members), "StatefulSet"))
		}
		v.message += "; set echelon.dev/retry to clear"
	case ap.st.Rollback != nil:
		v.phase, v.reason, v.message = v1alpha1.PhaseFailed, v1alpha1.ReasonRollingBack, "rolled back; set echelon.dev/retry to clear"
	case ap.st.Gate != nil && ap.st.Gate.StartTime != nil:
		v.phase = v1alpha1.PhaseAnalyzing
		v.reason, v.message = ap.gateProgress()
	}
	v.holding = v.phase == v1alpha1.PhaseFailed || ap.st.Gate != nil || v.rollingBack
	return v
}

// gateProgress says where the started gate stands.
func (ap *analysisPass) gateProgress() (reason, message string) {
	g := ap.st.Gate
	msg := fmt.Sprintf("%s gate of %s (revision %s): %s", g.Kind, g.Member, g.Revision, ap.describeChecks())
	allPassed := !slices.ContainsFunc(ap.st.Checks, func(s v1alpha1.CheckStatus) bool { return s.Phase != v1alpha1.CheckPassed })
	if g.Kind == v1alpha1.GateAfterMember {
		switch {
		case g.SoakUntil == nil:
			msg += "; soak waits for the member to be whole"
		case ap.now.Before(g.SoakUntil.Time):
			msg += "; soaking until " + g.SoakUntil.UTC().Format(time.RFC3339)
			if allPassed {
				return v1alpha1.ReasonSoaking, msg
			}
		}
	}
	return v1alpha1.ReasonWaitingForAnalysis, msg
}

// describeChecks summarises the gate's checks: "error-rate Passed (0.01),
// latency Running 1/3 (0.2)".
func (ap *analysisPass) describeChecks() string {
	if len(ap.st.Checks) == 0 {
		return "no checks"
	}
	parts := make([]string, 0, len(ap.st.Checks))
	for _, st := range ap.st.Checks {
		s := st.Name + " " + string(st.Phase)
		if c, ok := ap.checkSpec(st.Name); ok && st.Phase == v1alpha1.CheckRunning {
			s += fmt.Sprintf(" %d/%d", st.ConsecutiveSuccesses, analysis.SettingsOf(c).SuccessThreshold)
		}
		switch {
		case st.LastError != "" && st.Phase != v1alpha1.CheckPassed:
			s += fmt.Sprintf(" (%d errors, last: %s)", st.ConsecutiveErrors, st.LastError)
		case st.LastValue != "":
			s += " (" + st.LastValue + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, ", ")
}

// requeueAfter is when the analysis must look again by the clock alone: the
// next due query or the end of the soak. Zero when nothing waits on time.
func (ap *analysisPass) requeueAfter() time.Duration {
	g := ap.st.Gate
	if g == nil || g.StartTime == nil || ap.spec.Analysis == nil {
		return 0
	}
	var next time.Duration
	wait := func(at time.Time) {
		next = rollout.MinPositive(next, max(at.Sub(ap.now), analysisRequeueFloor))
	}
	for _, c := range checksOf(ap.spec.Analysis, g.Kind) {
		if st, ok := ap.check(c.Name); ok {
			if at, ok := analysis.NextQuery(analysis.SettingsOf(c), st, g.StartTime.Time); ok {
				wait(at)
			}
		}
	}
	if g.SoakUntil != nil {
		wait(g.SoakUntil.Time)
	}
	return next
}

// status is the analysis status to write: nil when there is nothing to show.
func (ap *analysisPass) status() *v1alpha1.AnalysisStatus {
	if ap.spec.Analysis == nil && ap.st.Failure == nil && ap.st.Rollback == nil &&
		ap.st.HandledRetry == "" && ap.st.HandledSkip == "" && ap.st.HandledAbort == "" {
		return nil
	}
	st := ap.st.DeepCopy()
	return st
}

func (ap *analysisPass) event(eventType, reason, action, message string) {
	ap.events = append(ap.events, analysisEvent{eventType: eventType, reason: reason, action: action, message: message})
}

func (ap *analysisPass) check(name string) (v1alpha1.CheckStatus, bool) {
	i := slices.IndexFunc(ap.st.Checks, func(s v1alpha1.CheckStatus) bool { return s.Name == name })
	if i < 0 {
		return v1alpha1.CheckStatus{}, false
	}
	return ap.st.Checks[i], true
}

func (ap *analysisPass) checkSpec(name string) (v1alpha1.AnalysisCheck, bool) {
	if ap.spec.Analysis == nil {
		return v1alpha1.AnalysisCheck{}, false
	}
	i := slices.IndexFunc(ap.spec.Analysis.Checks, func(c v1alpha1.AnalysisCheck) bool { return c.Name == name })
	if i < 0 {
		return v1alpha1.AnalysisCheck{}, false
	}
	return ap.spec.Analysis.Checks[i], true
}

func (ap *analysisPass) timeNow() *metav1.Time {
	t := metav1.NewTime(ap.now)
	return &t
}

// soakEnd is when a soak starting now ends.
func (ap *analysisPass) soakEnd() *metav1.Time {
	t := metav1.NewTime(ap.now.Add(soakTime(ap.spec.Analysis)))
	return &t
}

func soakTime(a *v1alpha1.RolloutAnalysis) time.Duration {
	if a == nil || a.SoakTime == nil {
		return 0
	}
	return a.SoakTime.Duration
}

// checksOf are the checks that run at a gate of the given kind.
func checksOf(a *v1alpha1.RolloutAnalysis, kind v1alpha1.AnalysisGate) []v1alpha1.AnalysisCheck {
	var out []v1alpha1.AnalysisCheck
	for _, c := range a.Checks {
		if analysis.GateOf(c) == kind {
			out = append(out, c)
		}
	}
	return out
}

// hasMemberGate reports whether members are gated once complete: an
// AfterMember check, or a soak time.
func hasMemberGate(a *v1alpha1.RolloutAnalysis) bool {
	return len(checksOf(a, v1alpha1.GateAfterMember)) > 0 || soakTime(a) > 0
}

func memberOf(plan rollout.Plan, name string) *rollout.MemberState {
	for i := range plan.Members {
		if plan.Members[i].Name == name {
			return &plan.Members[i]
		}
	}
	return nil
}

// revisionsOf are the members' update revisions.
func revisionsOf(plan rollout.Plan) []v1alpha1.MemberRevision {
	out := make([]v1alpha1.MemberRevision, 0, len(plan.Members))
	for _, ms := range plan.Members {
		out = append(out, v1alpha1.MemberRevision{Name: ms.Name, Revision: ms.UpdateRevision})
	}
	return out
}

// analysisChanged reports whether the analysis changed in a way to write at
// once: a gate opened, started, passed or failed, a check's phase, a failure,
// a rollback, a control acted on. A check's counts and last value wait for the
// next progress write, like a rollout's counters: a gate queries every interval.
func analysisChanged(written, next *v1alpha1.AnalysisStatus) bool {
	if (written == nil) != (next == nil) {
		return true
	}
	if written == nil {
		return false
	}
	if !equality.Semantic.DeepEqual(written.Gate, next.Gate) || !equality.Semantic.DeepEqual(written.Failure, next.Failure) ||
		!equality.Semantic.DeepEqual(written.Rollback, next.Rollback) || written.HandledRetry != next.HandledRetry ||
		written.HandledSkip != next.HandledSkip || written.HandledAbort != next.HandledAbort || len(written.Checks) != len(next.Checks) {
		return true
	}
	for i := range next.Checks {
		if written.Checks[i].Name != next.Checks[i].Name || written.Checks[i].Phase != next.Checks[i].Phase {
			return true
		}
	}
	return false
}

// gateRecord is the status to write before the deletions that open an
// AfterBatch gate: the written status with the whole analysis of the pass
// (the new gate, its fresh check records, the controls acted on) and the
// members' stable and gate-passed revisions. Recording the gate alone would
// let a crash after the deletions forget a skip-gate or retry acted on in the
// pass, and the restarted operator would act on it again, against the new gate.
func (ap *analysisPass) gateRecord(written v1alpha1.RolloutGroupStatus) v1alpha1.RolloutGroupStatus {
	next := *written.DeepCopy()
	next.Analysis = ap.status()
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
