package budget

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podname"
)

// DecideDownscale decides req, a downscale of a member of a group, on view.
// A refusal for the state of another zone also names who last took pods of
// another zone and why (a rollout, an eviction, another downscale): the
// pods alone do not say what is taking them away.
func DecideDownscale(view disruption.View, req disruption.Request) disruption.Verdict {
	v := disruption.Decide(view, req)
	if v.Allowed || v.Code == disruption.CodeHeldByOtherZone {
		return v
	}
	for i := len(view.Intents) - 1; i >= 0; i-- {
		if in := &view.Intents[i]; in.Zone != req.Zone {
			v.Message += fmt.Sprintf("; pods were last taken from %s", in.Describe())
			break
		}
	}
	return v
}

// errShared stops a decision on a group's own record when the group shares
// a budget: the decision is made on that budget's record instead.
var errShared = errors.New("the group shares a ZoneDisruptionBudget")

// DownscaleRequest asks, for holder, to shrink sts from replicas from to
// to: the pods of the ordinals it removes, zoneDelay after another zone's
// downscale at the earliest.
func DownscaleRequest(sts *appsv1.StatefulSet, from, to int32, holder string, zoneDelay time.Duration) disruption.Request {
	req := disruption.Request{Zone: sts.Name, Reason: v1alpha1.DisruptionDownscale, Holder: holder, ZoneDelay: zoneDelay}
	lo, hi := podname.Removed(podname.Start(sts), from, to)
	for ord := hi - 1; ord >= lo; ord-- {
		req.Pods = append(req.Pods, fmt.Sprintf("%s-%d", sts.Name, ord))
	}
	return req
}

// AcquireDownscale judges req, a downscale of a member of the RolloutGroup
// group, on what live (the API server) holds of the group, its members and
// their pods, and, unless dryRun, records the group's hold when it is
// allowed: the caller shrinks the StatefulSet only after an allowed answer.
// The ScalingPolicy controller and the prepare-downscale webhook both call
// it. The answer is counted in echelon_disruption_decisions_total with
// requester "downscale".
func AcquireDownscale(ctx context.Context, c client.Client, live client.Reader, group client.ObjectKey, req disruption.Request, dryRun bool, now func() time.Time) (disruption.Verdict, error) {
	var sharing *v1alpha1.RolloutGroup
	decide := func(ctx context.Context, rg *v1alpha1.RolloutGroup) (disruption.Verdict, error) {
		if _, shared := SharedKey(rg); shared {
			sharing = rg
			return disruption.Verdict{}, errShared
		}
		view, err := GroupView(ctx, live, rg, v1alpha1.DisruptionDownscale, now())
		if err != nil {
			return disruption.Verdict{}, err
		}
		return DecideDownscale(view, req), nil
	}
	v, err := Acquire(ctx, c, live, group, func() *v1alpha1.RolloutGroup { return &v1alpha1.RolloutGroup{} }, decide, dryRun, metrics.RequesterDownscale)
	if errors.Is(err, errShared) {
		// The group's disruptions are recorded in the budget it shares.
		v, err = AcquireShared(ctx, c, live, sharing, func(ctx context.Context, zdb *v1alpha1.ZoneDisruptionBudget) (disruption.Verdict, error) {
			view, err := SharedView(ctx, live, zdb, v1alpha1.DisruptionDownscale, now(), Requester{Group: sharing}, nil)
			if err != nil {
				return disruption.Verdict{}, err
			}
			return DecideDownscale(view, req), nil
		}, dryRun, metrics.RequesterDownscale)
	}
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
