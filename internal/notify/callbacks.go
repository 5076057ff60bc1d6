package notify

import (
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// MaxCallbacks bounds status.notifications.callbacks: a rollout's outcome
// joins the queue behind the callbacks still retried, and past this many
// the oldest is dropped (counted in callbacksDropped).
const MaxCallbacks = 16

// EnqueueCallback puts the callback c behind the ones ns holds: a callback
// still being retried is never replaced by a later rollout's, so that a
// deploy system hears of a Failed rollout even when a retry completed
// before the first callback got through. Delivered callbacks are pruned
// first; past MaxCallbacks the oldest is dropped and counted. A callback
// with the delivery id of one queued is not queued twice.
func EnqueueCallback(ns *v1alpha1.NotificationStatus, c v1alpha1.CallbackStatus) {
	for _, q := range ns.Callbacks {
		if q.DeliveryID == c.DeliveryID {
			return
		}
	}
	ns.Callbacks = append(pending(ns.Callbacks), c)
	for len(ns.Callbacks) > MaxCallbacks {
		ns.Callbacks = ns.Callbacks[1:]
		ns.CallbacksDropped++
	}
}

// PendingCallback is the index in ns.Callbacks of the callback to make
// next (the oldest not delivered), or -1 when none waits.
func PendingCallback(ns v1alpha1.NotificationStatus) int {
	for i, c := range ns.Callbacks {
		if !c.Delivered {
			return i
		}
	}
	return -1
}

// CallbackDelivered is c once its endpoint accepted it.
func CallbackDelivered(c v1alpha1.CallbackStatus) v1alpha1.CallbackStatus {
	c.Delivered, c.Attempts, c.NextAttemptTime, c.LastError, c.Reason = true, 0, nil, "", ""
	return c
}

// CallbackFailed is c once an attempt failed with why; at MaxAttempts the
// callback is given up: Delivered with the error kept, and the next one in
// the queue is due.
func CallbackFailed(c v1alpha1.CallbackStatus, reason, why string, now time.Time) (_ v1alpha1.CallbackStatus, dropped bool) {
	c.Attempts++
	c.LastError, c.Reason = truncate(why, maxMessage), reason
	if c.Attempts >= MaxAttempts {
		c.Delivered, c.NextAttemptTime, c.Reason = true, nil, v1alpha1.ReasonDeliveryDropped
		return c, true
	}
	c.NextAttemptTime = ptrTime(now.Add(Backoff(c.Attempts)))
	return c, false
}

// PruneCallbacks removes the delivered callbacks; when none is pending,
// the last one made stays, to show how it went.
func PruneCallbacks(ns *v1alpha1.NotificationStatus) {
	out := pending(ns.Callbacks)
	if len(out) == 0 && len(ns.Callbacks) > 0 {
		out = ns.Callbacks[len(ns.Callbacks)-1:]
	}
	ns.Callbacks = out
}

// pending are the callbacks of cs not delivered, in order.
func pending(cs []v1alpha1.CallbackStatus) []v1alpha1.CallbackStatus {
	var out []v1alpha1.CallbackStatus
	for _, c := range cs {
		if !c.Delivered {
			out = append(out, c)
		}
	}
	return out
}
