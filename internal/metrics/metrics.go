// Package metrics defines Echelon's Prometheus metrics. They are registered with
// controller-runtime's registry, so /metrics serves them next to the runtime's own.
package metrics

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

const (
	labelNamespace    = "namespace"
	labelGroup        = "rolloutgroup"
	labelStatefulSet  = "statefulset"
	labelPhase        = "phase"
	labelController   = "controller"
	labelReplicaState = "state"
)

// AllPhases lists every RolloutGroup phase, so the phase gauge has one series each.
var AllPhases = []v1alpha1.RolloutPhase{
	v1alpha1.PhaseComplete, v1alpha1.PhaseProgressing, v1alpha1.PhasePaused,
	v1alpha1.PhaseBlocked, v1alpha1.PhaseStalled,
}

var (
	// GroupPhase is 1 for the phase a RolloutGroup is in and 0 for the others.
	GroupPhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_rolloutgroup_phase",
		Help: "Phase of a RolloutGroup: 1 for the current phase, 0 for the others.",
	}, []string{labelNamespace, labelGroup, labelPhase})

	// GroupReplicas counts a group's pods: desired, updated and available.
	GroupReplicas = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_rolloutgroup_replicas",
		Help: "Pods of a RolloutGroup by state: desired, updated (on the update revision) and available.",
	}, []string{labelNamespace, labelGroup, labelReplicaState})

	// PodsRolled counts pods deleted (or evicted) so that they come back updated.
	PodsRolled = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_rolloutgroup_pods_rolled_total",
		Help: "Pods deleted or evicted by Echelon so that they are recreated on the update revision.",
	}, []string{labelNamespace, labelGroup, labelStatefulSet})

	// RolloutDuration observes the time from the start of a rollout to Complete.
	RolloutDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "echelon_rolloutgroup_rollout_duration_seconds",
		Help:    "Time from the start of a rollout (first outdated pod seen) to Complete.",
		Buckets: prometheus.ExponentialBuckets(5, 2, 14), // 5s .. ~11h
	}, []string{labelNamespace, labelGroup})

	// Stalls counts rollouts that went past their progress deadline.
	Stalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_rolloutgroup_stalls_total",
		Help: "Times a RolloutGroup's rollout made no progress within spec.progressDeadline.",
	}, []string{labelNamespace, labelGroup})

	// ReconcileErrors counts failed reconciles by controller and object.
	ReconcileErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_reconcile_errors_total",
		Help: "Reconciles that returned an error, by controller and object.",
	}, []string{labelController, labelNamespace, "name"})

	// Progress exports the time since each group's last progress.
	Progress = newProgressCollector()
)

func init() {
	crmetrics.Registry.MustRegister(GroupPhase, GroupReplicas, PodsRolled, RolloutDuration, Stalls, ReconcileErrors, Progress)
}

// SetGroupPhase sets the phase gauge of one group.
func SetGroupPhase(namespace, name string, phase v1alpha1.RolloutPhase) {
	for _, p := range AllPhases {
		v := 0.0
		if p == phase {
			v = 1
		}
		GroupPhase.WithLabelValues(namespace, name, string(p)).Set(v)
	}
}

// SetGroupReplicas sets the replica gauges of one group.
func SetGroupReplicas(namespace, name string, desired, updated, available int32) {
	GroupReplicas.WithLabelValues(namespace, name, "desired").Set(float64(desired))
	GroupReplicas.WithLabelValues(namespace, name, "updated").Set(float64(updated))
	GroupReplicas.WithLabelValues(namespace, name, "available").Set(float64(available))
}

// ForgetGroup drops every series of a deleted group.
func ForgetGroup(namespace, name string) {
	labels := prometheus.Labels{labelNamespace: namespace, labelGroup: name}
	GroupPhase.DeletePartialMatch(labels)
	GroupReplicas.DeletePartialMatch(labels)
	PodsRolled.DeletePartialMatch(labels)
	RolloutDuration.DeletePartialMatch(labels)
	Stalls.DeletePartialMatch(labels)
	ReconcileErrors.DeletePartialMatch(prometheus.Labels{labelNamespace: namespace, "name": name})
	Progress.Forget(namespace, name)
}

// progressCollector reports, at scrape time, how long ago each rolling group last
// made progress; a gauge set at reconcile time would freeze exactly when a
// rollout stalls, which is when the number matters.
type progressCollector struct {
	desc *prometheus.Desc
	mu   sync.Mutex
	last map[[2]string]time.Time
	now  func() time.Time
}

func newProgressCollector() *progressCollector {
	return &progressCollector{
		desc: prometheus.NewDesc("echelon_rolloutgroup_seconds_since_last_progress",
			"Seconds since a rolling RolloutGroup last made progress (a pod deleted, updated or becoming available); 0 when no rollout is under way.",
			[]string{labelNamespace, labelGroup}, nil),
		last: map[[2]string]time.Time{},
		now:  time.Now,
	}
}

// Set records the last progress of a group; a zero time means no rollout is under way.
func (c *progressCollector) Set(namespace, name string, lastProgress time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[[2]string{namespace, name}] = lastProgress
}

// Forget drops a group.
func (c *progressCollector) Forget(namespace, name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, [2]string{namespace, name})
}

func (c *progressCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *progressCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := c.now()
	for key, t := range c.last {
		v := 0.0
		if !t.IsZero() {
			v = max(0, now.Sub(t).Seconds())
		}
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, v, key[0], key[1])
	}
}
