package rollout

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func TestStepTarget(t *testing.T) {
	for _, tt := range []struct{ percent, total, want int32 }{
		{1, 90, 1}, {1, 300, 3}, {50, 90, 45}, {50, 3, 2}, {100, 90, 90}, {33, 10, 4}, {1, 0, 0},
	} {
		if got := StepTarget(tt.percent, tt.total); got != tt.want {
			t.Errorf("StepTarget(%d, %d) = %d, want %d", tt.percent, tt.total, got, tt.want)
		}
	}
}

func TestDecideStep(t *testing.T) {
	promote := &v1alpha1.StepPause{}
	tenMinutes := &v1alpha1.StepPause{Duration: &metav1.Duration{Duration: 10 * time.Minute}}
	steps := []v1alpha1.RolloutStep{{Percent: 1, Pause: promote}, {Percent: 50, Pause: tenMinutes}, {Percent: 100}}
	// Three zones of 30: pending counts the pods not yet rolled.
	zones := func(pending ...int32) []MemberState {
		var out []MemberState
		for i, p := range pending {
			out = append(out, MemberState{Name: string(rune('a' + i)), Replicas: 30, Pending: p})
		}
		return out
	}
	since := testNow.Add(-3 * time.Minute)
	tests := []struct {
		name      string
		in        StepsInput
		members   []MemberState
		wantIndex int32
		wantWait  v1alpha1.StepWait
		wantLimit int
		wantHold  string
		wantUsed  bool
	}{
		{name: "a new rollout rolls one pod of ninety for 1%", in: StepsInput{Steps: steps}, members: zones(30, 30, 30),
			wantIndex: 0, wantWait: v1alpha1.StepWaitPods, wantLimit: 1},
		{name: "1% reached: waits for a promote", in: StepsInput{Steps: steps}, members: zones(29, 30, 30),
			wantIndex: 0, wantWait: v1alpha1.StepWaitPromote, wantHold: v1alpha1.ReasonWaitingForPromote},
		{name: "a promote ends the pause: the next step rolls up to 45 pods", in: StepsInput{Steps: steps, Promoted: true}, members: zones(29, 30, 30),
			wantIndex: 1, wantWait: v1alpha1.StepWaitPods, wantLimit: 44, wantUsed: true},
		{name: "a promote ends one pause only", in: StepsInput{Steps: []v1alpha1.RolloutStep{{Percent: 1, Pause: promote}, {Percent: 2, Pause: promote}, {Percent: 100}}, Promoted: true},
			members: zones(28, 30, 30), wantIndex: 1, wantWait: v1alpha1.StepWaitPromote, wantHold: v1alpha1.ReasonWaitingForPromote, wantUsed: true},
		{name: "50% reached with a pod not available: waits for it before the pause", in: StepsInput{Steps: steps, Index: 1},
			members:   func() []MemberState { m := zones(0, 15, 30); m[1].Unavailable = 1; return m }(),
			wantIndex: 1, wantWait: v1alpha1.StepWaitAvailability, wantHold: v1alpha1.ReasonWaitingForStep},
		{name: "the pause of 10m runs from when it began", in: StepsInput{Steps: steps, Index: 1, WaitingFor: v1alpha1.StepWaitDuration, Since: since},
			members: zones(0, 15, 30), wantIndex: 1, wantWait: v1alpha1.StepWaitDuration, wantHold: v1alpha1.ReasonStepPause},
		{name: "the pause over: past the last step there is no limit", in: StepsInput{Steps: steps, Index: 1, WaitingFor: v1alpha1.StepWaitDuration, Since: testNow.Add(-10 * time.Minute)},
			members: zones(0, 15, 30), wantIndex: 2, wantWait: v1alpha1.StepWaitPods, wantLimit: 45},
		{name: "nothing left to roll: done, whatever the pauses", in: StepsInput{Steps: steps}, members: zones(0, 0, 0),
			wantIndex: 3, wantWait: v1alpha1.StepWaitDone, wantLimit: -1},
		{name: "a share reached by pods Echelon did not roll (leaked) still pauses", in: StepsInput{Steps: steps}, members: zones(25, 30, 30),
			wantIndex: 0, wantWait: v1alpha1.StepWaitPromote, wantHold: v1alpha1.ReasonWaitingForPromote},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.in
			st, limit, hold := decideStep(Input{Now: testNow, Steps: &in}, tt.members)
			if st.Index != tt.wantIndex || st.WaitingFor != tt.wantWait || limit != tt.wantLimit || st.PromoteUsed != tt.wantUsed {
				t.Errorf("got index %d waiting %s limit %d promoteUsed %v, want %d %s %d %v", st.Index, st.WaitingFor, limit, st.PromoteUsed,
					tt.wantIndex, tt.wantWait, tt.wantLimit, tt.wantUsed)
			}
			switch {
			case hold == nil && tt.wantHold != "":
				t.Errorf("no hold, want %s", tt.wantHold)
			case hold != nil && hold.Reason != tt.wantHold:
				t.Errorf("hold %+v, want %q", *hold, tt.wantHold)
			case hold != nil && hold.Stop:
				t.Errorf("a step's hold stops what was released: %+v", *hold)
			}
			if tt.wantWait == v1alpha1.StepWaitDuration && !st.Until.Equal(since.Add(10*time.Minute)) {
				t.Errorf("Until = %s, want %s", st.Until, since.Add(10*time.Minute))
			}
		})
	}
}
