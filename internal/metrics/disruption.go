package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Values of the disruption metrics' labels.
const (
	// WebhookEviction is the eviction webhook's name, as in its path.
	WebhookEviction = "eviction"

	// Requesters of a disruption decision.
	RequesterRollout   = "rollout"
	RequesterDownscale = "downscale"
	RequesterEviction  = "eviction"
)

var (
	// Evictions counts eviction requests the eviction webhook judged, by
	// decision (allowed, denied, error) and reason: a disruption.Code*
	// constant for a refusal, "allowed", "dry-run", "not-covered" for a pod
	// no budget covers, or the error's short name.
	Evictions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_evictions_total",
		Help: "Evictions judged by Echelon's eviction webhook, by decision (allowed, denied, error) and reason.",
	}, []string{"decision", "reason"})

	// DisruptionDecisions counts the decisions disruption.Decide made for
	// each requester (rollout, downscale, eviction) that led to an action or
	// a refusal, by decision and code ("" when allowed).
	DisruptionDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_disruption_decisions_total",
		Help: "Disruption decisions of a group's one budget, by requester (rollout, downscale, eviction), decision (allowed, denied) and code.",
	}, []string{"requester", "decision", "code"})

	// DisruptionHoldConflicts counts hold writes that lost an optimistic
	// lock to another decision recorded meanwhile; the decision was made
	// again on what that one wrote.
	DisruptionHoldConflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_disruption_hold_conflicts_total",
		Help: "Writes of a group's disruption hold that met a concurrent decision (Conflict) and were decided again, by requester.",
	}, []string{"requester"})
	// StaleActs counts the passes of a group whose act met a view the API
	// server had moved past (a pod already gone or replaced, a partition
	// write on a StatefulSet whose spec changed): resolved by planning
	// again, so logged at debug level only.
	StaleActs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "echelon_rollout_stale_acts_total",
		Help: "Rollout passes whose deletions or partition writes met a view the API server had moved past, planned again within a second.",
	})
)

func init() {
	crmetrics.Registry.MustRegister(Evictions, DisruptionDecisions, DisruptionHoldConflicts, StaleActs)
}
