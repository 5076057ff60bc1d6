package cli

import (
	"fmt"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// controls are the commands that steer a group, each refusing when the
// group's state, as its status records it, makes it meaningless.
func controls() []control {
	return []control{
		{
			name:  "pause",
			short: "Stop the group from deleting pods (spec.paused=true)",
			long:  "pause sets spec.paused: the operator deletes no pod of the group until it is resumed, and keeps reporting status.",
			refuse: func(rg *v1alpha1.RolloutGroup) string {
				if rg.Spec.Paused {
					return "already paused (spec.paused is true)"
				}
				return ""
			},
			change: func(*v1alpha1.RolloutGroup, time.Time) (map[string]any, string) {
				return map[string]any{"spec": map[string]any{"paused": true}}, "paused (spec.paused=true): no pod is deleted until resumed"
			},
		},
		{
			name:  "resume",
			short: "Let a paused group delete pods again (spec.paused=false)",
			long:  "resume unsets spec.paused: the operator goes on where it stopped.",
			refuse: func(rg *v1alpha1.RolloutGroup) string {
				if !rg.Spec.Paused {
					return "not paused (spec.paused is not set)"
				}
				return ""
			},
			change: func(*v1alpha1.RolloutGroup, time.Time) (map[string]any, string) {
				return map[string]any{"spec": map[string]any{"paused": false}}, "resumed (spec.paused=false)"
			},
		},
		{
			name:  "retry",
			short: "Clear a failure: evaluate the failed gate again, or go on after a rollback (echelon.dev/retry)",
			long: `retry sets the echelon.dev/retry annotation to a fresh value. A failed gate
(onFailure Pause) is evaluated again from the start; after a rollback or an
abort the group goes on with the StatefulSet templates as they are now.`,
			refuse: refuseRetry,
			change: func(rg *v1alpha1.RolloutGroup, now time.Time) (map[string]any, string) {
				patch, set := annotate(v1alpha1.AnnotationRetry, now)
				return patch, "retry requested (" + set + "): " + retryEffect(rg)
			},
		},
		{
			name:   "skip-gate",
			short:  "Pass the pending analysis gate, or the failed gate that holds the group (echelon.dev/skip-gate)",
			long:   "skip-gate sets the echelon.dev/skip-gate annotation to a fresh value: the pending gate, or the failed gate of a group held by onFailure Pause, passes now and the rollout goes on.",
			refuse: refuseSkipGate,
			change: func(rg *v1alpha1.RolloutGroup, now time.Time) (map[string]any, string) {
				patch, set := annotate(v1alpha1.AnnotationSkipGate, now)
				return patch, "gate skip requested (" + set + "): " + skipEffect(rg)
			},
		},
		{
			name:   "abort",
			short:  "Roll the group back now, whatever spec.onFailure says (echelon.dev/abort)",
			long:   "abort sets the echelon.dev/abort annotation to a fresh value: the operator restores the stable template of every member that moved and rolls its updated pods back, most recently rolled member first.",
			refuse: refuseAbort,
			change: func(_ *v1alpha1.RolloutGroup, now time.Time) (map[string]any, string) {
				patch, set := annotate(v1alpha1.AnnotationAbort, now)
				return patch, "abort requested (" + set + "): the members that moved are rolled back to their stable revision"
			},
		},
		{
			name:   "promote",
			short:  "Let the rollout go past the step that waits for promotion (echelon.dev/promote)",
			long:   "promote sets the echelon.dev/promote annotation to a fresh value: the step of spec.steps that waits for promotion is done and the rollout goes on.",
			refuse: refusePromote,
			change: func(rg *v1alpha1.RolloutGroup, now time.Time) (map[string]any, string) {
				patch, set := annotate(v1alpha1.AnnotationPromote, now)
				return patch, "promotion requested (" + set + "): " + promoteEffect(rg)
			},
		},
		{
			name:  "restart",
			short: "Replace every pod of the group, one member at a time, without a template change (spec.restartAt)",
			long:  "restart sets spec.restartAt to now: every pod created before it is replaced under the group's usual rules.",
			refuse: func(*v1alpha1.RolloutGroup) string {
				return "" // an operator without restarts refuses the field itself
			},
			change: func(_ *v1alpha1.RolloutGroup, now time.Time) (map[string]any, string) {
				at := now.UTC().Format(time.RFC3339)
				return map[string]any{"spec": map[string]any{"restartAt": at}}, "restart requested (spec.restartAt=" + at + "): pods created before it are replaced"
			},
		},
	}
}

func refuseRetry(rg *v1alpha1.RolloutGroup) string {
	a := rg.Status.Analysis
	if a == nil || (a.Failure == nil && a.Rollback == nil) {
		return "nothing to retry: the group has not failed (status.analysis shows no failure and no rollback)"
	}
	return ""
}

func retryEffect(rg *v1alpha1.RolloutGroup) string {
	a := rg.Status.Analysis
	switch {
	case a.Rollback != nil && a.Rollback.CompletionTime == nil:
		return "the rollback stops; the group goes on with the StatefulSet templates as they are now"
	case a.Rollback != nil:
		return "the rollback is cleared; the group goes on with the StatefulSet templates as they are now"
	case a.Failure.Gate != nil:
		return fmt.Sprintf("the failed %s gate of %s is evaluated again from the start", a.Failure.Gate.Kind, a.Failure.Gate.Member)
	}
	return "the failure is cleared"
}

func refuseSkipGate(rg *v1alpha1.RolloutGroup) string {
	a := rg.Status.Analysis
	switch {
	case a != nil && a.Gate != nil:
		return ""
	case a != nil && a.Failure != nil && a.Rollback == nil && a.Failure.Gate != nil:
		return ""
	case a != nil && a.Rollback != nil:
		return "nothing to skip: the group is rolling back or rolled back (retry clears that)"
	}
	return "no analysis gate is pending or failed (status.analysis has no gate)"
}

func skipEffect(rg *v1alpha1.RolloutGroup) string {
	a := rg.Status.Analysis
	if a.Gate != nil {
		return fmt.Sprintf("the %s gate of %s passes now", a.Gate.Kind, a.Gate.Member)
	}
	return fmt.Sprintf("the failed %s gate of %s passes now and the rollout goes on", a.Failure.Gate.Kind, a.Failure.Gate.Member)
}

// refuseAbort refuses what the operator would answer with "nothing" (docs:
// analysis.md, "Retry, skip or abort with kubectl"): a rollback already
// under way or done, or no member that moved. A member whose stable
// revision status does not know yet may have moved: abort is then written.
func refuseAbort(rg *v1alpha1.RolloutGroup) string {
	a := rg.Status.Analysis
	switch {
	case a != nil && a.Rollback != nil && a.Rollback.CompletionTime != nil:
		return "already rolled back (status.analysis.rollback is complete; retry clears it)"
	case a != nil && a.Rollback != nil:
		return "already rolling back (status.analysis.rollback is under way)"
	}
	members := rg.Status.StatefulSets
	if len(members) == 0 {
		return ""
	}
	for _, m := range members {
		if m.StableRevision == "" || m.UpdateRevision != m.StableRevision {
			return ""
		}
	}
	return "nothing to roll back: every member runs its stable revision (nothing has rolled)"
}

// refusePromote refuses a group without spec.steps, and one whose steps
// are all done: no pause is left to end. A promote given while a step's
// pods roll is not refused: the operator ends that step's pause as soon as
// it comes.
func refusePromote(rg *v1alpha1.RolloutGroup) string {
	switch st := rg.Status.Step; {
	case len(rg.Spec.Steps) == 0:
		return "the group has no spec.steps: no step waits for promotion"
	case st != nil && st.WaitingFor == v1alpha1.StepWaitDone:
		return "every step of spec.steps is done (status.step): no step waits for promotion"
	}
	return ""
}

func promoteEffect(rg *v1alpha1.RolloutGroup) string {
	st := rg.Status.Step
	switch {
	case st == nil:
		return "the pause of the first step of spec.steps ends when it comes"
	case st.WaitingFor == v1alpha1.StepWaitPromote || st.WaitingFor == v1alpha1.StepWaitDuration:
		return fmt.Sprintf("the pause of step %d (%d%%) ends now; the rollout goes on", st.Index+1, st.Percent)
	}
	return fmt.Sprintf("the pause of step %d (%d%%) ends as soon as it comes (the step waits for %s now)", st.Index+1, st.Percent, st.WaitingFor)
}
