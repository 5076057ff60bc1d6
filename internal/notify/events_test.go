package notify

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

var (
	t0    = metav1.NewTime(testTime)
	t1    = metav1.NewTime(testTime.Add(time.Minute))
	t2    = metav1.NewTime(testTime.Add(2 * time.Minute))
	zones = []v1alpha1.MemberStatus{{Name: "a", Replicas: 3}, {Name: "b", Replicas: 120}, {Name: "c", Replicas: 3}}
)

// status is a group status with an open rollout, changed by fns.
func status(fns ...func(*v1alpha1.RolloutGroupStatus)) v1alpha1.RolloutGroupStatus {
	st := v1alpha1.RolloutGroupStatus{Phase: v1alpha1.PhaseProgressing, RolloutStartTime: &t0, StatefulSets: zones, RolloutID: "d1"}
	for _, f := range fns {
		f(&st)
	}
	return st
}

func rolling(m string) func(*v1alpha1.RolloutGroupStatus) {
	return func(st *v1alpha1.RolloutGroupStatus) { st.CurrentStatefulSet = m }
}

func phase(p v1alpha1.RolloutPhase) func(*v1alpha1.RolloutGroupStatus) {
	return func(st *v1alpha1.RolloutGroupStatus) { st.Phase = p }
}

func completed(st *v1alpha1.RolloutGroupStatus) {
	st.Phase, st.CurrentStatefulSet, st.RolloutCompletionTime = v1alpha1.PhaseComplete, "", &t2
}

func gateFailed(st *v1alpha1.RolloutGroupStatus) {
	st.Phase = v1alpha1.PhaseFailed
	st.Analysis = &v1alpha1.AnalysisStatus{Failure: &v1alpha1.AnalysisFailure{Time: t1, Gate: &v1alpha1.GateStatus{Member: "a"}}}
}

func rollingBack(st *v1alpha1.RolloutGroupStatus) {
	st.Phase = v1alpha1.PhaseProgressing
	st.Analysis = &v1alpha1.AnalysisStatus{
		Failure:  &v1alpha1.AnalysisFailure{Time: t1, Gate: &v1alpha1.GateStatus{Member: "a"}},
		Rollback: &v1alpha1.RollbackStatus{StartTime: t1},
	}
}

func rolledBack(st *v1alpha1.RolloutGroupStatus) {
	rollingBack(st)
	st.Phase, st.CurrentStatefulSet = v1alpha1.PhaseFailed, ""
	st.Analysis.Rollback.CompletionTime, st.RolloutCompletionTime = &t2, &t2
}

func atStep(i int32, w v1alpha1.StepWait) func(*v1alpha1.RolloutGroupStatus) {
	return func(st *v1alpha1.RolloutGroupStatus) { st.Step = &v1alpha1.StepStatus{Index: i, WaitingFor: w} }
}

func withID(id string) func(*v1alpha1.RolloutGroupStatus) {
	return func(st *v1alpha1.RolloutGroupStatus) { st.RolloutID = id }
}

