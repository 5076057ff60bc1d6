package cli

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func controlNamed(t *testing.T, name string) control {
	t.Helper()
	for _, c := range controls() {
		if c.name == name {
			return c
		}
	}
	t.Fatalf("no control %q", name)
	return control{}
}

// Each control refuses exactly where the operator would do nothing with it
// (docs/analysis.md, "Retry, skip or abort with kubectl"), and writes
// otherwise.
func TestControlsRefuseWhatIsMeaningless(t *testing.T) {
	gate := &v1alpha1.GateStatus{Member: "zone-a", Kind: v1alpha1.GateAfterMember, Revision: "zone-a-new"}
	failed := &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAnalysisFailed, Gate: gate}
	rollingBack := &v1alpha1.RollbackStatus{}
	rolledBack := &v1alpha1.RollbackStatus{CompletionTime: &metav1.Time{}}
	moved := []v1alpha1.MemberStatus{{Name: "zone-a", UpdateRevision: "new", StableRevision: "old"}}
	still := []v1alpha1.MemberStatus{{Name: "zone-a", UpdateRevision: "old", StableRevision: "old"}}
	steps := []v1alpha1.RolloutStep{{Percent: 10}, {Percent: 100}}
	cases := []struct {
		control    string
		paused     bool
		analysis   *v1alpha1.AnalysisStatus
		members    []v1alpha1.MemberStatus
		steps      []v1alpha1.RolloutStep
		step       *v1alpha1.StepStatus
		wantRefuse string // a part of the refusal; "" when the control is written
	}{
		{control: "pause", wantRefuse: ""},
		{control: "pause", paused: true, wantRefuse: "already paused"},
		{control: "resume", paused: true, wantRefuse: ""},
		{control: "resume", wantRefuse: "not paused"},
		{control: "retry", wantRefuse: "has not failed"},
		{control: "retry", analysis: &v1alpha1.AnalysisStatus{Gate: gate}, wantRefuse: "has not failed"},
		{control: "retry", analysis: &v1alpha1.AnalysisStatus{Failure: failed}},
		{control: "retry", analysis: &v1alpha1.AnalysisStatus{Rollback: rolledBack}},
		{control: "skip-gate", wantRefuse: "no analysis gate"},
		{control: "skip-gate", analysis: &v1alpha1.AnalysisStatus{Gate: gate}},
		{control: "skip-gate", analysis: &v1alpha1.AnalysisStatus{Failure: failed}},
		{control: "skip-gate", analysis: &v1alpha1.AnalysisStatus{Failure: failed, Rollback: rollingBack}, wantRefuse: "rolling back"},
		{control: "skip-gate", analysis: &v1alpha1.AnalysisStatus{Failure: &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAborted}}, wantRefuse: "no analysis gate"},
		{control: "abort", members: moved},
		{control: "abort", members: still, wantRefuse: "nothing to roll back"},
		{control: "abort", members: append(still, v1alpha1.MemberStatus{Name: "zone-b", UpdateRevision: "new"})},
		{control: "abort", wantRefuse: ""},
		{control: "abort", members: moved, analysis: &v1alpha1.AnalysisStatus{Rollback: rollingBack}, wantRefuse: "already rolling back"},
		{control: "abort", members: moved, analysis: &v1alpha1.AnalysisStatus{Rollback: rolledBack}, wantRefuse: "already rolled back"},
		{control: "promote", wantRefuse: "no spec.steps"},
		{control: "promote", steps: steps, step: &v1alpha1.StepStatus{Index: 0, WaitingFor: v1alpha1.StepWaitPromote}},
		{control: "promote", steps: steps, step: &v1alpha1.StepStatus{Index: 0, WaitingFor: v1alpha1.StepWaitPods}},
		{control: "promote", steps: steps},
		{control: "promote", steps: steps, step: &v1alpha1.StepStatus{Index: 2, WaitingFor: v1alpha1.StepWaitDone}, wantRefuse: "every step of spec.steps is done"},
		{control: "restart"},
	}
	for _, tc := range cases {
		rg := &v1alpha1.RolloutGroup{}
		rg.Spec.Paused = tc.paused
		rg.Status.Analysis = tc.analysis
		rg.Status.StatefulSets = tc.members
		rg.Spec.Steps, rg.Status.Step = tc.steps, tc.step
		got := controlNamed(t, tc.control).refuse(rg)
		switch {
		case tc.wantRefuse == "" && got != "":
			t.Errorf("%s with %+v: refused (%s), want it written", tc.control, tc, got)
		case tc.wantRefuse != "" && !strings.Contains(got, tc.wantRefuse):
			t.Errorf("%s with %+v: refusal %q, want one saying %q", tc.control, tc, got, tc.wantRefuse)
		}
	}
}

// The controls write exactly the documented field or annotation, an
// annotation to a value that changes with time.
func TestControlsWriteTheDocumentedChange(t *testing.T) {
	rg := &v1alpha1.RolloutGroup{}
	rg.Status.Analysis = &v1alpha1.AnalysisStatus{Failure: &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAnalysisFailed,
		Gate: &v1alpha1.GateStatus{Member: "a", Kind: v1alpha1.GateAfterMember}}}
	later := now.Add(1500 * 1e6)
	for name, want := range map[string]string{
		"pause":     `{"spec":{"paused":true}}`,
		"resume":    `{"spec":{"paused":false}}`,
		"retry":     `{"metadata":{"annotations":{"echelon.dev/retry":"2026-11-26T03:00:00.000Z"}}}`,
		"skip-gate": `{"metadata":{"annotations":{"echelon.dev/skip-gate":"2026-11-26T03:00:00.000Z"}}}`,
		"abort":     `{"metadata":{"annotations":{"echelon.dev/abort":"2026-11-26T03:00:00.000Z"}}}`,
		"promote":   `{"metadata":{"annotations":{"echelon.dev/promote":"2026-11-26T03:00:00.000Z"}}}`,
		"restart":   `{"spec":{"restartAt":"2026-11-26T03:00:00Z"}}`,
	} {
		c := controlNamed(t, name)
		patch, _ := c.change(rg, now)
		if got := mustJSON(t, patch); got != want {
			t.Errorf("%s writes %s, want %s", name, got, want)
		}
		if strings.Contains(want, "annotations") {
			again, _ := c.change(rg, later)
			if mustJSON(t, again) == want {
				t.Errorf("%s writes the same value 1.5s later; the operator acts once per value", name)
			}
		}
	}
}
