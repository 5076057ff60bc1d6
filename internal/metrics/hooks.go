package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// HookCalls counts the HTTP calls of hooks, each attempt apart, by hook
	// (beforePodRemoval, beforeMember, afterMember), reason (rollout,
	// rotation, downscale, eviction; "member" for member hooks) and result:
	// success (a 2xx answer), failure (another status) or error (no answer:
	// refused connection, timeout, an unreachable pod).
	HookCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_hook_calls_total",
		Help: "HTTP calls of hooks (each attempt), by hook, reason and result (success, failure, error).",
	}, []string{"hook", "reason", "result"})

	// HookCallDuration observes how long each hook call took to answer.
	HookCallDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "echelon_hook_call_duration_seconds",
		Help:    "Time a hook's endpoint took to answer one call, errors and timeouts included.",
		Buckets: prometheus.ExponentialBuckets(0.005, 2, 13), // 5ms .. ~20s
	}, []string{"hook", "reason"})
)

func init() {
	crmetrics.Registry.MustRegister(HookCalls, HookCallDuration)
}
