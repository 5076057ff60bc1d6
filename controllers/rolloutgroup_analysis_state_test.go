package controllers

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
)

// analysisGroup is a group of members a, b and c with one AfterBatch check
// "batch" and one AfterMember check "zone", a soak of soak, and policy.
func analysisGroup(soak time.Duration, policy v1alpha1.FailurePolicy, mutate func(*v1alpha1.RolloutGroup)) *v1alpha1.RolloutGroup {
	return group(func(rg *v1alpha1.RolloutGroup) {
		rg.Spec.OnFailure = policy
		rg.Spec.Analysis = &v1alpha1.RolloutAnalysis{
			Prometheus: v1alpha1.PrometheusSource{Address: "http://prometheus:9090"},
			SoakTime:   &metav1.Duration{Duration: soak},
			Checks: []v1alpha1.AnalysisCheck{
				{Name: "batch", Query: `errors{pod=~"{{ .Member }}-.*"}`, Gate: v1alpha1.GateAfterBatch,
					Condition: v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: "<", Threshold: "1"}}},
				{Name: "zone", Query: `up{sts="{{ .Member }}"}`, Gate: v1alpha1.GateAfterMember, SuccessThreshold: 2,
					Condition: v1alpha1.CheckCondition{HasData: ptr.To(true)}},
			},
		}
		rg.Status.StatefulSets = []v1alpha1.MemberStatus{{Name: "a", StableRevision: "r1"}, {Name: "b", StableRevision: "r1"}, {Name: "c", StableRevision: "r1"}}
		if mutate != nil {
			mutate(rg)
		}
	})
}

// rolloutMember is a member state: name, pods on r2 of 3, available pods.
func rolloutMember(name string, updated, available int32) rollout.MemberState {
	ms := rollout.MemberState{Name: name, Replicas: 3, Updated: updated, Available: available, Ready: available,
		MaxUnavailable: 1, UpdateRevision: "r2", CurrentRevision: "r1", StatusReplicas: 3, StatusReady: available,
		StableRevision: "r1", Unavailable: 3 - available, ToRoll: 3 - updated, Phase: v1alpha1.MemberPending}
	if updated == 3 && available == 3 {
		ms.Phase = v1alpha1.MemberComplete
	}
	return ms
}

func analysisPlan(members ...rollout.MemberState) rollout.Plan {
	return rollout.Plan{Settled: true, Members: members}
}

func at(d time.Duration) time.Time { return statusNow.Add(d) }

func eventReasons(ap *analysisPass) []string {
	var out []string
	for _, e := range ap.events {
		out = append(out, e.reason)
	}
	return out
}

func outcome(success bool) analysis.Outcome {
	return analysis.Outcome{Query: "q", Verdict: analysis.Verdict{Success: success, Value: map[bool]string{true: "0", false: "5"}[success]}}
}

