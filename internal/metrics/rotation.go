package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// PodsRestarted counts pods deleted (or evicted) with no new revision,
	// because spec.restartAt or echelon.dev/rotate asked for it.
	PodsRestarted = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_rolloutgroup_pods_restarted_total",
		Help: "Pods deleted or evicted by Echelon to be recreated with no template change (spec.restartAt, echelon.dev/rotate).",
	}, []string{labelNamespace, labelGroup, labelStatefulSet})

	// LeakedPods counts pods of an OnDelete member that reached the update
	// revision during a rollout although Echelon did not remove them.
	LeakedPods = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_rolloutgroup_leaked_pods_total",
		Help: "Pods that came back on a member's update revision during a rollout although Echelon did not remove them (node drain, eviction, crash).",
	}, []string{labelNamespace, labelGroup, labelStatefulSet})
)

func init() {
	crmetrics.Registry.MustRegister(PodsRestarted, LeakedPods)
}

// forgetRotation drops the rotation and leak series of a deleted group.
func forgetRotation(labels prometheus.Labels) {
	PodsRestarted.DeletePartialMatch(labels)
	LeakedPods.DeletePartialMatch(labels)
}
