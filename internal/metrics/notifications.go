package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Labels and values of the notification metrics. The completion callback
// is counted as receiver "spec.callback", a name no receiver can have.
const (
	labelReceiver = "receiver"
	labelEvent    = "event"
	labelResult   = "result"

	// ReceiverCallback is the receiver label of spec.callback.
	ReceiverCallback = "spec.callback"
	// NotificationDelivered: the receiver answered 2xx.
	NotificationDelivered = "delivered"
	// NotificationFailed: the attempt failed (Secret, URL, an error answer or
	// none in time); it is retried.
	NotificationFailed = "failed"
	// NotificationDropped: the last retry failed; the message is given up.
	NotificationDropped = "dropped"
)

var (
	// Notifications counts notification and callback attempts by result.
	Notifications = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_notifications_total",
		Help: "Attempts to send the notifications of a RolloutGroup, ScalingPolicy or DelayedDownscale (one per page of an event; label rolloutgroup holds the object's name) and a group's completion callbacks, by receiver (spec.callback for the callback), event (the outcome for the callback) and result: delivered, failed (retried) or dropped (given up after the last retry).",
	}, []string{labelNamespace, labelGroup, labelReceiver, labelEvent, labelResult})

	// NotificationDuration observes how long receivers take to answer.
	NotificationDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "echelon_notification_request_duration_seconds",
		Help:    "Time from sending a notification or callback request to its answer (or timeout), by receiver.",
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60},
	}, []string{labelNamespace, labelGroup, labelReceiver})
)

func init() {
	crmetrics.Registry.MustRegister(Notifications, NotificationDuration)
}

func forgetNotifications(labels prometheus.Labels) {
	Notifications.DeletePartialMatch(labels)
	NotificationDuration.DeletePartialMatch(labels)
}
