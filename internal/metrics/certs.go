package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// WebhookCertExpiry is when the certificate this replica's webhook server
	// serves expires.
	WebhookCertExpiry = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "echelon_webhook_certificate_expiry_timestamp_seconds",
		Help: "NotAfter of the serving certificate this replica's webhook server presents, in Unix seconds.",
	})

	// WebhookCertRotations counts the times this replica's webhook server
	// started presenting a different certificate (the first one excluded).
	WebhookCertRotations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "echelon_webhook_certificate_rotations_total",
		Help: "Times this replica's webhook server switched to a new serving certificate without a restart.",
	})
)

func init() {
	crmetrics.Registry.MustRegister(WebhookCertExpiry, WebhookCertRotations)
}
