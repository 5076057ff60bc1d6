package gate

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/analysis"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/internal/rollout/gate/gatetest"
)

// A batch of a deletes its pods: the AfterBatch gate opens, holds every
// deletion while the batch's pods come back, starts when they are available,
// runs only the AfterBatch check, and passes on its success.
func TestAnalysisBatchGate(t *testing.T) {
	rg := gatetest.Group(0, v1alpha1.FailurePause, nil)
	ap := New(rg, testNow)
	deleting := gatetest.Plan(gatetest.Member("a", 0, 3), gatetest.Member("b", 0, 3))
	deleting.Current = "a"
	ap.AfterAct(deleting, 1)
	g := ap.st.Gate
	if g == nil || g.Kind != v1alpha1.GateAfterBatch || g.Member != "a" || g.Revision != "r2" || g.StartTime != nil {
		t.Fatalf("gate after a batch = %+v, want an AfterBatch gate of a on r2 not started", g)
	}
	if names := checkNames(ap.st.Checks); !slices.Equal(names, []string{"batch"}) {
		t.Errorf("AfterBatch gate checks = %v, want [batch]", names)
	}
	in := rollout.Input{Members: []rollout.Member{{Name: "a"}, {Name: "b"}}}
	ap.ApplyTo(&in)
	if in.Hold == nil || in.Hold.Reason != v1alpha1.ReasonWaitingForPods {
		t.Errorf("hold before the batch's pods are back = %+v, want WaitingForPods", in.Hold)
	}
	if len(ap.DueChecks()) != 0 {
		t.Error("a check is due before the gate started")
	}

	// The batch's pod is back but not available: the gate has not started.
	ap = passFrom(rg, ap, at(time.Second))
	ap.Begin(gatetest.Plan(gatetest.Member("a", 1, 2), gatetest.Member("b", 0, 3)))
	if ap.st.Gate.StartTime != nil {
		t.Fatal("the gate started while the batch's pod is not available")
	}
	// Available: it starts, the check is due at once (initialDelay 0).
	ap = passFrom(rg, ap, at(2*time.Second))
	back := gatetest.Plan(gatetest.Member("a", 1, 3), gatetest.Member("b", 0, 3))
	ap.Begin(back)
	if ap.st.Gate.StartTime == nil || !ap.st.Gate.StartTime.Time.Equal(at(2*time.Second)) {
		t.Fatalf("gate start %v, want when the batch was back", ap.st.Gate.StartTime)
	}
	if due := ap.DueChecks(); len(due) != 1 || due[0].Name != "batch" {
		t.Fatalf("due checks %v, want [batch]", due)
	}
	if v := ap.View(); v.Phase != v1alpha1.PhaseAnalyzing || v.Reason != v1alpha1.ReasonWaitingForAnalysis {
		t.Errorf("view = %+v, want Analyzing, WaitingForAnalysis", v)
	}
	ap.Record(map[string]analysis.Outcome{"batch": gatetest.Outcome(true)})
	ap.Decide(back)
	if ap.st.Gate != nil || !slices.Contains(eventReasons(ap), "GatePassed") {
		t.Fatalf("gate %+v, events %v: want passed", ap.st.Gate, eventReasons(ap))
	}
	in = rollout.Input{Members: []rollout.Member{{Name: "a"}, {Name: "b"}}}
	ap.ApplyTo(&in)
	if in.Hold != nil || ap.gatePassed["a"] != "" {
		t.Errorf("after the batch gate: hold %+v, gatePassed %q; want none (a batch gate is no member gate)", in.Hold, ap.gatePassed["a"])
	}
}

