package gate

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/analysis"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// Begin runs the steps that come before the queries, on the plan made with
// the state as it was: the manual controls, the end of a failure whose
// templates changed, and the opening, start and cancelling of gates.
func (ap *Pass) Begin(pre rollout.Plan) {
	ap.ResolveStable(pre.Members)
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

// openMemberGate opens the AfterMember gate of the member the plan names.
func (ap *Pass) openMemberGate(plan rollout.Plan) {
	ms := memberOf(plan, plan.GateDue)
	if ms == nil || ap.gatePassed[ms.Name] == ms.UpdateRevision {
		return // passed in this pass (skipped), after the plan was made
	}
	ap.st.Gate = &v1alpha1.GateStatus{Member: ms.Name, Kind: v1alpha1.GateAfterMember, Revision: ms.UpdateRevision,
		StartTime: ap.timeNow(), SoakUntil: ap.soakEnd()}
	ap.st.Checks = nil
	ap.syncChecks()
}

// OpenBatchGateBefore opens, before plan's deletions are made, the AfterBatch
// gate they will open, and says whether it did. The controller records it in
// status before deleting: a crash between the two must not let the next batch
// go ungated. A gate opened for deletions that then fail costs one evaluation
// of its checks, nothing more.
func (ap *Pass) OpenBatchGateBefore(plan rollout.Plan) bool {
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

// openBatchGate opens the AfterBatch gate of a batch just deleted; its clock
// starts once the batch's pods are back.
func (ap *Pass) openBatchGate(member, revision string) {
	ap.st.Gate = &v1alpha1.GateStatus{Member: member, Kind: v1alpha1.GateAfterBatch, Revision: revision}
	ap.st.Checks = nil
	ap.syncChecks()
}

// syncChecks keeps one record per check of the pending gate's kind, in spec
// order, keeping the counts of checks already there.
func (ap *Pass) syncChecks() {
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

// DueChecks are the checks of the started gate to query now.
func (ap *Pass) DueChecks() []v1alpha1.AnalysisCheck {
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

// QueryVars are the template variables of the pending gate's queries.
func (ap *Pass) QueryVars() analysis.Vars {
	return analysis.Vars{Member: ap.st.Gate.Member, Namespace: ap.namespace, Group: ap.name, Revision: ap.st.Gate.Revision}
}

// Record counts the outcomes of the queries just run.
func (ap *Pass) Record(outcomes map[string]analysis.Outcome) {
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
		ap.results = append(ap.results, CheckResult{Check: st.Name, Result: result})
	}
}

// Decide passes or fails the started gate, on its checks and, for an
// AfterMember gate, the soak: the member must have been whole for soakTime.
func (ap *Pass) Decide(pre rollout.Plan) {
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
func (ap *Pass) passGate(g v1alpha1.GateStatus) {
	if g.Kind == v1alpha1.GateAfterMember {
		ap.gatePassed[g.Member] = g.Revision
	}
	ap.st.Gate = nil
}
