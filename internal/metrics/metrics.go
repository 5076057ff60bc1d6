// Package metrics defines Echelon's Prometheus metrics. They are registered with
// controller-runtime's registry, so /metrics serves them next to the runtime's own.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Label names: the same name for the same thing in every metric. Reconcile
// errors are controller-runtime's controller_runtime_reconcile_errors_total
// (label controller="rolloutgroup"); Echelon does not count them twice.
const (
	labelNamespace    = "namespace"
	labelGroup        = "rolloutgroup"
	labelStatefulSet  = "statefulset"
	labelPhase        = "phase"
	labelReplicaState = "state"
)

// AllPhases lists every RolloutGroup phase, so the phase gauge has one series each.
var AllPhases = []v1alpha1.RolloutPhase{
	v1alpha1.PhaseComplete, v1alpha1.PhaseProgressing, v1alpha1.PhaseWaiting, v1alpha1.PhasePaused,
	v1alpha1.PhaseBlocked, v1alpha1.PhaseStalled, v1alpha1.PhaseAnalyzing, v1alpha1.PhaseFailed,
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

	// LastProgress is when a group's rollout last made progress, as a Unix time:
	// alert on time() minus it while the phase is Progressing. Absent until the
	// group's first rollout.
	LastProgress = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_rolloutgroup_last_progress_timestamp_seconds",
		Help: "Unix time of the last progress (a pod deleted, updated or becoming available, a resume or unblock) of a RolloutGroup's current or last rollout.",
	}, []string{labelNamespace, labelGroup})

	// PlansRevised counts batches whose live read of the member's pods changed
	// what the cache-based plan would have deleted: evidence of a stale cache
	// (a new leader, pods deleted by someone else, a slow watch).
	PlansRevised = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_rolloutgroup_plans_revised_total",
		Help: "Deletion batches changed by the live read of the member's pods, because the cache was behind the API server.",
	}, []string{labelNamespace, labelGroup})
)

func init() {
	crmetrics.Registry.MustRegister(GroupPhase, GroupReplicas, PodsRolled, RolloutDuration, Stalls, LastProgress, PlansRevised)
}

// SetGroupPhase sets the phase gauge of one group.
func SetGroupPhase(namespace, name string, phase v1alpha1.RolloutPhase) {
	setPhase(GroupPhase, namespace, name, AllPhases, phase)
}

// setPhase sets a phase gauge: 1 for the current phase, 0 for each other, so
// that every phase has a series and a change shows without a gap.
func setPhase[P ~string](gauge *prometheus.GaugeVec, namespace, name string, all []P, current P) {
	for _, p := range all {
		v := 0.0
		if p == current {
			v = 1
		}
		gauge.WithLabelValues(namespace, name, string(p)).Set(v)
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
	LastProgress.DeletePartialMatch(labels)
	PlansRevised.DeletePartialMatch(labels)
	forgetAnalysis(labels)
	forgetSteps(labels)
	forgetRotation(labels)
	forgetResize(labels)
	forgetNotifications(labels)
}
