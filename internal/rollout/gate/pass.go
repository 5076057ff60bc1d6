package gate

import (
	"fmt"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/analysis"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// Event is an Event the analysis asks the controller to emit.
type Event struct {
	Type    string
	Reason  string
	Action  string
	Message string
}

// CheckResult is one query's result, for the metrics.
type CheckResult struct {
	Check  string
	Result string // success, failure or error
}

// Pass carries a group's analysis through one reconcile.
type Pass struct {
	namespace, name string
	spec            v1alpha1.RolloutGroupSpec
	annotations     map[string]string
	// rolloutID is status.rolloutId: the spec.rolloutId last acted on.
	rolloutID string
	st        v1alpha1.AnalysisStatus
	// stable and gatePassed are each member's stable revision and the
	// revision whose AfterMember gate it passed.
	stable     map[string]string
	gatePassed map[string]string
	now        time.Time

	events  []Event
	results []CheckResult
	// rollbackStarted is the reason of a rollback started in this pass.
	rollbackStarted string
	// rolledBack is true on the pass where a rollback completed.
	rolledBack bool
	// restorePending names the members whose template is not restored yet;
	// restoreFailed says why a template cannot be restored.
	restorePending []string
	restoreFailed  string
}

// New starts the pass of rg's analysis from the state its status holds.
func New(rg *v1alpha1.RolloutGroup, now time.Time) *Pass {
	ap := &Pass{
		namespace: rg.Namespace, name: rg.Name, spec: rg.Spec, annotations: rg.Annotations, now: now,
		rolloutID: rg.Status.RolloutID,
		stable:    map[string]string{}, gatePassed: map[string]string{},
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

// ResolveStable fills in the stable revision of members that status does not
// know yet (a new group, or one that started before Echelon recorded it): the
// revision every pod runs, else the StatefulSet's currentRevision when it
// differs from the update revision.
func (ap *Pass) ResolveStable(members []rollout.MemberState) {
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

// ApplyTo sets the planner's input from the analysis state: the holds, the
// rollback mode, the AfterMember gates and each member's revisions.
func (ap *Pass) ApplyTo(in *rollout.Input) {
	for i := range in.Members {
		in.Members[i].StableRevision = ap.stable[in.Members[i].Name]
		in.Members[i].GatePassedRevision = ap.gatePassed[in.Members[i].Name]
	}
	in.Hold, in.RollingBack = ap.hold(), ap.RollingBack()
	in.MemberGates = ap.spec.Analysis != nil && hasMemberGate(ap.spec.Analysis) && ap.st.Failure == nil && ap.st.Rollback == nil
}

// RollingBack reports whether a rollback is under way.
func (ap *Pass) RollingBack() bool {
	return ap.st.Rollback != nil && ap.st.Rollback.CompletionTime == nil
}

// Rollback is a copy of the rollback record, nil when there is none: the
// controller restores the templates it names.
func (ap *Pass) Rollback() *v1alpha1.RollbackStatus {
	return ap.st.Rollback.DeepCopy()
}

// hold says why nothing may be deleted now, or nil.
func (ap *Pass) hold() *rollout.Hold {
	switch {
	case ap.RollingBack() && ap.restoreFailed != "":
		return &rollout.Hold{Reason: v1alpha1.ReasonRollbackFailed, Message: ap.restoreFailed, Stop: true}
	case ap.RollingBack() && len(ap.restorePending) > 0:
		return &rollout.Hold{Reason: v1alpha1.ReasonRollingBack,
			Message: "restoring the template of " + strings.Join(ap.restorePending, ", "), Stop: true}
	case ap.RollingBack():
		return nil
	case ap.st.Failure != nil:
		return &rollout.Hold{Reason: ap.st.Failure.Reason, Message: "failed: " + ap.st.Failure.Message, Stop: true}
	case ap.st.Gate != nil && ap.st.Gate.StartTime == nil:
		return &rollout.Hold{Reason: v1alpha1.ReasonWaitingForPods,
			Message: fmt.Sprintf("waiting for the batch's pods before the AfterBatch gate of %s", ap.st.Gate.Member)}
	case ap.st.Gate != nil:
		reason, msg := ap.gateProgress()
		return &rollout.Hold{Reason: reason, Message: msg}
	}
	return nil
}

// Status is the analysis status to write: nil when there is nothing to show.
func (ap *Pass) Status() *v1alpha1.AnalysisStatus {
	if ap.spec.Analysis == nil && ap.st.Failure == nil && ap.st.Rollback == nil &&
		ap.st.HandledRetry == "" && ap.st.HandledSkip == "" && ap.st.HandledAbort == "" {
		return nil
	}
	st := ap.st.DeepCopy()
	return st
}

// StableRevision is the member's stable revision: the one a rollback returns
// to, "" when unknown.
func (ap *Pass) StableRevision(member string) string { return ap.stable[member] }

// GatePassedRevision is the update revision whose AfterMember gate the member
// passed, "" when none.
func (ap *Pass) GatePassedRevision(member string) string { return ap.gatePassed[member] }

// Events are the Events the pass asks the controller to emit, in order.
func (ap *Pass) Events() []Event { return ap.events }

// Results are the results of the queries recorded in the pass.
func (ap *Pass) Results() []CheckResult { return ap.results }

// RollbackStarted is the reason of a rollback started in this pass, "" when
// none started.
func (ap *Pass) RollbackStarted() string { return ap.rollbackStarted }

func (ap *Pass) event(eventType, reason, action, message string) {
	ap.events = append(ap.events, Event{Type: eventType, Reason: reason, Action: action, Message: message})
}

func (ap *Pass) check(name string) (v1alpha1.CheckStatus, bool) {
	i := slices.IndexFunc(ap.st.Checks, func(s v1alpha1.CheckStatus) bool { return s.Name == name })
	if i < 0 {
		return v1alpha1.CheckStatus{}, false
	}
	return ap.st.Checks[i], true
}

func (ap *Pass) checkSpec(name string) (v1alpha1.AnalysisCheck, bool) {
	if ap.spec.Analysis == nil {
		return v1alpha1.AnalysisCheck{}, false
	}
	i := slices.IndexFunc(ap.spec.Analysis.Checks, func(c v1alpha1.AnalysisCheck) bool { return c.Name == name })
	if i < 0 {
		return v1alpha1.AnalysisCheck{}, false
	}
	return ap.spec.Analysis.Checks[i], true
}

func (ap *Pass) timeNow() *metav1.Time {
	t := metav1.NewTime(ap.now)
	return &t
}

// soakEnd is when a soak starting now ends.
func (ap *Pass) soakEnd() *metav1.Time {
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
