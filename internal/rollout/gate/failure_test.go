package gate

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/analysis"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/internal/rollout/gate/gatetest"
)

// A gate's failure: a check failing failureThreshold times fails it with
// AnalysisFailed; errorThreshold errors with AnalysisError. With Pause the
// group holds; with Rollback the members that moved roll back, partly rolled
// first, then in reverse list order.
func TestAnalysisFailure(t *testing.T) {
	tests := []struct {
		name        string
		policy      v1alpha1.FailurePolicy
		outcome     analysis.Outcome
		repeat      int
		wantReason  string
		wantEvent   string
		wantMembers []v1alpha1.RollbackMember
	}{
		{name: "a failure with Pause holds", policy: v1alpha1.FailurePause, outcome: gatetest.Outcome(false), repeat: 1,
			wantReason: v1alpha1.ReasonAnalysisFailed, wantEvent: "GateFailed"},
		{name: "errors with Pause hold after errorThreshold", policy: v1alpha1.FailurePause, outcome: analysis.Outcome{Err: errors.New("connection refused")}, repeat: 3,
			wantReason: v1alpha1.ReasonAnalysisError, wantEvent: v1alpha1.ReasonAnalysisError},
		{name: "a failure with Rollback rolls back", policy: v1alpha1.FailureRollback, outcome: gatetest.Outcome(false), repeat: 1,
			wantReason: v1alpha1.ReasonAnalysisFailed, wantEvent: "RollbackStarted",
			wantMembers: []v1alpha1.RollbackMember{{Name: "b", From: "r2", To: "r1"}, {Name: "c", From: "r2", To: "r1"}, {Name: "a", From: "r2", To: "r1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := gatetest.Group(0, tt.policy, nil)
			// a is rolled, b partly, c not yet (its template moved too).
			plan := gatetest.Plan(gatetest.Member("a", 3, 3), gatetest.Member("b", 1, 3), gatetest.Member("c", 0, 3))
			plan.Current = "b"
			ap := New(rg, testNow)
			ap.AfterAct(plan, 1)
			for i := range tt.repeat {
				ap = passFrom(rg, ap, at(time.Duration(i)*10*time.Second))
				ap.Begin(plan)
				ap.Record(map[string]analysis.Outcome{"batch": tt.outcome})
				ap.Decide(plan)
			}
			f := ap.st.Failure
			if f == nil || f.Reason != tt.wantReason || f.Check != "batch" || !strings.Contains(f.Message, "AfterBatch gate of b (revision r2)") {
				t.Fatalf("failure = %+v, want %s on check batch naming the gate", f, tt.wantReason)
			}
			if !slices.Contains(eventReasons(ap), tt.wantEvent) {
				t.Errorf("events %v, want %s", eventReasons(ap), tt.wantEvent)
			}
			if ap.st.Gate != nil {
				t.Errorf("gate %+v still pending after failing", ap.st.Gate)
			}
			in := rollout.Input{Members: []rollout.Member{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
			ap.ApplyTo(&in)
			if tt.wantMembers == nil {
				if ap.st.Rollback != nil || in.Hold == nil || in.Hold.Reason != tt.wantReason || in.RollingBack {
					t.Errorf("Pause: rollback %+v, hold %+v, rollingBack %v", ap.st.Rollback, in.Hold, in.RollingBack)
				}
				if v := ap.View(); v.Phase != v1alpha1.PhaseFailed || v.Reason != tt.wantReason {
					t.Errorf("view %+v, want Failed %s", v, tt.wantReason)
				}
				return
			}
			if rb := ap.st.Rollback; rb == nil || !slices.Equal(rb.Members, tt.wantMembers) {
				t.Fatalf("rollback = %+v, want members %v", ap.st.Rollback, tt.wantMembers)
			}
			if !in.RollingBack || in.Hold != nil || in.MemberGates {
				t.Errorf("rolling back: input rollingBack %v hold %+v memberGates %v", in.RollingBack, in.Hold, in.MemberGates)
			}
			if v := ap.View(); !v.RollingBack || v.Phase != "" {
				t.Errorf("view %+v, want rolling back", v)
			}
			ap.SetRestore([]string{"a"}, "")
			ap.ApplyTo(&in)
			if in.Hold == nil || in.Hold.Reason != v1alpha1.ReasonRollingBack {
				t.Errorf("hold while a template is restored = %+v", in.Hold)
			}
		})
	}
}

// The end of a rollback: complete when every member runs its stable revision;
// the group then holds Failed. Re-applying the revision that failed does not
// restart the rollout; a new revision does.
func TestAnalysisRollbackEnd(t *testing.T) {
	rg := gatetest.Group(0, v1alpha1.FailureRollback, func(rg *v1alpha1.RolloutGroup) {
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{
			Failure:  &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAnalysisFailed, Check: "zone", Message: "check zone failed"},
			Rollback: &v1alpha1.RollbackStatus{StartTime: metav1.NewTime(testNow), Members: []v1alpha1.RollbackMember{{Name: "a", From: "r2", To: "r1"}}},
		}
	})
	onRev := func(name, rev string) rollout.MemberState {
		ms := gatetest.Member(name, 3, 3)
		ms.UpdateRevision = rev
		return ms
	}
	back := gatetest.Plan(onRev("a", "r1"), onRev("b", "r1"), onRev("c", "r1"))
	back.Complete = true
	ap := New(rg, at(time.Minute))
	ap.Begin(back)
	ap.AfterAct(back, 0)
	if rb := ap.st.Rollback; rb.CompletionTime == nil || !ap.rolledBack || !slices.Contains(eventReasons(ap), "RollbackComplete") {
		t.Fatalf("rollback %+v, events %v: want complete", rb, eventReasons(ap))
	}
	v := ap.View()
	if v.Phase != v1alpha1.PhaseFailed || v.Reason != v1alpha1.ReasonAnalysisFailed || !strings.Contains(v.Message, "rolled back 1 StatefulSet") {
		t.Errorf("view %+v, want Failed AnalysisFailed saying it rolled back", v)
	}
	// The failed revision again (a GitOps tool re-applying it): still Failed.
	again := gatetest.Plan(onRev("a", "r2"), onRev("b", "r1"), onRev("c", "r1"))
	ap = passFrom(rg, ap, at(2*time.Minute))
	ap.Begin(again)
	if ap.st.Failure == nil {
		t.Fatal("re-applying the failed revision released the failure")
	}
	// A new revision: released.
	fixed := gatetest.Plan(onRev("a", "r3"), onRev("b", "r1"), onRev("c", "r1"))
	ap = passFrom(rg, ap, at(3*time.Minute))
	ap.Begin(fixed)
	if ap.st.Failure != nil || ap.st.Rollback != nil || !slices.Contains(eventReasons(ap), "FailureCleared") {
		t.Fatalf("failure %+v rollback %+v events %v: want released by a new revision", ap.st.Failure, ap.st.Rollback, eventReasons(ap))
	}
	// An unsettled plan decides nothing.
	ap = New(rg, at(time.Minute))
	unsettled := fixed
	unsettled.Settled = false
	ap.Begin(unsettled)
	if ap.st.Failure == nil {
		t.Error("released on an unsettled view")
	}
}

// With onFailure Pause, any member's new update revision ends the failure.
func TestAnalysisPauseReleasedByNewTemplate(t *testing.T) {
	rg := gatetest.Group(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{Failure: &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAnalysisFailed,
			Revisions: []v1alpha1.MemberRevision{{Name: "a", Revision: "r2"}, {Name: "b", Revision: "r2"}}}}
	})
	same := gatetest.Plan(gatetest.Member("a", 3, 3), gatetest.Member("b", 0, 3))
	ap := New(rg, testNow)
	ap.Begin(same)
	if ap.st.Failure == nil {
		t.Fatal("released with the same revisions")
	}
	moved := gatetest.Plan(gatetest.Member("a", 3, 3), gatetest.Member("b", 0, 3))
	moved.Members[1].UpdateRevision = "r3"
	ap = New(rg, testNow)
	ap.Begin(moved)
	if ap.st.Failure != nil {
		t.Fatal("not released by b's new revision")
	}
}

