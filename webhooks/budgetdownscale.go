package webhooks

import (
	"context"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"

	"github.com/echelon-operator/echelon/internal/metrics"
)

// Reasons of the downscale-budget webhook's decisions (metric label), beside
// the shared ones and reasonNotDecrease, reasonDryRun, reasonDisruption.
const (
	// reasonNotMember: no RolloutGroup claims the StatefulSet (a stale
	// member label, or a /scale request, which the configuration cannot
	// narrow by label).
	reasonNotMember = "not-member"
	// reasonPrepareGuarded: a ScalingPolicy prepares the StatefulSet's
	// downscales; the prepare-downscale webhook judged and recorded this one.
	reasonPrepareGuarded = "prepare-guarded"
	// reasonForbidden: a ScalingPolicy forbids the downscale; the
	// no-downscale webhook refuses it, so there is nothing to record.
	reasonForbidden = "forbidden"
	// reasonRecorded: the budget allows the downscale and holds its intent.
	reasonRecorded = "recorded"
)

// BudgetDownscale is the validating webhook that makes every requester of a
// downscale of a RolloutGroup's member ask the group's disruption budget,
// as the ScalingPolicy controller and the prepare-downscale webhook do for
// the StatefulSets a ScalingPolicy guards: a plain `kubectl scale`, `kubectl
// edit`, an apply, an autoscaler. It judges a lower spec.replicas (through
// the StatefulSet or its /scale) on the API server, and records the
// downscale's intent (the ordinals it removes) when the budget allows it, so
// that a rollout, an eviction or another zone's downscale decided a moment
// later sees it; a dry run is judged and records nothing. It refuses,
// naming the group, the zone and why, when the budget does not allow it.
//
// It is a validating webhook, so it judges the replicas the API server will
// store, after every mutating webhook; the record is its side effect, and
// the API server's storing of the change is the act it fences: a downscale
// refused after this answer (a later webhook, a conflict) leaves an intent
// whose pods are still there, which counts only until the intent's bound
// (issue 29, item 1), as a crashed holder's would.
//
// Its reach is kept to the budgets' members: the configuration's
// objectSelector on v1alpha1.MemberLabel sends it the StatefulSet writes of
// members only, and a matchCondition only those that lower spec.replicas.
// A /scale request carries a Scale, which has no labels, so no
// objectSelector can match it: that rule is narrowed to downscales by a
// matchCondition, and the webhook answers at once, from its cache, for a
// StatefulSet no group claims (see markers.go and docs/webhooks.md).
type BudgetDownscale struct {
	Cluster Cluster
	// Budget judges and records the downscale on the API server.
	Budget DownscaleBudget
	// Identity tells the ScalingPolicy controller's own writes apart: it has
	// judged and recorded them itself.
	Identity Identity
}

func (h *BudgetDownscale) decide(ctx context.Context, req *admissionv1.AdmissionRequest) verdict {
	change, policies, v, judged := readDownscale(ctx, req, h.Cluster, metrics.WebhookDownscaleBudget, statefulSetsOnly)
	if !judged {
		return v
	}
	switch {
	case h.Identity.ownScalingPolicyWriteOf(req, policies):
		return allow(reasonOperatorOwn)
	case forbiddingPolicy(policies) != nil:
		return allow(reasonForbidden)
	case preparingPolicy(policies) != nil:
		return allow(reasonPrepareGuarded)
	}
	sts, v := requestStatefulSet(ctx, h.Cluster, req, change)
	if sts == nil {
		return v
	}
	group, err := h.Cluster.DownscaleGroup(ctx, sts)
	if err != nil {
		return failed(reasonLookupFailed, http.StatusInternalServerError, fmt.Errorf("downscale of %s: find its RolloutGroup: %w", change, err))
	}
	if group == nil {
		return allow(reasonNotMember)
	}
	if v, closed := askBudget(ctx, h.Budget, req, sts, change, group.Name, 0, isDryRun(req)); closed {
		return v
	}
	if isDryRun(req) {
		return allow(reasonDryRun)
	}
	return allow(reasonRecorded)
}
