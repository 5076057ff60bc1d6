package rolloutgroup

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/internal/rollout/gate"
)

// defaultProgressDeadline applies when spec.progressDeadline is not set (the CRD
// defaults it, so only objects stored before that default existed lack it).
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
	// rotationStarted / rotationCompleted are true on the pass where a
	// rotation (spec.restartAt, echelon.dev/rotate) began or ended.
	rotationStarted   bool
	rotationCompleted bool
	// stalledNow is true on the pass where the group became Stalled.
	stalledNow bool
	// rolledBack is true on the pass where a rollback completed, which ends the
	// rollout without completing it.
	rolledBack bool
	// recheckAfter is when the status would change with time alone (the deadline).
	recheckAfter time.Duration
}

// computeStatus derives the group's new status from the old one, the plan and what
// was done. It has no client: every condition is table-tested.
//
// A rollout is open from the first pass that sees a pod whose revision differs
// from its member's update revision (with every StatefulSet observed, the group
// not blocked, paused or failed) until the group is Complete with no analysis
// gate pending, or a rollback completed. A scale-up or a lost pod is not a
// rollout: it shows as phase Waiting, with no rollout Events.
//
// ap is the pass's analysis (nil: the group's analysis state as it is).
func computeStatus(rg *v1alpha1.RolloutGroup, plan rollout.Plan, acted actionResult, ap *gate.Pass, now time.Time) statusUpdate {
	if ap == nil {
		ap = gate.New(rg, now)
		ap.ResolveStable(plan.Members)
	}
	av := ap.View()
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
		// Only budget.Acquire writes the hold: carried over as written.
		Disruption: old.Disruption.DeepCopy(),
		Hooks:      old.Hooks.DeepCopy(),
		// Only the notifier writes status.notifications (keepHold).
		Notifications: old.Notifications.DeepCopy(),
		// Only the volume resizer writes status.volumeResize (keepHold).
		VolumeResize: old.VolumeResize.DeepCopy(),
		RolloutID:    rg.Spec.RolloutID,
		Conditions:   append([]metav1.Condition(nil), old.Conditions...),
	}
	for _, m := range plan.Members {
		st.StatefulSets = append(st.StatefulSets, v1alpha1.MemberStatus{
			Name:               m.Name,
			Replicas:           m.Replicas,
			ReadyReplicas:      m.Ready,
			AvailableReplicas:  m.Available,
			UpdatedReplicas:    m.Updated,
			MaxUnavailable:     m.MaxUnavailable,
			MaxUnavailableFrom: m.MaxUnavailableFrom,
			CurrentRevision:    m.CurrentRevision,
			UpdateRevision:     m.UpdateRevision,
			StableRevision:     ap.StableRevision(m.Name),
			GatePassedRevision: ap.GatePassedRevision(m.Name),
			Phase:              m.Phase,
			Message:            m.Message,
			Partition:          partitionOf(m),
		})
		st.Replicas += m.Replicas
		st.UpdatedReplicas += m.Updated
		st.AvailableReplicas += m.Available
	}
	st.Updated = fmt.Sprintf("%d/%d", st.UpdatedReplicas, st.Replicas)
	ts := metav1.NewTime(now)
	var up statusUpdate

	rolloutOpen := lookup.RolloutOpen(old)
	if !rolloutOpen && plan.Settled && plan.ToRoll > 0 && plan.Blocked == nil && !rg.Spec.Paused && av.Phase != v1alpha1.PhaseFailed {
		st.RolloutStartTime, st.RolloutCompletionTime = &ts, nil
		st.LastProgressTime, st.PodsRolled = &ts, 0
		rolloutOpen, up.rolloutStarted = true, true
		for i := range st.StatefulSets {
			st.StatefulSets[i].GatePassedRevision = ""
		}
	}
	switch {
	case rolloutOpen && plan.Complete && !av.Holding && plan.GateDue == "":
		st.RolloutCompletionTime = &ts
		rolloutOpen, up.rolloutCompleted = false, true
	case rolloutOpen && av.RolledBack:
		st.RolloutCompletionTime = &ts
		rolloutOpen, up.rolledBack = false, true
	}
	// Between rollouts a whole member's stable revision is its update revision;
	// during one it stays what the pods ran when it began.
	for i, m := range plan.Members {
		if !rolloutOpen && m.Whole() {
			st.StatefulSets[i].StableRevision = m.UpdateRevision
		}
	}
	st.Analysis = ap.Status()
	st.Step = stepStatus(rg, plan.Step, up.rolloutStarted)
	if acted.deleted > 0 {
		if !plan.Rotation {
			st.PodsRolled += acted.deleted
		}
		st.LastBatchTime = &ts
	}
	// A rotation is reported, paced and watched for progress as a rollout.
	rotationOpen := trackRotation(&st, &up, rg, plan, now)
	if open := rolloutOpen || rotationOpen; open && (madeProgress(rg, plan, acted, st) || av.Phase == v1alpha1.PhaseAnalyzing || waitsAtStep(plan)) {
		st.LastProgressTime = &ts
	}
	if acted.refused != "" {
		st.Message = plan.Message + "; " + acted.refused
	}

	stalled := false
	if deadline := progressDeadline(rg); (rolloutOpen || rotationOpen) && deadline > 0 && !rg.Spec.Paused && plan.Blocked == nil && av.Phase == "" && st.LastProgressTime != nil {
		sinceProgress := now.Sub(st.LastProgressTime.Time)
		if sinceProgress >= deadline {
			stalled = true
			st.Message = fmt.Sprintf("no progress for %s (progressDeadline %s): %s", sinceProgress.Round(time.Second), deadline, st.Message)
		} else {
			up.recheckAfter = deadline - sinceProgress
		}
	}

	sum := summarize(plan, acted, rg.Spec.Paused, rolloutOpen || rotationOpen, stalled, av)
	st.Phase = sum.phase
	switch {
	case sum.phase == v1alpha1.PhaseFailed || sum.phase == v1alpha1.PhaseAnalyzing:
		st.Message = av.Message
	case av.RollingBack:
		st.Message = "rolling back: " + st.Message
	}
	up.stalledNow = stalled && old.Phase != v1alpha1.PhaseStalled
	setConditions(&st, rg, sum)
	up.status = st
	return up
}