// A batch of a deletes its pods: the AfterBatch gate opens, holds every
// deletion while the batch's pods come back, starts when they are available,
// runs only the AfterBatch check, and passes on its success.
func TestAnalysisBatchGate(t *testing.T) {
	rg := analysisGroup(0, v1alpha1.FailurePause, nil)
	ap := newAnalysisPass(rg, statusNow)
	deleting := analysisPlan(rolloutMember("a", 0, 3), rolloutMember("b", 0, 3))
	deleting.Current = "a"
	ap.afterAct(deleting, actionResult{deleted: 1})
	g := ap.st.Gate
	if g == nil || g.Kind != v1alpha1.GateAfterBatch || g.Member != "a" || g.Revision != "r2" || g.StartTime != nil {
		t.Fatalf("gate after a batch = %+v, want an AfterBatch gate of a on r2 not started", g)
	}
	if names := checkNames(ap.st.Checks); !slices.Equal(names, []string{"batch"}) {
		t.Errorf("AfterBatch gate checks = %v, want [batch]", names)
	}
	in := rollout.Input{Members: []rollout.Member{{Name: "a"}, {Name: "b"}}}
	ap.applyTo(&in)
	if in.Hold == nil || in.Hold.Reason != v1alpha1.ReasonWaitingForPods {
		t.Errorf("hold before the batch's pods are back = %+v, want WaitingForPods", in.Hold)
	}
	if len(ap.dueChecks()) != 0 {
		t.Error("a check is due before the gate started")
	}

	// The batch's pod is back but not available: the gate has not started.
	ap = passFrom(rg, ap, at(time.Second))
	ap.begin(analysisPlan(rolloutMember("a", 1, 2), rolloutMember("b", 0, 3)))
	if ap.st.Gate.StartTime != nil {
		t.Fatal("the gate started while the batch's pod is not available")
	}
	// Available: it starts, the check is due at once (initialDelay 0).
	ap = passFrom(rg, ap, at(2*time.Second))
	back := analysisPlan(rolloutMember("a", 1, 3), rolloutMember("b", 0, 3))
	ap.begin(back)
	if ap.st.Gate.StartTime == nil || !ap.st.Gate.StartTime.Time.Equal(at(2*time.Second)) {
		t.Fatalf("gate start %v, want when the batch was back", ap.st.Gate.StartTime)
	}
	if due := ap.dueChecks(); len(due) != 1 || due[0].Name != "batch" {
		t.Fatalf("due checks %v, want [batch]", due)
	}
	if v := ap.view(); v.phase != v1alpha1.PhaseAnalyzing || v.reason != v1alpha1.ReasonWaitingForAnalysis {
		t.Errorf("view = %+v, want Analyzing, WaitingForAnalysis", v)
	}
	ap.record(map[string]analysis.Outcome{"batch": outcome(true)})
	ap.decide(back)
	if ap.st.Gate != nil || !slices.Contains(eventReasons(ap), "GatePassed") {
		t.Fatalf("gate %+v, events %v: want passed", ap.st.Gate, eventReasons(ap))
	}
	in = rollout.Input{Members: []rollout.Member{{Name: "a"}, {Name: "b"}}}
	ap.applyTo(&in)
	if in.Hold != nil || ap.gatePassed["a"] != "" {
		t.Errorf("after the batch gate: hold %+v, gatePassed %q; want none (a batch gate is no member gate)", in.Hold, ap.gatePassed["a"])
	}
}

// passFrom is the next reconcile's pass, from the state the last one left.
func passFrom(rg *v1alpha1.RolloutGroup, last *analysisPass, now time.Time) *analysisPass {
	next := rg.DeepCopy()
	next.Status.Analysis = last.status()
	for i := range next.Status.StatefulSets {
		next.Status.StatefulSets[i].GatePassedRevision = last.gatePassed[next.Status.StatefulSets[i].Name]
	}
	return newAnalysisPass(next, now)
}

func checkNames(checks []v1alpha1.CheckStatus) []string {
	var out []string
	for _, c := range checks {
		out = append(out, c.Name)
	}
	return out
}