// What the controller writes before a batch's deletions is everything the
// analysis decided in the pass, not only the new gate: a skip-gate that
// passed a's pending AfterBatch gate in the same pass must be recorded as
// handled, or a crash after the deletions makes the restarted operator act on
// the same annotation value again and pass the new gate unanalysed.
func TestAnalysisGateRecordCarriesThePass(t *testing.T) {
	pending := &v1alpha1.GateStatus{Member: "a", Kind: v1alpha1.GateAfterBatch, Revision: "r2", StartTime: ptr.To(metav1.NewTime(at(-time.Minute)))}
	rg := gatetest.Group(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
		rg.Annotations = map[string]string{v1alpha1.AnnotationSkipGate: "1"}
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{Gate: pending, Checks: []v1alpha1.CheckStatus{{Name: "batch", Phase: v1alpha1.CheckRunning}}}
		rg.Status.StatefulSets[0].GatePassedRevision = "r0"
	})
	written := *rg.Status.DeepCopy()
	ap := New(rg, testNow)
	ap.gatePassed["a"] = "r2" // a's AfterMember gate passed in this pass too
	deleting := gatetest.Plan(gatetest.Member("a", 1, 3), gatetest.Member("b", 0, 3))
	ap.Begin(deleting)
	if ap.st.Gate != nil || ap.st.HandledSkip != "1" {
		t.Fatalf("after the skip: gate %+v, handledSkip %q", ap.st.Gate, ap.st.HandledSkip)
	}
	deleting.Current = "a"
	deleting.Delete = []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a-1"}}}
	if !ap.OpenBatchGateBefore(deleting) {
		t.Fatal("no gate opened before the batch")
	}
	recorded := ap.GateRecord(written)
	if recorded.Analysis == nil || recorded.Analysis.Gate == nil || recorded.Analysis.Gate.StartTime != nil {
		t.Fatalf("recorded analysis %+v, want the new gate not started", recorded.Analysis)
	}
	if recorded.StatefulSets[0].GatePassedRevision != "r2" {
		t.Errorf("recorded gatePassedRevision of a %q, want r2", recorded.StatefulSets[0].GatePassedRevision)
	}
	if written.Analysis.HandledSkip != "" || written.Analysis.Gate == nil || written.Analysis.Gate.StartTime == nil {
		t.Fatal("gateRecord changed the written status it was given")
	}

	// The operator restarts from what was recorded, the annotation unchanged.
	restarted := rg.DeepCopy()
	restarted.Status = recorded
	next := New(restarted, at(time.Second))
	next.Begin(gatetest.Plan(gatetest.Member("a", 1, 2), gatetest.Member("b", 0, 3)))
	if next.st.Gate == nil || slices.Contains(eventReasons(next), "GateSkipped") {
		t.Errorf("after a restart the skip-gate value already acted on passed the new gate: gate %+v, events %v", next.st.Gate, eventReasons(next))
	}
}

