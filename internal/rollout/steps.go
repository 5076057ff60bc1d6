package rollout

import (
	"fmt"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Steps of spec.steps are counted over the whole group, not per member: a
// step of 1% of three zones of 30 pods rolls one pod of the first zone, and
// 50% rolls the first zone and half the second. The group keeps rolling one
// member at a time in its order, and a person promotes each step once, where
// per-member steps would pause every zone at every step.

// StepsInput is where a rollout stands in spec.steps, as status.step
// recorded it; nil without steps, and ignored while rolling back.
type StepsInput struct {
	Steps []v1alpha1.RolloutStep
	// Index, WaitingFor and Since are status.step's: the step the rollout is
	// at, what it waited for and since when. A new rollout starts at 0.
	Index      int32
	WaitingFor v1alpha1.StepWait
	Since      time.Time
	// Promoted is true when echelon.dev/promote carries a value not acted on:
	// it ends one pause without a duration.
	Promoted bool
}

// StepState is where the rollout stands in spec.steps after this plan.
type StepState struct {
	Index, Percent, Target int32
	WaitingFor             v1alpha1.StepWait
	// Since is when the step began waiting for WaitingFor; Until when a
	// pause with a duration ends.
	Since, Until time.Time
	// PromoteUsed is true when this plan went past a pause on the promote
	// it was given: the controller records the value as acted on.
	PromoteUsed bool
}

// StepTarget is how many of total pods a step of percent rolls: rounded up,
// never below one pod.
func StepTarget(percent, total int32) int32 {
	if total == 0 {
		return 0
	}
	return min(total, max(1, (percent*total+99)/100))
}

// decideStep says how far the group may roll now: the step it is at, how
// many more pods may go before that step's share is reached (negative for no
// limit), and the hold of a step that waits (its pods to be available, its
// pause, or a promote). A step whose share is reached goes on to the next at
// once when it has no pause, when its pause's duration is over, or on a
// promote, which ends one pause only. Nothing of this holds once no pod is
// left to roll.
func decideStep(in Input, members []MemberState) (StepState, int, *Hold) {
	s := in.Steps
	var total, pending int32
	whole := true
	for i := range members {
		total += members[i].Replicas
		pending += members[i].Pending
		if members[i].disruption() != "" {
			whole = false
		}
	}
	done := total - pending
	idx, used := s.Index, false
	since := func(w v1alpha1.StepWait) time.Time {
		if idx == s.Index && s.WaitingFor == w && !s.Since.IsZero() {
			return s.Since
		}
		return in.Now
	}
	for int(idx) < len(s.Steps) && pending > 0 {
		step := s.Steps[idx]
		st := StepState{Index: idx, Percent: step.Percent, Target: StepTarget(step.Percent, total)}
		where := fmt.Sprintf("step %d of %d (%d%%, %d of %d pods)", idx+1, len(s.Steps), step.Percent, st.Target, total)
		switch {
		case done < st.Target:
			st.WaitingFor, st.Since, st.PromoteUsed = v1alpha1.StepWaitPods, since(v1alpha1.StepWaitPods), used
			return st, int(st.Target - done), nil
		case !whole:
			st.WaitingFor, st.Since, st.PromoteUsed = v1alpha1.StepWaitAvailability, since(v1alpha1.StepWaitAvailability), used
			return st, 0, &Hold{Reason: v1alpha1.ReasonWaitingForStep, Message: where + " reached, waiting for its pods to be available"}
		case step.Pause == nil:
			idx++
		case step.Pause.Duration != nil:
			st.WaitingFor, st.Since, st.PromoteUsed = v1alpha1.StepWaitDuration, since(v1alpha1.StepWaitDuration), used
			st.Until = st.Since.Add(step.Pause.Duration.Duration)
			if !in.Now.Before(st.Until) {
				idx++
				continue
			}
			return st, 0, &Hold{Reason: v1alpha1.ReasonStepPause, Message: fmt.Sprintf("%s done, paused until %s (pause %s)",
				where, st.Until.UTC().Format(time.RFC3339), step.Pause.Duration.Duration)}
		case s.Promoted && !used:
			used = true
			idx++
		default:
			st.WaitingFor, st.Since, st.PromoteUsed = v1alpha1.StepWaitPromote, since(v1alpha1.StepWaitPromote), used
			return st, 0, &Hold{Reason: v1alpha1.ReasonWaitingForPromote, Message: fmt.Sprintf(
				"%s done, waiting for a promote (annotate the group %s=<new value>) since %s", where, v1alpha1.AnnotationPromote, st.Since.UTC().Format(time.RFC3339))}
		}
	}
	return StepState{Index: int32(len(s.Steps)), Percent: 100, Target: total, WaitingFor: v1alpha1.StepWaitDone, PromoteUsed: used}, -1, nil
}