// A member complete on its new revision opens its AfterMember gate, which runs
// the AfterMember checks and passes only when they pass and the member has
// been whole for soakTime; losing a pod restarts the soak.
func TestAnalysisMemberGateAndSoak(t *testing.T) {
	rg := analysisGroup(time.Minute, v1alpha1.FailurePause, nil)
	done := analysisPlan(rolloutMember("a", 3, 3), rolloutMember("b", 0, 3))
	done.GateDue = "a"
	ap := newAnalysisPass(rg, statusNow)
	ap.begin(done)
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
		ap.begin(plan)
		outcomes := map[string]analysis.Outcome{}
		for _, c := range ap.dueChecks() {
			outcomes[c.Name] = outcome(success)
		}
		ap.record(outcomes)
		ap.decide(plan)
	}
	ap.record(map[string]analysis.Outcome{"zone": outcome(true)})
	ap.decide(done)
	step(10*time.Second, done, true) // successThreshold 2 reached, soak not over
	if ap.st.Gate == nil {
		t.Fatal("gate passed before the soak ended")
	}
	if v := ap.view(); v.reason != v1alpha1.ReasonSoaking || !strings.Contains(v.message, "soaking until") {
		t.Errorf("view %+v, want Soaking", v)
	}
	// A pod of a goes away: the soak waits for the member to be whole again.
	lost := analysisPlan(rolloutMember("a", 3, 2), rolloutMember("b", 0, 3))
	step(20*time.Second, lost, true)
	if ap.st.Gate.SoakUntil != nil {
		t.Fatalf("soak %v while a is not whole, want none", ap.st.Gate.SoakUntil)
	}
	step(30*time.Second, done, true)
	if got := ap.st.Gate.SoakUntil; got == nil || !got.Time.Equal(at(90*time.Second)) {
		t.Fatalf("soak until %v, want +90s (whole again at +30s, plus 1m)", got)
	}
	if d := ap.requeueAfter(); d != 10*time.Second {
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
		{name: "a failure with Pause holds", policy: v1alpha1.FailurePause, outcome: outcome(false), repeat: 1,
			wantReason: v1alpha1.ReasonAnalysisFailed, wantEvent: "GateFailed"},
		{name: "errors with Pause hold after errorThreshold", policy: v1alpha1.FailurePause, outcome: analysis.Outcome{Err: errors.New("connection refused")}, repeat: 3,
			wantReason: v1alpha1.ReasonAnalysisError, wantEvent: v1alpha1.ReasonAnalysisError},
		{name: "a failure with Rollback rolls back", policy: v1alpha1.FailureRollback, outcome: outcome(false), repeat: 1,
			wantReason: v1alpha1.ReasonAnalysisFailed, wantEvent: "RollbackStarted",
			wantMembers: []v1alpha1.RollbackMember{{Name: "b", From: "r2", To: "r1"}, {Name: "c", From: "r2", To: "r1"}, {Name: "a", From: "r2", To: "r1"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := analysisGroup(0, tt.policy, nil)
			// a is rolled, b partly, c not yet (its template moved too).
			plan := analysisPlan(rolloutMember("a", 3, 3), rolloutMember("b", 1, 3), rolloutMember("c", 0, 3))
			plan.Current = "b"
			ap := newAnalysisPass(rg, statusNow)
			ap.afterAct(plan, actionResult{deleted: 1})
			for i := range tt.repeat {
				ap = passFrom(rg, ap, at(time.Duration(i)*10*time.Second))
				ap.begin(plan)
				ap.record(map[string]analysis.Outcome{"batch": tt.outcome})
				ap.decide(plan)
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
			ap.applyTo(&in)
			if tt.wantMembers == nil {
				if ap.st.Rollback != nil || in.Hold == nil || in.Hold.Reason != tt.wantReason || in.RollingBack {
					t.Errorf("Pause: rollback %+v, hold %+v, rollingBack %v", ap.st.Rollback, in.Hold, in.RollingBack)
				}
				if v := ap.view(); v.phase != v1alpha1.PhaseFailed || v.reason != tt.wantReason {
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
			if v := ap.view(); !v.rollingBack || v.phase != "" {
				t.Errorf("view %+v, want rolling back", v)
			}
			ap.setRestore([]string{"a"}, "")
			ap.applyTo(&in)
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
	rg := analysisGroup(0, v1alpha1.FailureRollback, func(rg *v1alpha1.RolloutGroup) {
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{
			Failure:  &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAnalysisFailed, Check: "zone", Message: "check zone failed"},
			Rollback: &v1alpha1.RollbackStatus{StartTime: metav1.NewTime(statusNow), Members: []v1alpha1.RollbackMember{{Name: "a", From: "r2", To: "r1"}}},
		}
	})
	onRev := func(name, rev string) rollout.MemberState {
		ms := rolloutMember(name, 3, 3)
		ms.UpdateRevision = rev
		return ms
	}
	back := analysisPlan(onRev("a", "r1"), onRev("b", "r1"), onRev("c", "r1"))
	back.Complete = true
	ap := newAnalysisPass(rg, at(time.Minute))
	ap.begin(back)
	ap.afterAct(back, actionResult{})
	if rb := ap.st.Rollback; rb.CompletionTime == nil || !ap.rolledBack || !slices.Contains(eventReasons(ap), "RollbackComplete") {
		t.Fatalf("rollback %+v, events %v: want complete", rb, eventReasons(ap))
	}
	v := ap.view()
	if v.phase != v1alpha1.PhaseFailed || v.reason != v1alpha1.ReasonAnalysisFailed || !strings.Contains(v.message, "rolled back 1 StatefulSet") {
		t.Errorf("view %+v, want Failed AnalysisFailed saying it rolled back", v)
	}
	// The failed revision again (a GitOps tool re-applying it): still Failed.
	again := analysisPlan(onRev("a", "r2"), onRev("b", "r1"), onRev("c", "r1"))
	ap = passFrom(rg, ap, at(2*time.Minute))
	ap.begin(again)
	if ap.st.Failure == nil {
		t.Fatal("re-applying the failed revision released the failure")
	}
	// A new revision: released.
	fixed := analysisPlan(onRev("a", "r3"), onRev("b", "r1"), onRev("c", "r1"))
	ap = passFrom(rg, ap, at(3*time.Minute))
	ap.begin(fixed)
	if ap.st.Failure != nil || ap.st.Rollback != nil || !slices.Contains(eventReasons(ap), "FailureCleared") {
		t.Fatalf("failure %+v rollback %+v events %v: want released by a new revision", ap.st.Failure, ap.st.Rollback, eventReasons(ap))
	}
	// An unsettled plan decides nothing.
	ap = newAnalysisPass(rg, at(time.Minute))
	unsettled := fixed
	unsettled.Settled = false
	ap.begin(unsettled)
	if ap.st.Failure == nil {
		t.Error("released on an unsettled view")
	}
}

// With onFailure Pause, any member's new update revision ends the failure.
func TestAnalysisPauseReleasedByNewTemplate(t *testing.T) {
	rg := analysisGroup(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{Failure: &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAnalysisFailed,
			Revisions: []v1alpha1.MemberRevision{{Name: "a", Revision: "r2"}, {Name: "b", Revision: "r2"}}}}
	})
	same := analysisPlan(rolloutMember("a", 3, 3), rolloutMember("b", 0, 3))
	ap := newAnalysisPass(rg, statusNow)
	ap.begin(same)
	if ap.st.Failure == nil {
		t.Fatal("released with the same revisions")
	}
	moved := analysisPlan(rolloutMember("a", 3, 3), rolloutMember("b", 0, 3))
	moved.Members[1].UpdateRevision = "r3"
	ap = newAnalysisPass(rg, statusNow)
	ap.begin(moved)
	if ap.st.Failure != nil {
		t.Fatal("not released by b's new revision")
	}
}

// The manual controls act once per annotation value.
func TestAnalysisControls(t *testing.T) {
	failedGate := &v1alpha1.GateStatus{Member: "a", Kind: v1alpha1.GateAfterMember, Revision: "r2", StartTime: ptr.To(metav1.NewTime(at(-time.Hour)))}
	pendingGate := &v1alpha1.GateStatus{Member: "a", Kind: v1alpha1.GateAfterMember, Revision: "r2", StartTime: ptr.To(metav1.NewTime(at(-time.Minute)))}
	failed := &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAnalysisFailed, Check: "zone", Message: "check zone failed", Gate: failedGate}
	// The plan was made before the controls acted: a's gate is due.
	plan := analysisPlan(rolloutMember("a", 3, 3), rolloutMember("b", 0, 3))
	plan.GateDue = "a"
	tests := []struct {
		name        string
		annotations map[string]string
		status      v1alpha1.AnalysisStatus
		check       func(t *testing.T, ap *analysisPass)
		wantEvent   string
		wantMessage string
	}{{
		name: "retry evaluates a failed gate again from the start", annotations: map[string]string{v1alpha1.AnnotationRetry: "1"},
		status: v1alpha1.AnalysisStatus{Failure: failed, Checks: []v1alpha1.CheckStatus{{Name: "zone", Phase: v1alpha1.CheckFailed, ConsecutiveFailures: 1}}},
		check: func(t *testing.T, ap *analysisPass) {
			g := ap.st.Gate
			if ap.st.Failure != nil || g == nil || g.Member != "a" || !g.StartTime.Time.Equal(statusNow) ||
				len(ap.st.Checks) != 1 || ap.st.Checks[0].Phase != v1alpha1.CheckPending || ap.st.HandledRetry != "1" {
				t.Errorf("after retry: %+v", ap.st)
			}
		},
		wantEvent: "RetryRequested", wantMessage: "evaluated again from the start",
	}, {
		name: "retry after a rollback clears it", annotations: map[string]string{v1alpha1.AnnotationRetry: "1"},
		status: v1alpha1.AnalysisStatus{Failure: failed, Rollback: &v1alpha1.RollbackStatus{CompletionTime: ptr.To(metav1.NewTime(statusNow))}},
		check: func(t *testing.T, ap *analysisPass) {
			if ap.st.Failure != nil || ap.st.Rollback != nil {
				t.Errorf("after retry: %+v", ap.st)
			}
		},
		wantEvent: "RetryRequested", wantMessage: "templates as they are now",
	}, {
		name: "a value already acted on is not acted on again", annotations: map[string]string{v1alpha1.AnnotationRetry: "1"},
		status: v1alpha1.AnalysisStatus{Failure: failed, HandledRetry: "1"},
		check: func(t *testing.T, ap *analysisPass) {
			if ap.st.Failure == nil {
				t.Error("the failure was cleared again")
			}
		},
	}, {
		name: "retry without a failure does nothing", annotations: map[string]string{v1alpha1.AnnotationRetry: "2"},
		check: func(t *testing.T, ap *analysisPass) {
			if ap.st.HandledRetry != "2" {
				t.Errorf("handledRetry %q", ap.st.HandledRetry)
			}
		},
		wantEvent: "RetryRequested", wantMessage: "nothing to retry",
	}, {
		name: "skip passes the pending gate", annotations: map[string]string{v1alpha1.AnnotationSkipGate: "x"},
		status: v1alpha1.AnalysisStatus{Gate: pendingGate},
		check: func(t *testing.T, ap *analysisPass) {
			if ap.st.Gate != nil || ap.gatePassed["a"] != "r2" || ap.st.HandledSkip != "x" {
				t.Errorf("after skip: %+v, gatePassed %v", ap.st, ap.gatePassed)
			}
		},
		wantEvent: "GateSkipped", wantMessage: "passed by hand",
	}, {
		name: "skip passes a failed gate that holds the group", annotations: map[string]string{v1alpha1.AnnotationSkipGate: "x"},
		status: v1alpha1.AnalysisStatus{Failure: failed},
		check: func(t *testing.T, ap *analysisPass) {
			if ap.st.Failure != nil || ap.gatePassed["a"] != "r2" {
				t.Errorf("after skip: %+v, gatePassed %v", ap.st, ap.gatePassed)
			}
		},
		wantEvent: "GateSkipped", wantMessage: "the rollout goes on",
	}, {
		name: "skip with no gate does nothing", annotations: map[string]string{v1alpha1.AnnotationSkipGate: "x"},
		wantEvent: "GateSkipped", wantMessage: "nothing skipped",
	}, {
		name: "abort rolls back whatever onFailure says", annotations: map[string]string{v1alpha1.AnnotationAbort: "now"},
		status: v1alpha1.AnalysisStatus{Gate: pendingGate},
		check: func(t *testing.T, ap *analysisPass) {
			f, rb := ap.st.Failure, ap.st.Rollback
			if f == nil || f.Reason != v1alpha1.ReasonAborted || rb == nil || len(rb.Members) != 2 || ap.st.Gate != nil || ap.rollbackStarted != v1alpha1.ReasonAborted {
				t.Errorf("after abort: failure %+v rollback %+v gate %+v", f, rb, ap.st.Gate)
			}
		},
		wantEvent: "AbortRequested", wantMessage: "echelon.dev/abort=now: rolling back",
	}, {
		name: "abort while rolling back does nothing more", annotations: map[string]string{v1alpha1.AnnotationAbort: "again"},
		status:    v1alpha1.AnalysisStatus{Failure: failed, Rollback: &v1alpha1.RollbackStatus{}},
		wantEvent: "AbortRequested", wantMessage: "already rolling back",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := analysisGroup(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
				rg.Annotations = tt.annotations
				rg.Status.Analysis = tt.status.DeepCopy()
			})
			ap := newAnalysisPass(rg, statusNow)
			ap.begin(plan)
			if tt.check != nil {
				tt.check(t, ap)
			}
			switch {
			case tt.wantEvent == "" && len(ap.events) > 0:
				t.Errorf("events %+v, want none", ap.events)
			case tt.wantEvent != "":
				if len(ap.events) == 0 || ap.events[0].reason != tt.wantEvent || !strings.Contains(ap.events[0].message, tt.wantMessage) {
					t.Errorf("events %+v, want first %s saying %q", ap.events, tt.wantEvent, tt.wantMessage)
				}
			}
		})
	}
}

