package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Values of the webhook metrics' labels.
const (
	// Webhook names, as in their paths (/admission/<name>).
	WebhookNoDownscale      = "no-downscale"
	WebhookPrepareDownscale = "prepare-downscale"
	WebhookValidate         = "validate"
	WebhookDownscaleBudget  = "downscale-budget"
	WebhookHoldPartition    = "hold-partition"
	// The paths compat mode answers for the Grafana rollout-operator's
	// webhook configurations, where they are not Echelon's own:
	// /admission/pod-eviction judges as the eviction webhook does,
	// /admission/zpdb-validation validates ZoneAwarePodDisruptionBudgets.
	// (no-downscale and prepare-downscale have the same paths in both.)
	WebhookGrafanaPodEviction    = "pod-eviction"
	WebhookGrafanaZPDBValidation = "zpdb-validation"

	// Decisions: allowed and denied are answers about the object; error is a
	// request the webhook could not judge (undecodable, a failed lookup, a
	// panic), answered with an error status.
	DecisionAllowed = "allowed"
	DecisionDenied  = "denied"
	DecisionError   = "error"

	// Pod calls of the prepare-downscale webhook.
	PodCallPrepare = "prepare"
	PodCallCancel  = "cancel"

	// Outcomes of a downscale the prepare-downscale webhook admitted:
	// stored, or not stored by its deadline and its pods told to cancel.
	PendingDownscaleConfirmed = "confirmed"
	PendingDownscaleCancelled = "cancelled"
)

var (
	// WebhookRequests counts admission requests by webhook, decision and the
	// reason of the decision (a short fixed word such as "not-a-decrease",
	// "downscale-not-allowed", "prepare-failed", "undecodable", "panic").
	WebhookRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_webhook_requests_total",
		Help: "Admission requests answered by Echelon's webhooks, by webhook, decision (allowed, denied, error) and reason.",
	}, []string{"webhook", "decision", "reason"})

	// WebhookDuration observes how long a webhook took to answer, pod calls
	// included: it has to stay under the webhook's timeoutSeconds.
	WebhookDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "echelon_webhook_request_duration_seconds",
		Help: "Time Echelon's webhooks take to answer an admission request, pod calls included.",
		// 0.5 ms .. ~16 s: a lookup in the cache at the bottom, a
		// prepare-downscale call near the 10 s webhook timeout at the top.
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"webhook"})

	// WebhookPodCallDuration observes each call of the prepare-downscale
	// webhook to a pod, until its answer's headers or its failure.
	WebhookPodCallDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "echelon_webhook_pod_call_duration_seconds",
		Help:    "Duration of the prepare-downscale webhook's calls to pods: prepare (POST) and cancel (DELETE).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 15), // 1 ms .. ~16 s
	}, []string{"call"})

	// WebhookPodCallFailures counts pod calls that did not succeed: an error,
	// a timeout or an answer that is not 2xx (409 is a success for cancel).
	WebhookPodCallFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_webhook_pod_call_failures_total",
		Help: "Failed calls of the prepare-downscale webhook to pods: prepare (POST) and cancel (DELETE).",
	}, []string{"call"})

	// WebhookPendingDownscales counts the downscales the prepare-downscale
	// webhook admitted, once settled, by outcome.
	WebhookPendingDownscales = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_webhook_pending_downscales_total",
		Help: "Downscales the prepare-downscale webhook admitted, once settled: confirmed (stored) or cancelled (not stored by the deadline; the prepared pods told to cancel).",
	}, []string{"outcome"})

	// WebhookCertificateExpiry is the NotAfter of the serving certificate the
	// webhook server presents, as a Unix time.
	WebhookCertificateExpiry = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "echelon_webhook_certificate_expiry_timestamp_seconds",
		Help: "Unix time at which the webhook server's serving certificate expires (its NotAfter).",
	})

	// WebhookCertificateRotations counts changes of the serving certificate
	// the webhook server presents.
	WebhookCertificateRotations = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "echelon_webhook_certificate_rotations_total",
		Help: "Times the webhook server started presenting a new serving certificate.",
	})
)

func init() {
	crmetrics.Registry.MustRegister(WebhookRequests, WebhookDuration, WebhookPodCallDuration, WebhookPodCallFailures,
		WebhookPendingDownscales, WebhookCertificateExpiry, WebhookCertificateRotations)
}

// ObserveWebhook records one answered admission request.
func ObserveWebhook(webhook, decision, reason string, took time.Duration) {
	WebhookRequests.WithLabelValues(webhook, decision, reason).Inc()
	WebhookDuration.WithLabelValues(webhook).Observe(took.Seconds())
}

// ObservePodCall records one pod call of the prepare-downscale webhook.
func ObservePodCall(call string, took time.Duration, failed bool) {
	WebhookPodCallDuration.WithLabelValues(call).Observe(took.Seconds())
	if failed {
		WebhookPodCallFailures.WithLabelValues(call).Inc()
	}
}

// SetWebhookCertificate records the serving certificate now presented; rotated
// says it replaced another.
func SetWebhookCertificate(notAfter time.Time, rotated bool) {
	WebhookCertificateExpiry.Set(float64(notAfter.Unix()))
	if rotated {
		WebhookCertificateRotations.Inc()
	}
}