// A member complete on its new revision opens its AfterMember gate, which runs
// the AfterMember checks and passes only when they pass and the member has
// been whole for soakTime; losing a pod restarts the soak.
func TestAnalysisMemberGateAndSoak(t *testing.T) {
	rg := gatetest.Group(time.Minute, v1alpha1.FailurePause, nil)
	done := gatetest.Plan(gatetest.Member("a", 3, 3), gatetest.Member("b", 0, 3))
	done.GateDue = "a"
	ap := New(rg, testNow)
	ap.Begin(done)
	g := ap.st.Gate
	if g == nil || g.Kind != v1alpha1.GateAfterMember || g.Member != "a" || !g.SoakUntil.Time.Equal(at(time.Minute)) {
		t.Fatalf("gate = %+v, want the AfterMember gate of a soaking until +1m", g)
	}
	if names := checkNames(ap.st.Checks); !slices.Equal(names, []string{"zone"}) {
		t.Errorf("AfterMember gate checks = %v, want [zone]", names)
	}
	step := func(d time.Duration, plan rollout.Plan, success bool) {
		t.Helper()
		ap = passFrom(rg, ap, at(d))
		ap.Begin(plan)
		outcomes := map[string]analysis.Outcome{}
		for _, c := range ap.DueChecks() {
			outcomes[c.Name] = gatetest.Outcome(success)
		}
		ap.Record(outcomes)
		ap.Decide(plan)
	}
	ap.Record(map[string]analysis.Outcome{"zone": gatetest.Outcome(true)})
	ap.Decide(done)
	step(10*time.Second, done, true) // successThreshold 2 reached, soak not over
	if ap.st.Gate == nil {
		t.Fatal("gate passed before the soak ended")
	}
	if v := ap.View(); v.Reason != v1alpha1.ReasonSoaking || !strings.Contains(v.Message, "soaking until") {
		t.Errorf("view %+v, want Soaking", v)
	}
	// A pod of a goes away: the soak waits for the member to be whole again.
	lost := gatetest.Plan(gatetest.Member("a", 3, 2), gatetest.Member("b", 0, 3))
	step(20*time.Second, lost, true)
	if ap.st.Gate.SoakUntil != nil {
		t.Fatalf("soak %v while a is not whole, want none", ap.st.Gate.SoakUntil)
	}
	step(30*time.Second, done, true)
	if got := ap.st.Gate.SoakUntil; got == nil || !got.Time.Equal(at(90*time.Second)) {
		t.Fatalf("soak until %v, want +90s (whole again at +30s, plus 1m)", got)
	}
	if d := ap.RequeueAfter(); d != 10*time.Second {
		t.Errorf("requeueAfter = %v, want the next query in 10s", d)
	}
	step(80*time.Second, done, true)
	if ap.st.Gate == nil {
		t.Fatal("gate passed before the restarted soak ended")
	}
	step(90*time.Second, done, true)
	if ap.st.Gate != nil || ap.gatePassed["a"] != "r2" {
		t.Fatalf("gate %+v, gatePassed %q: want passed for r2", ap.st.Gate, ap.gatePassed["a"])
	}
}

// A gate whose member moves to another revision is cancelled; a gate is never
// opened for a group that failed.
func TestAnalysisGateCancelled(t *testing.T) {
	rg := gatetest.Group(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{Gate: &v1alpha1.GateStatus{Member: "a", Kind: v1alpha1.GateAfterBatch, Revision: "r1"}}
	})
	ap := New(rg, testNow)
	ap.Begin(gatetest.Plan(gatetest.Member("a", 1, 3)))
	if ap.st.Gate != nil {
		t.Errorf("gate of r1 kept for a member on r2: %+v", ap.st.Gate)
	}
	rg.Spec.Analysis = nil
	rg.Status.Analysis.Gate.Revision = "r2"
	ap = New(rg, testNow)
	ap.Begin(gatetest.Plan(gatetest.Member("a", 1, 3)))
	if ap.st.Gate != nil || ap.Status() != nil {
		t.Errorf("gate kept without spec.analysis: %+v", ap.st)
	}
}

// The AfterBatch gate a batch's deletions open is opened before they are
// made, with fresh check records, so that the controller can record it first:
// a pass that dies after deleting must not leave the next batch ungated, nor
// a stale Passed record of the last gate to pass the new one.
func TestAnalysisBatchGateOpenedBeforeDeleting(t *testing.T) {
	rg := gatetest.Group(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{Checks: []v1alpha1.CheckStatus{{Name: "batch", Phase: v1alpha1.CheckPassed, ConsecutiveSuccesses: 1}}}
	})
	deleting := gatetest.Plan(gatetest.Member("a", 1, 3), gatetest.Member("b", 0, 3))
	deleting.Current = "a"
	deleting.Delete = []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a-1"}}}
	ap := New(rg, testNow)
	if !ap.OpenBatchGateBefore(deleting) {
		t.Fatal("no gate opened before a batch of a group with an AfterBatch check")
	}
	if g := ap.st.Gate; g == nil || g.Kind != v1alpha1.GateAfterBatch || g.Member != "a" || g.Revision != "r2" {
		t.Fatalf("gate = %+v, want an AfterBatch gate of a on r2", g)
	}
	if len(ap.st.Checks) != 1 || ap.st.Checks[0].ConsecutiveSuccesses != 0 || ap.st.Checks[0].Phase == v1alpha1.CheckPassed {
		t.Errorf("check records = %+v, want a fresh record", ap.st.Checks)
	}

	for name, tt := range map[string]struct {
		mutate func(*v1alpha1.RolloutGroup)
		plan   rollout.Plan
	}{
		"no deletions":        {plan: gatetest.Plan(gatetest.Member("a", 1, 3))},
		"no AfterBatch check": {mutate: func(rg *v1alpha1.RolloutGroup) { rg.Spec.Analysis.Checks = rg.Spec.Analysis.Checks[1:] }, plan: deleting},
		"failed":              {mutate: func(rg *v1alpha1.RolloutGroup) { rg.Status.Analysis.Failure = &v1alpha1.AnalysisFailure{} }, plan: deleting},
	} {
		g := gatetest.Group(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
			rg.Status.Analysis = &v1alpha1.AnalysisStatus{}
			if tt.mutate != nil {
				tt.mutate(rg)
			}
		})
		if ap := New(g, testNow); ap.OpenBatchGateBefore(tt.plan) || ap.st.Gate != nil {
			t.Errorf("%s: a gate was opened", name)
		}
	}
}
