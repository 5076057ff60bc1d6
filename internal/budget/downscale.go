package budget

import (
	"context"
	"fmt"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
)

// DecideDownscale decides req, a downscale of a member of a group, on view.
// A refusal for the state of another zone also names who last held the
// group's budget and why (a rollout, an eviction, another downscale): the
// pods alone do not say what is taking them away.
func DecideDownscale(view disruption.View, req disruption.Request) disruption.Verdict {
	v := disruption.Decide(view, req)
	if h := view.Hold; !v.Allowed && v.Code != disruption.CodeHeldByOtherZone && h != nil && h.Zone != req.Zone {
		v.Message += fmt.Sprintf("; the budget was last held by %s", h.Describe())
	}
	return v
}

// AcquireDownscale judges req, a downscale of a member of the RolloutGroup
// group, on what live (the API server) holds of the group, its members and
// their pods, and, unless dryRun, records the group's hold when it is
// allowed: the caller shrinks the StatefulSet only after an allowed answer.
// The ScalingPolicy controller and the prepare-downscale webhook both call
// it. The answer is counted in echelon_disruption_decisions_total with
// requester "downscale".
func AcquireDownscale(ctx context.Context, c client.Client, live client.Reader, group client.ObjectKey, req disruption.Request, dryRun bool, now func() time.Time) (disruption.Verdict, error) {
	decide := func(ctx context.Context, rg *v1alpha1.RolloutGroup) (disruption.Verdict, error) {
		view, err := GroupView(ctx, live, rg, v1alpha1.DisruptionDownscale, now())
		if err != nil {
			return disruption.Verdict{}, err
		}
		return DecideDownscale(view, req), nil
	}
	v, err := Acquire(ctx, c, live, group, func() *v1alpha1.RolloutGroup { return &v1alpha1.RolloutGroup{} }, decide, dryRun, metrics.RequesterDownscale)
	if err != nil {
		return v, fmt.Errorf("RolloutGroup %s: %w", group.Name, err)
	}
	CountDownscale(v)
	return v, nil
}

// CountDownscale counts a downscale decision in
// echelon_disruption_decisions_total.
func CountDownscale(v disruption.Verdict) {
	decision := metrics.DecisionAllowed
	if !v.Allowed {
		decision = metrics.DecisionDenied
	}
	metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterDownscale, decision, v.Code).Inc()
}