// A rollback, started by a failed gate or an abort, is not recorded until
// its GateRecord is written: the controller writes it before the first
// template write, and a pass over that status finds it recorded.
func TestRollbackRecordedBeforeTheTemplatesAreRestored(t *testing.T) {
	plan := gatetest.Plan(gatetest.Member("a", 3, 3), gatetest.Member("b", 1, 3))
	plan.Current = "b"
	for _, tt := range []struct {
		name  string
		start func(rg *v1alpha1.RolloutGroup) *Pass
	}{
		{"a failed gate", func(rg *v1alpha1.RolloutGroup) *Pass {
			ap := New(rg, testNow)
			ap.AfterAct(plan, 1)
			ap = passFrom(rg, ap, at(10*time.Second))
			ap.Begin(plan)
			ap.Record(map[string]analysis.Outcome{"batch": gatetest.Outcome(false)})
			ap.Decide(plan)
			return ap
		}},
		{"an abort", func(rg *v1alpha1.RolloutGroup) *Pass {
			rg.Annotations = map[string]string{v1alpha1.AnnotationAbort: "now"}
			ap := New(rg, testNow)
			ap.Begin(plan)
			ap.Decide(plan)
			return ap
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rg := gatetest.Group(0, v1alpha1.FailureRollback, nil)
			ap := tt.start(rg)
			if !ap.RollingBack() {
				t.Fatalf("no rollback started: analysis %+v", ap.Status())
			}
			if ap.RollbackRecorded(rg.Status) {
				t.Errorf("the rollback counts as recorded in a status that does not hold it")
			}
			record := ap.GateRecord(rg.Status)
			if !ap.RollbackRecorded(record) {
				t.Errorf("the rollback is not recorded by its GateRecord %+v", record.Analysis)
			}
			if rb := record.Analysis.Rollback; rb == nil || len(rb.Members) != 2 || record.Analysis.Failure == nil {
				t.Errorf("GateRecord holds rollback %+v failure %+v, want both members and the failure", rb, record.Analysis.Failure)
			}
			next := rg.DeepCopy()
			next.Status = record
			if again := New(next, at(20*time.Second)); !again.RollbackRecorded(record) {
				t.Errorf("a later pass over the recorded status does not find the rollback recorded")
			}
		})
	}
}

