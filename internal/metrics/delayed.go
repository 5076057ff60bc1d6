package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

const labelDelayed = "delayeddownscale"

// AllDelayedPhases lists every DelayedDownscale phase, so the phase gauge has one series each.
var AllDelayedPhases = []v1alpha1.DelayedDownscalePhase{
	v1alpha1.DelayedPhaseIdle, v1alpha1.DelayedPhasePreparing, v1alpha1.DelayedPhaseWaiting,
	v1alpha1.DelayedPhaseScalingDown, v1alpha1.DelayedPhaseBlocked,
}

var (
	// DelayedPhase is 1 for the phase a DelayedDownscale is in and 0 for the others.
	DelayedPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_delayeddownscale_phase",
		Help: "Phase of a DelayedDownscale: 1 for the current phase, 0 for the others.",
	}, []string{labelNamespace, labelDelayed, labelPhase})

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
	crmetrics.Registry.MustRegister(DelayedPhase, DelayedPrepared, DelayedUntilEligible, PodCalls)
}

// SetDelayed sets the gauges of one DelayedDownscale.
func SetDelayed(namespace, name string, phase v1alpha1.DelayedDownscalePhase, prepared int32, earliest *metav1.Time, now time.Time) {
	setPhase(DelayedPhase, namespace, name, AllDelayedPhases, phase)
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
	DelayedPhase.DeletePartialMatch(labels)
	DelayedPrepared.DeletePartialMatch(labels)
	DelayedUntilEligible.DeletePartialMatch(labels)
	PodCalls.DeletePartialMatch(labels)
}