// madeProgress reports whether this pass counts as progress for
// progressDeadline. As for a Deployment: a pod deleted, updated or becoming
// available; the spec changing; the group resuming or being unblocked. Waiting
// out batchInterval is progress too: the wait is what the user asked for.
func madeProgress(rg *v1alpha1.RolloutGroup, plan rollout.Plan, acted actionResult, st v1alpha1.RolloutGroupStatus) bool {
	old := rg.Status
	return acted.deleted > 0 ||
		st.UpdatedReplicas != old.UpdatedReplicas || st.AvailableReplicas != old.AvailableReplicas ||
		computedGeneration(old) != rg.Generation ||
		old.Phase == v1alpha1.PhasePaused || old.Phase == v1alpha1.PhaseBlocked || old.Phase == v1alpha1.PhaseFailed ||
		plan.Reason == v1alpha1.ReasonWaitingForBatchInterval
}

// computedGeneration is the generation st was computed from. After a failed
// pass status.observedGeneration stays at the last successful one, while the
// conditions carry the generation the pass computed them from: a spec change
// is progress once, not again at every pass that fails on it.
func computedGeneration(st v1alpha1.RolloutGroupStatus) int64 {
	gen := st.ObservedGeneration
	for _, c := range st.Conditions {
		gen = max(gen, c.ObservedGeneration)
	}
	return gen
}

// progressDeadline is spec.progressDeadline; 0 disables it.
func progressDeadline(rg *v1alpha1.RolloutGroup) time.Duration {
	if rg.Spec.ProgressDeadline == nil {
		return defaultProgressDeadline
	}
	return rg.Spec.ProgressDeadline.Duration
}

// summary is one row of the table that decides the phase and the Ready and
// Progressing conditions together, so that they cannot disagree.
type summary struct {
	phase       v1alpha1.RolloutPhase
	ready       metav1.ConditionStatus
	progressing metav1.ConditionStatus
	reason      string
}

