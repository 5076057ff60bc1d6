package scalingpolicy

import (
	"context"
	"fmt"
	"slices"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/scaling"
)

// A downscale of a member of a RolloutGroup is one disruption of the group,
// judged by its one budget (disruption.Decide) like a rollout's batch or an
// eviction. It is judged twice: on the cache, for every downscale a plan
// would make, so that a wait costs no API read; then, for a downscale the
// cache allows, on the API server through budget.Acquire, which records the
// group's hold before the StatefulSet is patched, so that a rollout, an
// eviction or another zone's downscale decided at the same moment sees it.

// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups,verbs=get
// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups/status,verbs=patch

// disruptionRecheck is how soon a downscale refused for the state of another
// zone's pods is judged again when nothing wakes the policy before: the
// controller watches StatefulSets and the group, not pods, and a pod may
// become available (minReadySeconds passing, a replacement Ready) with no
// change in its StatefulSet's status counts.
const disruptionRecheck = 10 * time.Second

// askDisruption answers what the plan asks (plan.AskDisruption) from the
// cache, and plans again with the answer.
func (r *Reconciler) askDisruption(ctx context.Context, sp *v1alpha1.ScalingPolicy, obs *observation, plan scaling.Plan) (scaling.Plan, error) {
	view, err := budget.GroupView(ctx, r.Client, obs.group, v1alpha1.DisruptionDownscale, obs.in.Now)
	if err != nil {
		return plan, fmt.Errorf("RolloutGroup %s: %w", obs.group.Name, err)
	}
	v := decideDownscale(view, downscaleRequest(sp, obs, plan.Current, *plan.AskDisruption))
	if !v.Allowed {
		countDecision(v)
	}
	obs.in.Disruption = &v
	return scaling.Decide(obs.in), nil
}

// confirmDownscale judges a downscale the cache allows again on the API
// server, right before it is made: the other members' policies
// (lastDownscaleTime, for the zone delay: a policy of another zone may have
// downscaled a moment ago) and, through budget.Acquire, the group and its
// members' StatefulSets and pods, with the hold recorded when allowed. It
// returns the plan made on what it read.
func (r *Reconciler) confirmDownscale(ctx context.Context, sp *v1alpha1.ScalingPolicy, obs *observation) (scaling.Plan, error) {
	in := &obs.in
	var policies v1alpha1.ScalingPolicyList
	if err := r.apiReader.List(ctx, &policies, client.InNamespace(obs.target.Namespace)); err != nil {
		return scaling.Plan{}, fmt.Errorf("live read of ScalingPolicies: %w", err)
	}
	group := *in.Group
	group.Others = slices.Clone(group.Others)
	for i := range group.Others {
		m := &group.Others[i]
		for _, p := range policies.Items {
			if t := p.Status.LastDownscaleTime; p.Spec.TargetRef.IsStatefulSet() && p.Spec.TargetRef.Name == m.Name && t != nil && t.After(m.LastDownscale) {
				m.LastDownscale = t.Time
			}
		}
	}
	in.Group = &group
	plan := scaling.Decide(*in)
	if !isDownscale(plan) {
		return plan, nil
	}

	req := downscaleRequest(sp, obs, plan.Current, *plan.Scale)
	decide := func(ctx context.Context, rg *v1alpha1.RolloutGroup) (disruption.Verdict, error) {
		view, err := budget.GroupView(ctx, r.apiReader, rg, v1alpha1.DisruptionDownscale, r.now())
		if err != nil {
			return disruption.Verdict{}, err
		}
		return decideDownscale(view, req), nil
	}
	v, err := budget.Acquire(ctx, r.Client, r.apiReader, client.ObjectKeyFromObject(obs.group),
		func() *v1alpha1.RolloutGroup { return &v1alpha1.RolloutGroup{} }, decide, false, metrics.RequesterDownscale)
	if err != nil {
		return scaling.Plan{}, fmt.Errorf("downscale of StatefulSet %s: RolloutGroup %s: %w", obs.target.Name, obs.group.Name, err)
	}
	countDecision(v)
	in.Disruption = &v
	return scaling.Decide(*in), nil
}

// downscaleRequest asks to shrink the target from replicas from to to.
func downscaleRequest(sp *v1alpha1.ScalingPolicy, obs *observation, from, to int32) disruption.Request {
	return disruption.Request{Zone: obs.target.Name, Reason: v1alpha1.DisruptionDownscale, Count: from - to,
		Holder: "ScalingPolicy " + sp.Name}
}

// decideDownscale decides req on view. A refusal for the state of another
// zone names, besides that zone, who last held the budget and why (a
// rollout, an eviction, another downscale), which the pods alone do not say.
func decideDownscale(view disruption.View, req disruption.Request) disruption.Verdict {
	v := disruption.Decide(view, req)
	if h := view.Hold; !v.Allowed && v.Code != disruption.CodeHeldByOtherZone && h != nil && h.Zone != req.Zone {
		v.Message += fmt.Sprintf("; the budget was last held by %s", h.Describe())
	}
	return v
}

func countDecision(v disruption.Verdict) {
	decision := metrics.DecisionAllowed
	if !v.Allowed {
		decision = metrics.DecisionDenied
	}
	metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterDownscale, decision, v.Code).Inc()
}

// requeueAfter is when to plan again: when time alone may change the plan,
// or, for a downscale refused for the state of another zone's pods, after
// disruptionRecheck.
func requeueAfter(in scaling.Input, plan scaling.Plan) time.Duration {
	if plan.RequeueAfter == 0 && plan.Phase == v1alpha1.ScalingPhaseWaiting && in.Disruption != nil && !in.Disruption.Allowed {
		return disruptionRecheck
	}
	return plan.RequeueAfter
}
