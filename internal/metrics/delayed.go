package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

const labelDelayed = "delayeddownscale"

var (
	// DelayedPrepared is the number of pods prepared for a pending downscale.
	DelayedPrepared = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_delayeddownscale_prepared_pods",
		Help: "Pods of a DelayedDownscale's target prepared for the pending downscale.",
	}, []string{labelNamespace, labelDelayed})

	// DelayedUntilEligible is how long until the next pod becomes eligible, at
	// the last reconcile; 0 when none waits.
	DelayedUntilEligible = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_delayeddownscale_seconds_until_eligible",
		Help: "Seconds until the next prepared pod of a DelayedDownscale becomes eligible, as of its last reconcile; 0 when none waits.",
	}, []string{labelNamespace, labelDelayed})

	// PodCalls counts calls to pods' prepare endpoint, by method and outcome.
	PodCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_delayeddownscale_pod_calls_total",
		Help: "Calls to pods' delayed-downscale endpoint, by method (POST prepares, DELETE cancels) and result (success or failure).",
	}, []string{labelNamespace, labelDelayed, "method", "result"})
)

func init() {
	crmetrics.Registry.MustRegister(DelayedPrepared, DelayedUntilEligible, PodCalls)
}

// SetDelayed sets the gauges of one DelayedDownscale.
func SetDelayed(namespace, name string, prepared int32, earliest *metav1.Time, now time.Time) {
	DelayedPrepared.WithLabelValues(namespace, name).Set(float64(prepared))
	until := 0.0
	if earliest != nil {
		until = max(0, earliest.Sub(now).Seconds())
	}
	DelayedUntilEligible.WithLabelValues(namespace, name).Set(until)
}

// CountPodCall counts one call to a pod.
func CountPodCall(namespace, name, method string, err error) {
	result := "success"
	if err != nil {
		result = "failure"
	}
	PodCalls.WithLabelValues(namespace, name, method, result).Inc()
}

// ForgetDelayed drops every series of a deleted DelayedDownscale.
func ForgetDelayed(namespace, name string) {
	labels := prometheus.Labels{labelNamespace: namespace, labelDelayed: name}
	DelayedPrepared.DeletePartialMatch(labels)
	DelayedUntilEligible.DeletePartialMatch(labels)
	PodCalls.DeletePartialMatch(labels)
}
