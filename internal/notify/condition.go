package notify

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Condition is the NotificationsDelivered condition ns gives: False for the
// first receiver (then the callback) whose last attempt failed, naming it
// and the field to fix; True otherwise.
func Condition(ns v1alpha1.NotificationStatus) metav1.Condition {
	for _, r := range ns.Receivers {
		if r.LastError != "" {
			return metav1.Condition{
				Type: v1alpha1.ConditionNotificationsDelivered, Status: metav1.ConditionFalse, Reason: reasonOr(r.Reason),
				Message: fmt.Sprintf("receiver %s: %s%s", r.Name, r.LastError, retrying(r.Attempts, r.NextAttemptTime)),
			}
		}
	}
	// The callback being retried, or else the last one made, which keeps
	// the error of a callback given up.
	i := PendingCallback(ns)
	if i < 0 {
		i = len(ns.Callbacks) - 1
	}
	if i >= 0 && ns.Callbacks[i].LastError != "" {
		c := ns.Callbacks[i]
		return metav1.Condition{
			Type: v1alpha1.ConditionNotificationsDelivered, Status: metav1.ConditionFalse, Reason: reasonOr(c.Reason),
			Message: fmt.Sprintf("callback of rollout %s: %s%s", c.Rollout, c.LastError, retrying(c.Attempts, c.NextAttemptTime)),
		}
	}
	return metav1.Condition{
		Type: v1alpha1.ConditionNotificationsDelivered, Status: metav1.ConditionTrue, Reason: v1alpha1.ReasonDelivered,
		Message: "every notification due was delivered",
	}
}

func reasonOr(r string) string {
	if r == "" {
		return v1alpha1.ReasonDeliveryFailing
	}
	return r
}

func retrying(attempts int32, next *metav1.Time) string {
	if next == nil {
		return " (given up after the last retry)"
	}
	return fmt.Sprintf(" (attempt %d of %d failed; next at %s)", attempts, MaxAttempts, next.UTC().Format(time.RFC3339))
}
