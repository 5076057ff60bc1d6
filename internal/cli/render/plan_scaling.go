package render

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/scaling"
)

// ScalingPlanView is the scaling planner's decision on a policy's live
// objects, made by the plugin without acting on it.
type ScalingPlanView struct {
	Policy *v1alpha1.ScalingPolicy
	Plan   scaling.Plan
	Now    time.Time
}

// ScalingPlan writes the decision: the target's replicas, what its source
// asks for, and the scale the operator would write next, or why none.
func ScalingPlan(w io.Writer, v ScalingPlanView, s Style) error {
	var b strings.Builder
	sp, p := v.Policy, v.Plan
	fmt.Fprintf(&b, "Plan for ScalingPolicy %s/%s at %s (dry run: nothing is changed)\n\n", sp.Namespace, s.Bold(sp.Name), stamp(v.Now))
	desired := "none"
	if p.Desired != nil {
		desired = fmt.Sprintf("%d", *p.Desired)
	}
	fmt.Fprintf(&b, "Target:  %s %s, %d replicas\n", sp.Spec.TargetRef.Kind, sp.Spec.TargetRef.Name, p.Current)
	fmt.Fprintf(&b, "Desired: %s\n", desired)
	fmt.Fprintf(&b, "Phase:   %s (%s)\n\n", p.Phase, p.Reason)
	switch {
	case p.Scale != nil:
		fmt.Fprintf(&b, "Next: scale %s from %d to %d: %s\n", sp.Spec.TargetRef.Name, p.Current, *p.Scale, p.Message)
	case p.AskDisruption != nil:
		fmt.Fprintf(&b, "Next: ask the group's disruption budget for a downscale to %d, then scale if it allows: %s\n", *p.AskDisruption, p.Message)
	default:
		fmt.Fprintf(&b, "Next: nothing: %s\n", p.Message)
	}
	if !p.WaitingUntil.IsZero() {
		fmt.Fprintf(&b, "Until:   %s\n", stamp(p.WaitingUntil))
	}
	_, err := io.WriteString(w, b.String())
	return err
}
