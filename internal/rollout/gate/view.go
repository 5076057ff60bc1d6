package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/analysis"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// requeueFloor is the shortest wait before a gate's next step: a check due
// now (initialDelay 0 on a gate just opened) is queried on the next pass.
const requeueFloor = 100 * time.Millisecond

// View is what status shows of the analysis.
type View struct {
	// Phase is PhaseFailed or PhaseAnalyzing, or "" when the analysis does
	// not decide the phase.
	Phase   v1alpha1.RolloutPhase
	Reason  string
	Message string
	// RollingBack: a rollback rolls pods (phase Progressing, reason RollingBack).
	RollingBack bool
	// RolledBack: the rollback completed in this pass.
	RolledBack bool
	// Holding: a gate is pending or the group failed, so the rollout is not over.
	Holding bool
}

// View is what status shows of the pass's analysis.
func (ap *Pass) View() View {
	v := View{RolledBack: ap.rolledBack}
	f := ap.st.Failure
	switch {
	case ap.RollingBack() && ap.restoreFailed != "":
		v.Phase, v.Reason, v.Message = v1alpha1.PhaseFailed, v1alpha1.ReasonRollbackFailed, ap.restoreFailed
	case ap.RollingBack():
		v.RollingBack = true
		v.Message = "rolling back"
		if f != nil {
			v.Message += " (" + f.Message + ")"
		}
	case f != nil:
		v.Phase, v.Reason = v1alpha1.PhaseFailed, f.Reason
		v.Message = f.Message
		if rb := ap.st.Rollback; rb != nil {
			v.Message += fmt.Sprintf("; rolled back %s to their stable revision", rollout.Plural(len(rb.Members), "StatefulSet"))
		}
		v.Message += "; set echelon.dev/retry to clear"
	case ap.st.Rollback != nil:
		v.Phase, v.Reason, v.Message = v1alpha1.PhaseFailed, v1alpha1.ReasonRollingBack, "rolled back; set echelon.dev/retry to clear"
	case ap.st.Gate != nil && ap.st.Gate.StartTime != nil:
		v.Phase = v1alpha1.PhaseAnalyzing
		v.Reason, v.Message = ap.gateProgress()
	}
	v.Holding = v.Phase == v1alpha1.PhaseFailed || ap.st.Gate != nil || v.RollingBack
	return v
}

// gateProgress says where the started gate stands.
func (ap *Pass) gateProgress() (reason, message string) {
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
func (ap *Pass) describeChecks() string {
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

// RequeueAfter is when the analysis must look again by the clock alone: the
// next due query or the end of the soak. Zero when nothing waits on time.
func (ap *Pass) RequeueAfter() time.Duration {
	g := ap.st.Gate
	if g == nil || g.StartTime == nil || ap.spec.Analysis == nil {
		return 0
	}
	var next time.Duration
	wait := func(at time.Time) {
		next = rollout.MinPositive(next, max(at.Sub(ap.now), requeueFloor))
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

// Changed reports whether the analysis changed in a way to write at once: a
// gate opened, started, passed or failed, a check's phase, a failure, a
// rollback, a control acted on. A check's counts and last value wait for the
// next progress write, like a rollout's counters: a gate queries every interval.
func Changed(written, next *v1alpha1.AnalysisStatus) bool {
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