// The events of a rollout, derived from the statuses the notifier sees one
// after the other, and the outcome its callback reports.
func TestDerive(t *testing.T) {
	tests := []struct {
		name        string
		seen        []v1alpha1.RolloutGroupStatus
		want        []v1alpha1.NotificationEventType
		wantOutcome v1alpha1.RolloutOutcome
	}{{
		name: "a three-zone rollout",
		seen: []v1alpha1.RolloutGroupStatus{status(rolling("a")), status(rolling("a")), status(rolling("")), status(rolling("a")),
			status(rolling("b")), status(rolling("c")), status(completed)},
		want: []v1alpha1.NotificationEventType{"Started", "MemberReached", "MemberReached", "MemberReached", "Complete"}, wantOutcome: "Complete",
	}, {
		name: "a group that had rolled out before notifications were set is history",
		seen: []v1alpha1.RolloutGroupStatus{status(completed), status(completed)},
	}, {
		name: "a step reached once, however often seen",
		seen: []v1alpha1.RolloutGroupStatus{status(rolling("a")), status(rolling("a"), atStep(0, v1alpha1.StepWaitPods)),
			status(rolling("a"), atStep(0, v1alpha1.StepWaitPromote)), status(rolling("a"), atStep(0, v1alpha1.StepWaitPromote)),
			status(rolling("b"), atStep(1, v1alpha1.StepWaitDuration))},
		want: []v1alpha1.NotificationEventType{"Started", "MemberReached", "StepReached", "MemberReached", "StepReached"},
	}, {
		name: "paused, then stalled",
		seen: []v1alpha1.RolloutGroupStatus{status(rolling("a")), status(rolling("a"), phase(v1alpha1.PhasePaused)),
			status(rolling("a")), status(rolling("a"), phase(v1alpha1.PhaseStalled))},
		want: []v1alpha1.NotificationEventType{"Started", "MemberReached", "Paused", "Stalled"},
	}, {
		name: "a failed gate that holds",
		seen: []v1alpha1.RolloutGroupStatus{status(rolling("a")), status(rolling("a"), gateFailed), status(rolling("a"), gateFailed)},
		want: []v1alpha1.NotificationEventType{"Started", "MemberReached", "GateFailed", "Failed"}, wantOutcome: "Failed",
	}, {
		name: "a failed gate rolled back",
		seen: []v1alpha1.RolloutGroupStatus{status(rolling("a")), status(rolling("a"), rollingBack), status(rolledBack)},
		want: []v1alpha1.NotificationEventType{"Started", "MemberReached", "GateFailed", "RollingBack", "Failed"}, wantOutcome: "RolledBack",
	}, {
		name: "a new rolloutId on a failed group is a new rollout",
		seen: []v1alpha1.RolloutGroupStatus{status(rolling("a"), gateFailed), status(rolling("a"), withID("d2")), status(completed, withID("d2"))},
		want: []v1alpha1.NotificationEventType{"Started", "MemberReached", "GateFailed", "Failed", "Started", "MemberReached", "Complete"}, wantOutcome: "Complete",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ns v1alpha1.NotificationStatus
			var got []v1alpha1.NotificationEventType
			var callbacks []v1alpha1.RolloutOutcome
			for i, st := range tt.seen {
				before := len(ns.Callbacks)
				ns = Derive(ns, st, "uid", true, testTime.Add(time.Duration(i)*time.Second))
				for _, c := range ns.Callbacks[before:] {
					callbacks = append(callbacks, c.Outcome)
					if c.RolloutID != st.RolloutID {
						t.Errorf("callback carries rollout id %q, want %q", c.RolloutID, st.RolloutID)
					}
				}
			}
			for i, ev := range ns.Events {
				got = append(got, ev.Type)
				if ev.Sequence != int64(i+1) {
					t.Errorf("event %d has sequence %d", i, ev.Sequence)
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("events %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("events %v, want %v", got, tt.want)
				}
			}
			switch {
			case tt.wantOutcome == "" && len(callbacks) > 0:
				t.Errorf("callbacks %v, want none", callbacks)
			case tt.wantOutcome != "" && (len(callbacks) == 0 || callbacks[len(callbacks)-1] != tt.wantOutcome):
				t.Errorf("callbacks %v, want the last %s", callbacks, tt.wantOutcome)
			}
		})
	}
}

// A member's event records its replicas, so that its pods can be listed.
func TestMemberEventListsPods(t *testing.T) {
	ns := Derive(v1alpha1.NotificationStatus{}, status(rolling("b")), "uid", true, testTime)
	ev := ns.Events[len(ns.Events)-1]
	if ev.Type != v1alpha1.NotificationMemberReached || ev.Member != "b" || ev.Replicas != 120 || Pages(ev) != 3 {
		t.Errorf("member event %+v", ev)
	}
}

// Without receivers, events are counted, not kept.
func TestDeriveWithoutReceivers(t *testing.T) {
	ns := Derive(v1alpha1.NotificationStatus{}, status(rolling("a")), "uid", false, testTime)
	if len(ns.Events) != 0 || ns.Sequence != 2 {
		t.Errorf("events %+v, sequence %d", ns.Events, ns.Sequence)
	}
}
