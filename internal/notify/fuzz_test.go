package notify

import (
	"testing"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// statusFrom picks one status of a rollout's life from b.
func statusFrom(b byte) v1alpha1.RolloutGroupStatus {
	fns := [][]func(*v1alpha1.RolloutGroupStatus){
		{rolling("a")}, {rolling("b")}, {rolling("c")}, {completed}, {rolling("a"), gateFailed},
		{rolling("a"), rollingBack}, {rolledBack}, {rolling("a"), phase(v1alpha1.PhasePaused)},
		{rolling("b"), phase(v1alpha1.PhaseStalled)}, {rolling("a"), atStep(0, v1alpha1.StepWaitPromote)},
		{rolling("b"), atStep(1, v1alpha1.StepWaitDuration)}, {rolling("c"), withID("d2")}, {completed, withID("d2")},
	}
	return status(fns[int(b)%len(fns)]...)
}

// Whatever statuses the notifier sees, in whatever order: sequences grow by
// one an event; seeing the same status again derives nothing; the events
// kept are bounded; Complete is told at most once per rollout (a run of
// statuses with one rollout key); a callback's
// id is the one its rollout and outcome give.
func FuzzDerive(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3})
	f.Add([]byte{0, 4, 11, 12})
	f.Add([]byte{0, 5, 6, 0, 9, 10, 3})
	f.Fuzz(func(t *testing.T, seq []byte) {
		var ns v1alpha1.NotificationStatus
		completes := map[string]int{}
		for i, b := range seq {
			st := statusFrom(b)
			now := testTime.Add(time.Duration(i) * time.Second)
			next := Derive(ns, st, "uid", true, now)
			if next.Rollout != ns.Rollout {
				clear(completes)
			}
			again := Derive(next, st, "uid", true, now)
			if again.Sequence != next.Sequence {
				t.Fatalf("the same status derived %d more events", again.Sequence-next.Sequence)
			}
			if added := int64(len(next.Events) - len(ns.Events)); len(next.Events) > MaxEvents || (len(next.Events) < MaxEvents && added != next.Sequence-ns.Sequence) {
				t.Fatalf("%d events kept, %d added, sequence %d to %d", len(next.Events), added, ns.Sequence, next.Sequence)
			}
			for j, ev := range next.Events {
				if j > 0 && ev.Sequence != next.Events[j-1].Sequence+1 {
					t.Fatalf("sequences %d then %d", next.Events[j-1].Sequence, ev.Sequence)
				}
			}
			for _, ev := range next.Events[min(len(ns.Events), len(next.Events)):] {
				if ev.Type == v1alpha1.NotificationComplete {
					completes[ev.Rollout]++
					if completes[ev.Rollout] > 1 {
						t.Fatalf("Complete told twice for rollout %s", ev.Rollout)
					}
				}
			}
			if len(next.Callbacks) > MaxCallbacks {
				t.Fatalf("%d callbacks queued, bound %d", len(next.Callbacks), MaxCallbacks)
			}
			if n, o := len(next.Callbacks), len(ns.Callbacks); n < o && next.CallbacksDropped == ns.CallbacksDropped {
				t.Fatalf("callbacks went from %d to %d with none delivered and none counted dropped", o, n)
			}
			for _, c := range next.Callbacks {
				if c.DeliveryID != CallbackID("uid", c.Rollout, c.Outcome) {
					t.Fatalf("callback id %s", c.DeliveryID)
				}
			}
			ns = next
			if len(ns.Events) >= MaxEvents {
				ns.Events = nil // as if every receiver had them
			}
		}
	})
}
