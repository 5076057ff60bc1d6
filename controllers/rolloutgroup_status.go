package controllers

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// defaultProgressDeadline applies when spec.progressDeadline is not set.
const defaultProgressDeadline = 15 * time.Minute

// actionResult is what the controller did with a plan.
type actionResult struct {
	// deleted counts pods deleted or evicted in this pass.
	deleted int32
	// refused is non-empty when an eviction was refused (PodDisruptionBudget).
	refused string
}

// statusUpdate is the new status and what the controller should know about the
// transition from the old one.
type statusUpdate struct {
	status v1alpha1.RolloutGroupStatus
	// rolloutStarted / rolloutCompleted are true on the pass where that happened.
	rolloutStarted   bool
	rolloutCompleted bool
	// stalledNow is true on the pass where the group became Stalled.
	stalledNow bool
	// recheckAfter is when the status would change with time alone (the deadline).
	recheckAfter time.Duration
}

// computeStatus derives the group's new status from the old one, the plan and what
// was done. It has no client: every condition is table-tested.
func computeStatus(rg *v1alpha1.RolloutGroup, plan rollout.Plan, acted actionResult, now time.Time) statusUpdate {
	old := rg.Status
	st := v1alpha1.RolloutGroupStatus{
		ObservedGeneration:    rg.Generation,
		CurrentStatefulSet:    plan.Current,
		Message:               plan.Message,
		RolloutStartTime:      old.RolloutStartTime,
		RolloutCompletionTime: old.RolloutCompletionTime,
		LastProgressTime:      old.LastProgressTime,
		LastBatchTime:         old.LastBatchTime,
		PodsRolled:            old.PodsRolled,
		Conditions:            append([]metav1.Condition(nil), old.Conditions...),
	}
	outdated := false
	for _, m := range plan.Members {
		st.StatefulSets = append(st.StatefulSets, v1alpha1.MemberStatus{
			Name:              m.Name,
			Replicas:          m.Replicas,
			ReadyReplicas:     m.Ready,
			AvailableReplicas: m.Available,
			UpdatedReplicas:   m.Updated,
			MaxUnavailable:    m.MaxUnavailable,
			CurrentRevision:   m.CurrentRevision,
			UpdateRevision:    m.UpdateRevision,
			Phase:             m.Phase,
			Message:           m.Message,
		})
		st.Replicas += m.Replicas
		st.UpdatedReplicas += m.Updated
		st.AvailableReplicas += m.Available
		outdated = outdated || m.Updated < m.Replicas
	}
	st.Updated = fmt.Sprintf("%d/%d", st.UpdatedReplicas, st.Replicas)
	ts := metav1.NewTime(now)
	var up statusUpdate

	rolloutOpen := old.RolloutStartTime != nil &&
		(old.RolloutCompletionTime == nil || old.RolloutCompletionTime.Before(old.RolloutStartTime))
	if !rolloutOpen && outdated && plan.Blocked == nil {
		st.RolloutStartTime, st.RolloutCompletionTime = &ts, nil
		st.LastProgressTime, st.PodsRolled = &ts, 0
		rolloutOpen, up.rolloutStarted = true, true
	}
	if rolloutOpen && plan.Complete {
		st.RolloutCompletionTime = &ts
		rolloutOpen, up.rolloutCompleted = false, true
	}
	if acted.deleted > 0 {
		st.PodsRolled += acted.deleted
		st.LastBatchTime = &ts
	}
	if acted.deleted > 0 || st.UpdatedReplicas != old.UpdatedReplicas || st.AvailableReplicas != old.AvailableReplicas {
		st.LastProgressTime = &ts
	}
	if acted.refused != "" {
		st.Message = plan.Message + "; " + acted.refused
	}

	deadline := defaultProgressDeadline
	if rg.Spec.ProgressDeadline != nil {
		deadline = rg.Spec.ProgressDeadline.Duration
	}
	stalled := false
	if rolloutOpen && !rg.Spec.Paused && plan.Blocked == nil && st.LastProgressTime != nil {
		sinceProgress := now.Sub(st.LastProgressTime.Time)
		if sinceProgress >= deadline {
			stalled = true
			st.Message = fmt.Sprintf("no progress for %s (progressDeadline %s): %s", sinceProgress.Round(time.Second), deadline, st.Message)
		} else {
			up.recheckAfter = deadline - sinceProgress
		}
	}

	switch {
	case plan.Blocked != nil:
		st.Phase = v1alpha1.PhaseBlocked
	case rg.Spec.Paused:
		st.Phase = v1alpha1.PhasePaused
	case plan.Complete:
		st.Phase = v1alpha1.PhaseComplete
	case stalled:
		st.Phase = v1alpha1.PhaseStalled
	default:
		st.Phase = v1alpha1.PhaseProgressing
	}
	up.stalledNow = stalled && old.Phase != v1alpha1.PhaseStalled
	setConditions(&st, rg, plan, stalled)
	up.status = st
	return up
}

// setConditions writes Ready, Progressing and Paused from the phase and plan.
func setConditions(st *v1alpha1.RolloutGroupStatus, rg *v1alpha1.RolloutGroup, plan rollout.Plan, stalled bool) {
	gen := rg.Generation
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
		})
	}
	progressReason := v1alpha1.ReasonWaitingForPods
	if len(plan.Delete) > 0 || st.Phase == v1alpha1.PhaseProgressing && plan.Current != "" {
		progressReason = v1alpha1.ReasonRollingMember
	}
	switch {
	case plan.Blocked != nil:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, plan.Blocked.Reason, st.Message)
		set(v1alpha1.ConditionProgressing, metav1.ConditionFalse, plan.Blocked.Reason, st.Message)
	case plan.Complete:
		set(v1alpha1.ConditionReady, metav1.ConditionTrue, v1alpha1.ReasonRolloutComplete, st.Message)
		set(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonRolloutComplete, st.Message)
	case rg.Spec.Paused:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonPaused, st.Message)
		set(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonPaused, st.Message)
	case stalled:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, v1alpha1.ReasonProgressDeadlineExceeded, st.Message)
		set(v1alpha1.ConditionProgressing, metav1.ConditionFalse, v1alpha1.ReasonProgressDeadlineExceeded, st.Message)
	default:
		set(v1alpha1.ConditionReady, metav1.ConditionFalse, progressReason, st.Message)
		set(v1alpha1.ConditionProgressing, metav1.ConditionTrue, progressReason, st.Message)
	}
	if rg.Spec.Paused {
		set(v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused, "spec.paused is true: no pod is deleted")
	} else {
		set(v1alpha1.ConditionPaused, metav1.ConditionFalse, v1alpha1.ReasonNotPaused, "spec.paused is false")
	}
}
