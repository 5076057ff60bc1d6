package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

const labelPolicy = "scalingpolicy"

// AllScalingPhases lists every ScalingPolicy phase, so the phase gauge has one series each.
var AllScalingPhases = []v1alpha1.ScalingPhase{
	v1alpha1.ScalingPhaseStable, v1alpha1.ScalingPhaseScalingUp, v1alpha1.ScalingPhaseScalingDown,
	v1alpha1.ScalingPhaseWaiting, v1alpha1.ScalingPhaseBlocked, v1alpha1.ScalingPhasePaused,
}

var (
	// PolicyReplicas is a policy's target replicas: desired and current.
	PolicyReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_scalingpolicy_replicas",
		Help: "Replicas of a ScalingPolicy's target: desired (what the policy scales to) and current (the target's spec.replicas).",
	}, []string{labelNamespace, labelPolicy, labelReplicaState})

	// PolicyPhase is 1 for the phase a ScalingPolicy is in and 0 for the others.
	PolicyPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_scalingpolicy_phase",
		Help: "Phase of a ScalingPolicy: 1 for the current phase, 0 for the others.",
	}, []string{labelNamespace, labelPolicy, labelPhase})

	// ScaleOperations counts the scale patches made, by direction.
	ScaleOperations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_scalingpolicy_scale_operations_total",
		Help: "Patches of a ScalingPolicy's target replicas, by direction (up or down).",
	}, []string{labelNamespace, labelPolicy, "direction"})

	// ScaleWait observes how long a scale waited (zone delay, members or leader
	// not Ready, a rollout) between becoming due and being made.
	ScaleWait = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "echelon_scalingpolicy_waiting_seconds",
		Help:    "Time a scale waited between becoming due and being made.",
		Buckets: prometheus.ExponentialBuckets(1, 4, 10), // 1s .. ~3d
	}, []string{labelNamespace, labelPolicy})
)

func init() {
	crmetrics.Registry.MustRegister(PolicyReplicas, PolicyPhase, ScaleOperations, ScaleWait)
}

// SetPolicy sets the phase and replica gauges of one ScalingPolicy.
func SetPolicy(namespace, name string, phase v1alpha1.ScalingPhase, desired *int32, current int32) {
	setPhase(PolicyPhase, namespace, name, AllScalingPhases, phase)
	PolicyReplicas.WithLabelValues(namespace, name, "current").Set(float64(current))
	if desired != nil {
		PolicyReplicas.WithLabelValues(namespace, name, "desired").Set(float64(*desired))
	}
}

// ForgetPolicy drops every series of a deleted ScalingPolicy.
func ForgetPolicy(namespace, name string) {
	labels := prometheus.Labels{labelNamespace: namespace, labelPolicy: name}
	PolicyReplicas.DeletePartialMatch(labels)
	PolicyPhase.DeletePartialMatch(labels)
	ScaleOperations.DeletePartialMatch(labels)
	ScaleWait.DeletePartialMatch(labels)
}