// summarize is that table. Rows are tried in order; the first that applies wins.
//
//	blocked                        -> Blocked      Ready=False  Progressing=False  (blocker's reason)
//	failed (gate, abort, restore)  -> Failed       Ready=False  Progressing=False  AnalysisFailed / AnalysisError / Aborted / RollbackFailed
//	paused with pods to roll       -> Paused       Ready=False  Progressing=False  Paused
//	rolling back                   -> Progressing  Ready=False  Progressing=True   RollingBack
//	analysis gate started          -> Analyzing    Ready=False  Progressing=True   WaitingForAnalysis / Soaking
//	rollout open, deadline passed  -> Stalled      Ready=False  Progressing=False  ProgressDeadlineExceeded
//	rollout open                   -> Progressing  Ready=False  Progressing=True   (what the rollout does)
//	every pod updated, available   -> Complete     Ready=True   Progressing=False  UpToDate
//	otherwise                      -> Waiting      Ready=False  Progressing=False  PodsUnavailable / WaitingForStatefulSet
func summarize(plan rollout.Plan, acted actionResult, paused, rolloutOpen, stalled bool, av gate.View) summary {
	f, t := metav1.ConditionFalse, metav1.ConditionTrue
	switch {
	case plan.Blocked != nil:
		return summary{v1alpha1.PhaseBlocked, f, f, plan.Blocked.Reason}
	case av.Phase == v1alpha1.PhaseFailed:
		return summary{v1alpha1.PhaseFailed, f, f, av.Reason}
	case paused && (rolloutOpen || plan.ToRoll > 0):
		return summary{v1alpha1.PhasePaused, f, f, v1alpha1.ReasonPaused}
	case av.RollingBack:
		return summary{v1alpha1.PhaseProgressing, f, t, v1alpha1.ReasonRollingBack}
	case av.Phase == v1alpha1.PhaseAnalyzing:
		return summary{v1alpha1.PhaseAnalyzing, f, t, av.Reason}
	case rolloutOpen && stalled:
		return summary{v1alpha1.PhaseStalled, f, f, v1alpha1.ReasonProgressDeadlineExceeded}
	case rolloutOpen:
		reason := plan.Reason
		if acted.refused != "" {
			reason = v1alpha1.ReasonEvictionRefused
		}
		return summary{v1alpha1.PhaseProgressing, f, t, reason}
	case plan.Complete:
		return summary{v1alpha1.PhaseComplete, t, f, v1alpha1.ReasonUpToDate}
	case !plan.Settled:
		return summary{v1alpha1.PhaseWaiting, f, f, v1alpha1.ReasonWaitingForStatefulSet}
	default:
		return summary{v1alpha1.PhaseWaiting, f, f, v1alpha1.ReasonPodsUnavailable}
	}
}

// setConditions writes Ready and Progressing from the summary, and Paused from the spec.
func setConditions(st *v1alpha1.RolloutGroupStatus, rg *v1alpha1.RolloutGroup, sum summary) {
	gen := rg.Generation
	set := func(t string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: t, Status: status, Reason: reason, Message: msg, ObservedGeneration: gen,
		})
	}
	set(v1alpha1.ConditionReady, sum.ready, sum.reason, st.Message)
	set(v1alpha1.ConditionProgressing, sum.progressing, sum.reason, st.Message)
	if rg.Spec.Paused {
		set(v1alpha1.ConditionPaused, metav1.ConditionTrue, v1alpha1.ReasonPaused, "spec.paused is true: no pod is deleted")
	} else {
		set(v1alpha1.ConditionPaused, metav1.ConditionFalse, v1alpha1.ReasonNotPaused, "spec.paused is false")
	}
}

// partitionOf is the partition a RollingUpdate member holds, nil for OnDelete.
func partitionOf(m rollout.MemberState) *int32 {
	if !m.Partitioned {
		return nil
	}
	p := m.Partition
	return &p
}

// waitsAtStep reports whether the rollout waits at a step of spec.steps for
// its pause or a promote: waiting by design, which is no stall.
func waitsAtStep(plan rollout.Plan) bool {
	return plan.Step != nil && (plan.Step.WaitingFor == v1alpha1.StepWaitPromote || plan.Step.WaitingFor == v1alpha1.StepWaitDuration)
}
