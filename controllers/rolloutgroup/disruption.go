package rolloutgroup

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// acquireBudget records the hold of the plan's batch in the group's
// status.disruption before any pod of it is deleted, when the plan asks for
// it: budget.Acquire reads the group from the API server, decides again on
// the hold it holds (another decision may have recorded one that the cache
// does not show yet: a ScalingPolicy's downscale, an admitted eviction) with
// the members the plan was made on, and writes the hold with an optimistic
// lock. A refusal turns the plan into a wait. It returns the plan and the
// hold the API server now holds, to serve as written status.
//
// A plan whose hold needs no renewal (the rollout's own, with more than half
// its lease left) is not read again: no other zone can have taken the budget
// while that hold stands, since every decision that would is made on the
// API server's copy of it.
func (r *Reconciler) acquireBudget(ctx context.Context, rg *v1alpha1.RolloutGroup, in rollout.Input, plan rollout.Plan, now time.Time) (rollout.Plan, *v1alpha1.DisruptionHold, error) {
	held := rg.Status.Disruption
	if !plan.Budget.Record() {
		return plan, held, nil
	}
	req := plan.Budget.Request
	decide := func(_ context.Context, live *v1alpha1.RolloutGroup) (disruption.Verdict, error) {
		held = live.Status.Disruption
		v, err := budget.ViewOf(live, in.Members, v1alpha1.DisruptionRollout, now, in.Deleting.Has)
		if err != nil {
			return disruption.Verdict{}, err
		}
		return disruption.Decide(v, req), nil
	}
	key := types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}
	verdict, err := budget.Acquire(ctx, r.Client, r.apiReader, key, func() *v1alpha1.RolloutGroup { return &v1alpha1.RolloutGroup{} },
		decide, false, metrics.RequesterRollout)
	if err != nil {
		return plan, rg.Status.Disruption, err
	}
	if !verdict.Allowed {
		plan.WaitForBudget(verdict)
		return plan, held, nil
	}
	plan.Budget.Verdict = verdict
	if verdict.Record {
		held = verdict.Hold.Record()
	}
	return plan, held, nil
}

// countBudgetDecision counts the budget's answer to the pass's batch: a
// refusal, or a batch allowed and (at least partly) deleted.
func countBudgetDecision(plan rollout.Plan, acted actionResult) {
	switch b := plan.Budget; {
	case b == nil:
	case !b.Verdict.Allowed:
		metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterRollout, "denied", b.Verdict.Code).Inc()
	case acted.deleted > 0:
		metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterRollout, "allowed", "").Inc()
	}
}

// keepHold is next with written's status.disruption and
// status.notifications. Only budget.Acquire writes the hold, with an
// optimistic lock, and only the notifier writes status.notifications; the
// controller's own status writes are merge patches from written to next,
// which then never send those fields: they neither clear nor overwrite what
// another writer recorded.
func keepHold(written, next v1alpha1.RolloutGroupStatus) v1alpha1.RolloutGroupStatus {
	next.Disruption = written.Disruption.DeepCopy()
	next.Notifications = written.Notifications.DeepCopy()
	return next
}

// fresherHold is the hold renewed last of two views of status.disruption
// (the cache's and this process's own record), the cache's when they tie:
// the cache may not show a hold this process recorded a moment ago, and this
// process's record does not show holds other decisions recorded since.
func fresherHold(cached, own *v1alpha1.DisruptionHold) *v1alpha1.DisruptionHold {
	if own != nil && (cached == nil || own.RenewTime.After(cached.RenewTime.Time)) {
		return own.DeepCopy()
	}
	return cached.DeepCopy()
}
