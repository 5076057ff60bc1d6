package rolloutgroup

import (
	"context"
	"errors"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// withdrawIdleReservations withdraws the untouched pods of the group's own
// reservations (disruption.Covers) that the pass does not go on releasing:
// one of a zone the plan is not rolling, or that waits for anything but
// its own pods to come back (a pause, a gate, the budget, another zone):
// see releasing.
// A reservation counts its pods against the zone, and so holds every other
// zone of the budget, for as long as its holder may release them; a
// rollout that stopped must not hold them until the reservation expires.
func (r *Reconciler) withdrawIdleReservations(ctx context.Context, rg *v1alpha1.RolloutGroup, in rollout.Input, plan rollout.Plan) error {
	var errs []error
	var v *disruption.View
	for _, intent := range in.Intents {
		if intent.MaxAtOnce == 0 || intent.Holder != in.Holder || intent.Reason != v1alpha1.DisruptionRollout {
			continue
		}
		if releasing(plan, intent.Zone) {
			continue
		}
		if v == nil {
			bv := rollout.BudgetView(in)
			v = &bv
		}
		untouched := disruption.Untouched(*v, intent)
		if len(untouched) == 0 {
			continue
		}
		err := r.withdraw(ctx, rg, intent, untouched)
		if err == nil {
			// Why the rollout stopped releasing the zone.
			metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterRollout, "withdrawn", plan.Reason).Inc()
		}
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// releasing reports whether the plan goes on releasing zone's pods: it
// releases some now, waits for released ones to come back, or waits for
// the StatefulSet controller to observe a partition it just wrote (a
// moment, in any zone).
func releasing(plan rollout.Plan, zone string) bool {
	switch {
	case plan.Reason == v1alpha1.ReasonWaitingForStatefulSet:
		return true
	case plan.Current != zone:
		return false
	}
	return len(plan.Delete) > 0 || plan.Reason == v1alpha1.ReasonWaitingForPods || plan.Reason == v1alpha1.ReasonDeletingPods
}
