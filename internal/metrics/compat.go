package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// GrafanaCompatKinds are the kinds compat mode keeps, so that its gauge has
// one series each per namespace (0 when none).
var GrafanaCompatKinds = []string{"RolloutGroup", "ScalingPolicy", "DelayedDownscale", "ZoneDisruptionBudget"}

var (
	// GrafanaCompatObjects counts, per namespace and kind, the resources
	// compat mode keeps from the Grafana rollout-operator's keys (labelled
	// echelon.dev/grafana-compat): their rollouts, scalings and budgets are
	// the actions that come from Grafana annotations.
	GrafanaCompatObjects = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_grafana_compat_objects",
		Help: "Resources kept by --grafana-compat from the Grafana rollout-operator's labels, annotations and ZoneAwarePodDisruptionBudgets, by namespace and kind.",
	}, []string{labelNamespace, "kind"})

	// GrafanaCompatZPDBReadable is 1 while compat mode can read the
	// ZoneAwarePodDisruptionBudgets, 0 when their CRD is not installed or
	// the operator may not list them: then none is translated, and the
	// evictions they guarded are judged by nothing of Echelon's.
	//
	// A vector without labels, so that the series is absent until compat
	// mode sets it: an install without compat mode exports no 0 to alert on.
	GrafanaCompatZPDBReadable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_grafana_compat_zpdbs_readable",
		Help: "1 while --grafana-compat can read ZoneAwarePodDisruptionBudgets; 0 when their CRD is missing or listing them is forbidden.",
	}, nil)
)

// SetGrafanaCompatZPDBReadable sets echelon_grafana_compat_zpdbs_readable.
func SetGrafanaCompatZPDBReadable(readable bool) {
	v := 0.0
	if readable {
		v = 1
	}
	GrafanaCompatZPDBReadable.WithLabelValues().Set(v)
}

func init() {
	crmetrics.Registry.MustRegister(GrafanaCompatObjects, GrafanaCompatZPDBReadable)
}
