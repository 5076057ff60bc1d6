package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// AnalysisChecks counts the queries of a RolloutGroup's analysis checks by
	// result: success (the condition met), failure (not met) or error (no
	// result: Prometheus unreachable, bad PromQL, refused credentials, timeout).
	AnalysisChecks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_rolloutgroup_analysis_checks_total",
		Help: "Queries of RolloutGroup analysis checks, by check and result (success, failure or error).",
	}, []string{labelNamespace, labelGroup, "check", "result"})

	// AnalysisQueryDuration observes how long Prometheus took to answer.
	AnalysisQueryDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "echelon_rolloutgroup_analysis_query_duration_seconds",
		Help:    "Time Prometheus took to answer a RolloutGroup analysis query, errors and timeouts included.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 13), // 5ms .. ~20s
	}, []string{labelNamespace, labelGroup})

	// AnalysisHTTPDuration observes how long the endpoint of an http check
	// took to answer.
	AnalysisHTTPDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "echelon_rolloutgroup_analysis_http_duration_seconds",
		Help:    "Time the endpoint of a RolloutGroup http analysis check took to answer, errors and timeouts included.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 13), // 5ms .. ~20s
	}, []string{labelNamespace, labelGroup})

	// Rollbacks counts rollbacks started, by reason: AnalysisFailed,
	// AnalysisError, Aborted or ProgressDeadlineExceeded.
	Rollbacks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_rolloutgroup_rollbacks_total",
		Help: "Rollbacks a RolloutGroup started, by reason (AnalysisFailed, AnalysisError, Aborted, ProgressDeadlineExceeded).",
	}, []string{labelNamespace, labelGroup, "reason"})
)

func init() {
	crmetrics.Registry.MustRegister(AnalysisChecks, AnalysisQueryDuration, AnalysisHTTPDuration, Rollbacks)
}

// forgetAnalysis drops the analysis series of a deleted group.
func forgetAnalysis(labels prometheus.Labels) {
	AnalysisChecks.DeletePartialMatch(labels)
	AnalysisQueryDuration.DeletePartialMatch(labels)
	AnalysisHTTPDuration.DeletePartialMatch(labels)
	Rollbacks.DeletePartialMatch(labels)
}