// A stalled rollout (a crash loop fills the member's budget): with onFailure
// Rollback, past the progress deadline, the members that moved roll back as
// after a failed gate; otherwise, or before the deadline, or while a gate is
// pending or the group blocked, paused or already failed, nothing changes.
func TestFailOnStall(t *testing.T) {
	const deadline = time.Minute
	tests := []struct {
		name       string
		policy     v1alpha1.FailurePolicy
		stalledFor time.Duration
		mutate     func(*v1alpha1.RolloutGroup)
		blocked    bool
		wantBack   []v1alpha1.RollbackMember
	}{
		{name: "Rollback past the deadline rolls back", policy: v1alpha1.FailureRollback, stalledFor: deadline,
			wantBack: []v1alpha1.RollbackMember{{Name: "b", From: "r2", To: "r1"}, {Name: "c", From: "r2", To: "r1"}, {Name: "a", From: "r2", To: "r1"}}},
		{name: "Rollback before the deadline waits", policy: v1alpha1.FailureRollback, stalledFor: deadline - time.Second},
		{name: "Pause stays Stalled", policy: v1alpha1.FailurePause, stalledFor: 2 * deadline},
		{name: "no policy stays Stalled", stalledFor: 2 * deadline},
		{name: "paused", policy: v1alpha1.FailureRollback, stalledFor: 2 * deadline,
			mutate: func(rg *v1alpha1.RolloutGroup) { rg.Spec.Paused = true }},
		{name: "blocked", policy: v1alpha1.FailureRollback, stalledFor: 2 * deadline, blocked: true},
		{name: "a gate pending", policy: v1alpha1.FailureRollback, stalledFor: 2 * deadline,
			mutate: func(rg *v1alpha1.RolloutGroup) {
				rg.Status.Analysis = &v1alpha1.AnalysisStatus{Gate: &v1alpha1.GateStatus{Kind: v1alpha1.GateAfterBatch, Member: "b", Revision: "r2"}}
			}},
		{name: "already rolled back", policy: v1alpha1.FailureRollback, stalledFor: 2 * deadline,
			mutate: func(rg *v1alpha1.RolloutGroup) {
				rg.Status.Analysis = &v1alpha1.AnalysisStatus{
					Failure: &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAnalysisFailed, Message: "earlier"},
					Rollback: &v1alpha1.RollbackStatus{StartTime: metav1.NewTime(testNow), CompletionTime: ptr.To(metav1.NewTime(testNow)),
						Members: []v1alpha1.RollbackMember{{Name: "a", From: "r2", To: "r1"}, {Name: "b", From: "r2", To: "r1"}, {Name: "c", From: "r2", To: "r1"}}},
				}
			}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := gatetest.Group(0, tt.policy, tt.mutate)
			if rg.Status.Analysis == nil || rg.Status.Analysis.Gate == nil {
				rg.Spec.Analysis = nil // a stall needs no analysis
			}
			// a is rolled, b holds two crash-looping pods, c waits.
			plan := gatetest.Plan(gatetest.Member("a", 3, 3), gatetest.Member("b", 2, 1), gatetest.Member("c", 0, 3))
			plan.Current, plan.Message = "b", "ingester-b: 2/3 updated, 2/1 pods unavailable"
			if tt.blocked {
				plan.Blocked = &rollout.Blocker{Reason: "NotOnDelete"}
			}
			var before *v1alpha1.AnalysisFailure
			if rg.Status.Analysis != nil {
				before = rg.Status.Analysis.Failure.DeepCopy()
			}
			ap := New(rg, testNow)
			ap.Begin(plan)
			ap.FailOnStall(plan, tt.stalledFor, deadline)
			if tt.wantBack == nil {
				if got := ap.st.Failure; (before == nil) != (got == nil) || (got != nil && got.Message != before.Message) {
					t.Errorf("failure = %+v, want none new", got)
				}
				if slices.Contains(eventReasons(ap), "RollbackStarted") {
					t.Errorf("events %v: no rollback wanted", eventReasons(ap))
				}
				return
			}
			f := ap.st.Failure
			if f == nil || f.Reason != v1alpha1.ReasonProgressDeadlineExceeded || !strings.Contains(f.Message, "progressDeadline 1m0s") ||
				!strings.Contains(f.Message, plan.Message) {
				t.Fatalf("failure = %+v, want ProgressDeadlineExceeded naming the deadline and what the rollout waits for", f)
			}
			if rb := ap.st.Rollback; rb == nil || !slices.Equal(rb.Members, tt.wantBack) {
				t.Fatalf("rollback = %+v, want members %v", ap.st.Rollback, tt.wantBack)
			}
			if got := eventReasons(ap); !slices.Contains(got, v1alpha1.ReasonProgressDeadlineExceeded) || !slices.Contains(got, "RollbackStarted") {
				t.Errorf("events %v, want ProgressDeadlineExceeded and RollbackStarted", got)
			}
			if ap.RollbackStarted() != v1alpha1.ReasonProgressDeadlineExceeded {
				t.Errorf("rollback metric reason %q", ap.RollbackStarted())
			}
			if ap.Status() == nil {
				t.Errorf("status drops the failure of a group without analysis")
			}
		})
	}
}
