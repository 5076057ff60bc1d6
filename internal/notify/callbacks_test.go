package notify

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func queued(rollout string, out v1alpha1.RolloutOutcome) v1alpha1.CallbackStatus {
	return v1alpha1.CallbackStatus{Rollout: rollout, Outcome: out, DeliveryID: CallbackID("uid", rollout, out)}
}

// rollouts lists the queue as rollout:outcome, delivered ones marked with a
// "+".
func rollouts(cs []v1alpha1.CallbackStatus) []string {
	var out []string
	for _, c := range cs {
		s := c.Rollout + ":" + string(c.Outcome)
		if c.Delivered {
			s += "+"
		}
		out = append(out, s)
	}
	return out
}

// The callback queue: a callback still retried is never replaced; the
// delivered ones are pruned but the last; past MaxCallbacks the oldest is
// dropped and counted; the same callback is not queued twice.
func TestEnqueueCallback(t *testing.T) {
	retried := queued("d1@1", v1alpha1.OutcomeFailed)
	retried.Attempts, retried.LastError = 3, "HTTP 503"
	delivered := func(c v1alpha1.CallbackStatus) v1alpha1.CallbackStatus { return CallbackDelivered(c) }
	full := make([]v1alpha1.CallbackStatus, 0, MaxCallbacks)
	for i := range MaxCallbacks {
		full = append(full, queued(fmt.Sprintf("r%d@%d", i, i), v1alpha1.OutcomeFailed))
	}
	tests := []struct {
		name        string
		queue       []v1alpha1.CallbackStatus
		add         v1alpha1.CallbackStatus
		want        []string
		wantDropped int32
	}{{
		name: "into an empty queue",
		add:  queued("d1@1", v1alpha1.OutcomeComplete),
		want: []string{"d1@1:Complete"},
	}, {
		name:  "a Complete behind a Failed still retried keeps both, in order",
		queue: []v1alpha1.CallbackStatus{retried},
		add:   queued("d2@2", v1alpha1.OutcomeComplete),
		want:  []string{"d1@1:Failed", "d2@2:Complete"},
	}, {
		name:  "a delivered callback makes room",
		queue: []v1alpha1.CallbackStatus{delivered(queued("d1@1", v1alpha1.OutcomeFailed))},
		add:   queued("d2@2", v1alpha1.OutcomeComplete),
		want:  []string{"d2@2:Complete"},
	}, {
		name: "delivered ones before a pending one go, the pending stays",
		queue: []v1alpha1.CallbackStatus{delivered(queued("d0@0", v1alpha1.OutcomeComplete)), delivered(queued("d1@1", v1alpha1.OutcomeFailed)),
			queued("d2@2", v1alpha1.OutcomeFailed)},
		add:  queued("d3@3", v1alpha1.OutcomeComplete),
		want: []string{"d2@2:Failed", "d3@3:Complete"},
	}, {
		name:  "the same rollout and outcome again is not queued twice",
		queue: []v1alpha1.CallbackStatus{retried},
		add:   queued("d1@1", v1alpha1.OutcomeFailed),
		want:  []string{"d1@1:Failed"},
	}, {
		name:  "a Failed rollout retried under the same id to Complete queues both outcomes",
		queue: []v1alpha1.CallbackStatus{retried},
		add:   queued("d1@1", v1alpha1.OutcomeComplete),
		want:  []string{"d1@1:Failed", "d1@1:Complete"},
	}, {
		name:        "past the bound the oldest is dropped and counted",
		queue:       full,
		add:         queued("new@99", v1alpha1.OutcomeComplete),
		want:        append(rollouts(full[1:]), "new@99:Complete"),
		wantDropped: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := v1alpha1.NotificationStatus{Callbacks: slices.Clone(tt.queue)}
			EnqueueCallback(&ns, tt.add)
			if got := rollouts(ns.Callbacks); !slices.Equal(got, tt.want) {
				t.Errorf("queue %v, want %v", got, tt.want)
			}
			if ns.CallbacksDropped != tt.wantDropped {
				t.Errorf("dropped %d, want %d", ns.CallbacksDropped, tt.wantDropped)
			}
			if len(ns.Callbacks) > MaxCallbacks {
				t.Errorf("%d queued, bound %d", len(ns.Callbacks), MaxCallbacks)
			}
		})
	}
}

// A Failed rollout whose callback fails, then a new rolloutId that
// completes: Derive queues both, and delivering the queue in order (the
// state read back from status between passes, as after a restart) makes
// the Failed call first, retried until accepted, then the Complete one,
// each with its own delivery and rollout id. On a queue of one callback,
// the Complete replaced the Failed and the deploy system never heard of it.
func TestCallbackQueueInOrder(t *testing.T) {
	seen := []v1alpha1.RolloutGroupStatus{
		status(rolling("a")), status(rolling("a"), gateFailed),
		status(rolling("a"), withID("d2")), status(completed, withID("d2")),
	}
	var ns v1alpha1.NotificationStatus
	var calls []string
	now := testTime
	endpointUp := false
	send := func() {
		// One pass of the notifier over the queue, from status.
		for {
			i := PendingCallback(ns)
			if i < 0 || !Due(ns.Callbacks[i].NextAttemptTime, now) {
				return
			}
			c := ns.Callbacks[i]
			if !endpointUp {
				ns.Callbacks[i], _ = CallbackFailed(c, v1alpha1.ReasonDeliveryFailing, "HTTP 503", now)
				return
			}
			calls = append(calls, fmt.Sprintf("%s/%s/%s", c.RolloutID, c.Outcome, c.DeliveryID[:8]))
			ns.Callbacks[i] = CallbackDelivered(c)
		}
	}
	for _, st := range seen {
		ns = Derive(ns, st, "uid", true, now)
		ns = *ns.DeepCopy() // as read back after a restart
		send()
		now = now.Add(time.Minute)
	}
	if got := rollouts(ns.Callbacks); len(got) != 2 || got[0] != "d1@"+fmt.Sprint(t0.Unix())+":Failed" {
		t.Fatalf("queue %v, want the Failed callback of d1 then the Complete one of d2", got)
	}
	endpointUp = true
	now = now.Add(MaxBackoff)
	send()
	fail := CallbackID("uid", "d1@"+fmt.Sprint(t0.Unix()), v1alpha1.OutcomeFailed)
	done := CallbackID("uid", "d2@"+fmt.Sprint(t0.Unix()), v1alpha1.OutcomeComplete)
	want := []string{"d1/Failed/" + fail[:8], "d2/Complete/" + done[:8]}
	if !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
	PruneCallbacks(&ns)
	if got := rollouts(ns.Callbacks); !slices.Equal(got, []string{"d2@" + fmt.Sprint(t0.Unix()) + ":Complete+"}) {
		t.Errorf("after delivery the queue is %v, want the last callback only", got)
	}
	if c := Condition(ns); c.Status != metav1.ConditionTrue {
		t.Errorf("condition %s %s", c.Status, c.Message)
	}
}