// A gate whose member moves to another revision is cancelled; a gate is never
// opened for a group that failed.
func TestAnalysisGateCancelled(t *testing.T) {
	rg := analysisGroup(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{Gate: &v1alpha1.GateStatus{Member: "a", Kind: v1alpha1.GateAfterBatch, Revision: "r1"}}
	})
	ap := newAnalysisPass(rg, statusNow)
	ap.begin(analysisPlan(rolloutMember("a", 1, 3)))
	if ap.st.Gate != nil {
		t.Errorf("gate of r1 kept for a member on r2: %+v", ap.st.Gate)
	}
	rg.Spec.Analysis = nil
	rg.Status.Analysis.Gate.Revision = "r2"
	ap = newAnalysisPass(rg, statusNow)
	ap.begin(analysisPlan(rolloutMember("a", 1, 3)))
	if ap.st.Gate != nil || ap.status() != nil {
		t.Errorf("gate kept without spec.analysis: %+v", ap.st)
	}
}

// computeStatus with analysis: the rollout is not complete while a gate is
// pending, the stable revision stays what the pods ran until it is, and a
// completed rollback ends the rollout without completing it.
func TestComputeStatusWithAnalysis(t *testing.T) {
	complete := analysisPlan(rolloutMember("a", 3, 3), rolloutMember("b", 3, 3))
	complete.Complete = true
	complete.Message = "all members updated and available"
	rg := analysisGroup(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
		openRollout(time.Minute)(rg)
		rg.Status.StatefulSets = []v1alpha1.MemberStatus{{Name: "a", StableRevision: "r1", GatePassedRevision: "r2"}, {Name: "b", StableRevision: "r1"}}
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{Gate: &v1alpha1.GateStatus{Member: "b", Kind: v1alpha1.GateAfterMember, Revision: "r2",
			StartTime: ptr.To(metav1.NewTime(at(-time.Minute))), SoakUntil: ptr.To(metav1.NewTime(at(-time.Minute)))},
			Checks: []v1alpha1.CheckStatus{{Name: "zone", Phase: v1alpha1.CheckRunning, LastTime: ptr.To(metav1.NewTime(at(-time.Second))), LastValue: "1"}}}
	})
	ap := newAnalysisPass(rg, statusNow)
	ap.begin(complete)
	up := computeStatus(rg, complete, actionResult{}, ap, statusNow)
	st := up.status
	if up.rolloutCompleted || st.Phase != v1alpha1.PhaseAnalyzing || st.StatefulSets[1].StableRevision != "r1" || st.StatefulSets[0].GatePassedRevision != "r2" {
		t.Fatalf("with b's gate pending: completed %v phase %s members %+v", up.rolloutCompleted, st.Phase, st.StatefulSets)
	}
	if c := findCondition(st.Conditions, v1alpha1.ConditionProgressing); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonWaitingForAnalysis {
		t.Errorf("Progressing = %+v, want True WaitingForAnalysis", c)
	}
	if !strings.Contains(st.Message, "AfterMember gate of b (revision r2): zone Running 0/2 (1)") {
		t.Errorf("message %q", st.Message)
	}
	// The gate passes: complete, and the stable revisions become r2.
	ap.record(map[string]analysis.Outcome{"zone": outcome(true)})
	ap.record(map[string]analysis.Outcome{"zone": outcome(true)})
	ap.decide(complete)
	up = computeStatus(rg, complete, actionResult{}, ap, statusNow)
	if !up.rolloutCompleted || up.status.Phase != v1alpha1.PhaseComplete || up.status.StatefulSets[1].StableRevision != "r2" {
		t.Fatalf("gate passed: completed %v phase %s members %+v", up.rolloutCompleted, up.status.Phase, up.status.StatefulSets)
	}

	// A completed rollback ends the rollout, Failed, without completing it.
	rolledBack := analysisPlan(rolloutMember("a", 3, 3))
	rolledBack.Members[0].UpdateRevision = "r1"
	rolledBack.Complete = true
	rb := analysisGroup(0, v1alpha1.FailureRollback, func(rg *v1alpha1.RolloutGroup) {
		openRollout(time.Minute)(rg)
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{
			Failure:  &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAnalysisFailed, Message: "check zone failed"},
			Rollback: &v1alpha1.RollbackStatus{StartTime: metav1.NewTime(at(-time.Minute)), Members: []v1alpha1.RollbackMember{{Name: "a", From: "r2", To: "r1"}}},
		}
	})
	ap = newAnalysisPass(rb, statusNow)
	ap.begin(rolledBack)
	ap.afterAct(rolledBack, actionResult{})
	up = computeStatus(rb, rolledBack, actionResult{}, ap, statusNow)
	if up.rolloutCompleted || !up.rolledBack || up.status.Phase != v1alpha1.PhaseFailed || up.status.RolloutCompletionTime == nil {
		t.Fatalf("rolled back: completed %v rolledBack %v phase %s", up.rolloutCompleted, up.rolledBack, up.status.Phase)
	}
	if c := findCondition(up.status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonAnalysisFailed {
		t.Errorf("Ready = %+v, want reason AnalysisFailed", c)
	}
	// Failed, a new rollout does not start while the failed revision is back.
	again := analysisPlan(rolloutMember("a", 0, 3))
	again.ToRoll = 3
	rb.Status = up.status
	ap = newAnalysisPass(rb, at(time.Minute))
	ap.begin(again)
	if up := computeStatus(rb, again, actionResult{}, ap, at(time.Minute)); up.rolloutStarted || up.status.Phase != v1alpha1.PhaseFailed {
		t.Errorf("failed group: rolloutStarted %v phase %s", up.rolloutStarted, up.status.Phase)
	}
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func TestAnalysisChangedIsUrgent(t *testing.T) {
	base := &v1alpha1.AnalysisStatus{Checks: []v1alpha1.CheckStatus{{Name: "c", Phase: v1alpha1.CheckRunning, ConsecutiveSuccesses: 1}}}
	counted := base.DeepCopy()
	counted.Checks[0].ConsecutiveSuccesses, counted.Checks[0].LastValue = 2, "0.1"
	passed := counted.DeepCopy()
	passed.Checks[0].Phase = v1alpha1.CheckPassed
	gated := base.DeepCopy()
	gated.Gate = &v1alpha1.GateStatus{Member: "a"}
	tests := []struct {
		name string
		w, n *v1alpha1.AnalysisStatus
		want bool
	}{
		{"counts wait", base, counted, false},
		{"a check's phase is urgent", counted, passed, true},
		{"a gate is urgent", base, gated, true},
		{"appearing is urgent", nil, base, true},
		{"nothing", nil, nil, false},
	}
	for _, tt := range tests {
		if got := analysisChanged(tt.w, tt.n); got != tt.want {
			t.Errorf("%s: analysisChanged = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// The AfterBatch gate a batch's deletions open is opened before they are
// made, with fresh check records, so that the controller can record it first:
// a pass that dies after deleting must not leave the next batch ungated, nor
// a stale Passed record of the last gate to pass the new one.
func TestAnalysisBatchGateOpenedBeforeDeleting(t *testing.T) {
	rg := analysisGroup(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{Checks: []v1alpha1.CheckStatus{{Name: "batch", Phase: v1alpha1.CheckPassed, ConsecutiveSuccesses: 1}}}
	})
	deleting := analysisPlan(rolloutMember("a", 1, 3), rolloutMember("b", 0, 3))
	deleting.Current = "a"
	deleting.Delete = []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a-1"}}}
	ap := newAnalysisPass(rg, statusNow)
	if !ap.openBatchGateBefore(deleting) {
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
		"no deletions":        {plan: analysisPlan(rolloutMember("a", 1, 3))},
		"no AfterBatch check": {mutate: func(rg *v1alpha1.RolloutGroup) { rg.Spec.Analysis.Checks = rg.Spec.Analysis.Checks[1:] }, plan: deleting},
		"failed":              {mutate: func(rg *v1alpha1.RolloutGroup) { rg.Status.Analysis.Failure = &v1alpha1.AnalysisFailure{} }, plan: deleting},
	} {
		g := analysisGroup(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
			rg.Status.Analysis = &v1alpha1.AnalysisStatus{}
			if tt.mutate != nil {
				tt.mutate(rg)
			}
		})
		if ap := newAnalysisPass(g, statusNow); ap.openBatchGateBefore(tt.plan) || ap.st.Gate != nil {
			t.Errorf("%s: a gate was opened", name)
		}
	}
}

// What the controller writes before a batch's deletions is everything the
// analysis decided in the pass, not only the new gate: a skip-gate that
// passed a's pending AfterBatch gate in the same pass must be recorded as
// handled, or a crash after the deletions makes the restarted operator act on
// the same annotation value again and pass the new gate unanalysed.
func TestAnalysisGateRecordCarriesThePass(t *testing.T) {
	pending := &v1alpha1.GateStatus{Member: "a", Kind: v1alpha1.GateAfterBatch, Revision: "r2", StartTime: ptr.To(metav1.NewTime(at(-time.Minute)))}
	rg := analysisGroup(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
		rg.Annotations = map[string]string{v1alpha1.AnnotationSkipGate: "1"}
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{Gate: pending, Checks: []v1alpha1.CheckStatus{{Name: "batch", Phase: v1alpha1.CheckRunning}}}
		rg.Status.StatefulSets[0].GatePassedRevision = "r0"
	})
	written := *rg.Status.DeepCopy()
	ap := newAnalysisPass(rg, statusNow)
	ap.gatePassed["a"] = "r2" // a's AfterMember gate passed in this pass too
	deleting := analysisPlan(rolloutMember("a", 1, 3), rolloutMember("b", 0, 3))
	ap.begin(deleting)
	if ap.st.Gate != nil || ap.st.HandledSkip != "1" {
		t.Fatalf("after the skip: gate %+v, handledSkip %q", ap.st.Gate, ap.st.HandledSkip)
	}
	deleting.Current = "a"
	deleting.Delete = []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "a-1"}}}
	if !ap.openBatchGateBefore(deleting) {
		t.Fatal("no gate opened before the batch")
	}
	recorded := ap.gateRecord(written)
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
	next := newAnalysisPass(restarted, at(time.Second))
	next.begin(analysisPlan(rolloutMember("a", 1, 2), rolloutMember("b", 0, 3)))
	if next.st.Gate == nil || slices.Contains(eventReasons(next), "GateSkipped") {
		t.Errorf("after a restart the skip-gate value already acted on passed the new gate: gate %+v, events %v", next.st.Gate, eventReasons(next))
	}
}
