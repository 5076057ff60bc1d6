package cli

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/cli/render"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/internal/rollout/gate"
	"github.com/echelon-operator/echelon/internal/scaling"
)

func newPlanCommand(o *options) *cobra.Command {
	return &cobra.Command{
		Use:   "plan rg|sp NAME",
		Short: "Run the operator's planner on the live objects, read only: which pods go next and why, or why none; for a ScalingPolicy, the next scale",
		Long: `plan reads the group, its StatefulSets and their pods from the API server as
the operator observes them (the controller's own observation, read without its
cache), and runs the operator's own planner on them. It
changes nothing. A paused group is planned twice: as it is, and as it would be
once resumed; so is a group waiting for a promote: as it is, and as it would
be once promoted.`,
		Example:           "  kubectl echelon plan rg ingester\n  kubectl echelon plan sp ingester-zone-b",
		Args:              cobra.RangeArgs(1, 2),
		ValidArgsFunction: o.completeTarget,
		RunE: func(cmd *cobra.Command, args []string) error {
			k, key, s, err := o.target(args)
			if err != nil {
				return err
			}
			if k == kindScalingPolicy {
				return o.planScaling(cmd.Context(), s, key)
			}
			if k != kindRolloutGroup {
				return fmt.Errorf("plan %s: only RolloutGroups (rg) and ScalingPolicies (sp) can be planned; see `kubectl echelon get %s` for what it waits for", strings.ToLower(string(k)), strings.Join(args, " "))
			}
			rg := &v1alpha1.RolloutGroup{}
			if err := getObject(cmd.Context(), s, "RolloutGroup", key, rg); err != nil {
				return err
			}
			now := o.now()
			// The controller's observation, read with plain lists (no cache
			// index) and without what only a running controller knows (its
			// deletion expectations).
			in, _, err := lookup.ObserveRolloutGroup(cmd.Context(), s.client, lookup.ListedReads{}, rg, now)
			if err != nil {
				return explain(err, s.host, fmt.Sprintf("read the members of RolloutGroup %q in namespace %q", rg.Name, rg.Namespace))
			}
			return render.Plan(o.streams.Out, dryRun(rg, in, now), o.style())
		},
	}
}

// dryRun is the operator's pass over in without its side effects: the
// analysis pass as the operator begins it (manual controls acted on, gates
// opened or passed on what status records), then the planner. No check is
// queried and no template restored; the notes say when the operator would.
func dryRun(rg *v1alpha1.RolloutGroup, in rollout.Input, now time.Time) render.PlanView {
	ap := gate.New(rg, now)
	ap.ApplyTo(&in)
	pre := rollout.Decide(in)
	ap.Begin(pre)
	due := ap.DueChecks()
	ap.Decide(pre)
	ap.ApplyTo(&in)
	v := render.PlanView{Group: rg, Plan: rollout.Decide(in), MinReadySeconds: rg.Spec.MinReadySeconds, Now: now}
	if in.Paused {
		resumed := in
		resumed.Paused = false
		p := rollout.Decide(resumed)
		v.IfResumed = &p
	}
	if st := v.Plan.Step; st != nil && st.WaitingFor == v1alpha1.StepWaitPromote && in.Steps != nil {
		promoted, steps := in, *in.Steps
		steps.Promoted = true
		promoted.Steps = &steps
		p := rollout.Decide(promoted)
		v.IfPromoted = &p
	}
	if len(due) > 0 && pre.Blocked == nil {
		names := make([]string, 0, len(due))
		for _, c := range due {
			names = append(names, c.Name)
		}
		v.Notes = append(v.Notes, fmt.Sprintf("the operator would query check %s now; the dry run queries no Prometheus, so the gate stays as status records it", strings.Join(names, ", ")))
	}
	if ap.RollingBack() {
		v.Notes = append(v.Notes, "a rollback is under way: the operator restores each member's stable template before it deletes a pod of that member")
	}
	return v
}

// planScaling is `plan sp`: the scaling planner on the policy's live objects,
// observed as the controller observes them. A downscale of a group's member
// shows the disruption budget's question, which only the operator asks (its
// answer records a hold).
func (o *options) planScaling(ctx context.Context, s *session, key types.NamespacedName) error {
	sp := &v1alpha1.ScalingPolicy{}
	if err := getObject(ctx, s, "ScalingPolicy", key, sp); err != nil {
		return err
	}
	now := o.now()
	// The controller's observation, without its cache (Unindexed serves the
	// cache's index fields) and without watching the source kinds.
	obs, err := lookup.ObserveScalingPolicy(ctx, lookup.Unindexed{Client: s.client}, s.client, nil, sp, now)
	if err != nil {
		return explain(err, s.host, fmt.Sprintf("read the target and source of ScalingPolicy %q in namespace %q", sp.Name, sp.Namespace))
	}
	return render.ScalingPlan(o.streams.Out, render.ScalingPlanView{Policy: sp, Plan: scaling.Decide(obs.In), Now: now}, o.style())
}
