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
	"github.com/echelon-operator/echelon/internal/scaling"
)

// A downscale of a member of a RolloutGroup is one disruption of the group,
// judged by its one budget (disruption.Decide) like a rollout's batch or an
// eviction. It is judged twice: on the cache, for every downscale a plan
// would make, so that a wait costs no API read; then, for a downscale the
// cache allows, on the API server through budget.AcquireDownscale, which
// records the downscale's intent (the ordinals it removes) before the
// StatefulSet is patched, so that a rollout, an eviction or another zone's
// downscale decided at the same moment sees it. The beforePodRemoval hook
// is called before that decision: nothing slow sits between it and the
// patch, which runs under budget.Fence.

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
	view, err := budget.GroupView(ctx, r.Client, obs.Group, v1alpha1.DisruptionDownscale, obs.In.Now)
	if err != nil {
		return plan, fmt.Errorf("RolloutGroup %s: %w", obs.Group.Name, err)
	}
	v := budget.DecideDownscale(view, downscaleRequest(sp, obs, plan.Current, *plan.AskDisruption))
	if !v.Allowed {
		budget.CountDownscale(v) // a refusal, as final as the live one; an allowance is counted once confirmed
	}
	obs.In.Disruption = &v
	return scaling.Decide(obs.In), nil
}

// confirmDownscale judges a downscale the cache allows again on the API
// server, right before it is made: the other members' policies
// (lastDownscaleTime, for the zone delay: a policy of another zone may have
// downscaled a moment ago) and, through budget.AcquireDownscale, the group
// and its members' StatefulSets and pods, with the group's hold recorded
// when allowed. It returns the plan made on what it read.
func (r *Reconciler) confirmDownscale(ctx context.Context, sp *v1alpha1.ScalingPolicy, obs *observation) (scaling.Plan, error) {
	in := &obs.In
	var policies v1alpha1.ScalingPolicyList
	if err := r.apiReader.List(ctx, &policies, client.InNamespace(obs.Target.Namespace)); err != nil {
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
	v, err := budget.AcquireDownscale(ctx, r.Client, r.apiReader, client.ObjectKeyFromObject(obs.Group),
		downscaleRequest(sp, obs, plan.Current, *plan.Scale), false, r.now)
	if err != nil {
		return scaling.Plan{}, fmt.Errorf("downscale of StatefulSet %s: %w", obs.Target.Name, err)
	}
	in.Disruption = &v
	return scaling.Decide(*in), nil
}

// downscaleRequest asks to shrink the target from replicas from to to.
func downscaleRequest(sp *v1alpha1.ScalingPolicy, obs *observation, from, to int32) disruption.Request {
	return budget.DownscaleRequest(obs.Target, from, to, "ScalingPolicy "+sp.Name, obs.In.ZoneDelay)
}

// fenced is the context a downscale runs under: for one the group's budget
// allowed, one that ends at its intent's act deadline (budget.Fence).
func fenced(ctx context.Context, in scaling.Input, plan scaling.Plan) (context.Context, context.CancelFunc) {
	if v := in.Disruption; isDownscale(plan) && v != nil && v.Allowed && !v.Intent.Decided.IsZero() {
		return budget.Fence(ctx, *v)
	}
	return ctx, func() {}
}

// requeueAfter is when to plan again: when time alone may change the plan,
// or, for a downscale refused for the state of another zone's pods, after
// disruptionRecheck.
func requeueAfter(in scaling.Input, plan scaling.Plan) time.Duration {
	if plan.Phase == v1alpha1.ScalingPhaseWaiting && in.Disruption != nil && !in.Disruption.Allowed &&
		(plan.RequeueAfter == 0 || plan.RequeueAfter > disruptionRecheck) {
		// A refusal for another zone's pods ends on evidence (a pod seen
		// going, then back), which no watch of this controller may show:
		// an intent's expiry is only its latest end.
		return disruptionRecheck
	}
	return plan.RequeueAfter
}
