package delayeddownscale

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/delayed"
)

// computeStatus derives a DelayedDownscale's status from the plan. It
// has no client.
func computeStatus(dd *v1alpha1.DelayedDownscale, obs observation, plan delayed.Plan) v1alpha1.DelayedDownscaleStatus {
	in := obs.in
	st := v1alpha1.DelayedDownscaleStatus{
		ObservedGeneration: dd.Generation,
		DesiredReplicas:    in.Desired,
		Replicas:           in.Current,
		EligibleReplicas:   plan.Eligible,
		Notifications:      dd.Status.Notifications.DeepCopy(), // the notifier's
		Conditions:         append([]metav1.Condition(nil), dd.Status.Conditions...),
	}
	for _, r := range plan.Records {
		p := v1alpha1.PreparedPod{Name: r.Name, UID: r.UID, Error: r.Err}
		if r.Err == "" && !r.PreparedAt.IsZero() {
			at, eligible := metav1.NewTime(r.PreparedAt), metav1.NewTime(r.PreparedAt.Add(in.Delay))
			p.PreparedAt, p.EligibleAt = &at, &eligible
			st.PreparedCount++
		}
		st.PreparedPods = append(st.PreparedPods, p)
	}
	if !plan.EarliestEligible.IsZero() {
		t := metav1.NewTime(plan.EarliestEligible)
		st.EarliestDownscaleTime = &t
	}
	for _, c := range plan.Cancelling {
		next := metav1.NewTime(c.Next)
		st.CancellingPods = append(st.CancellingPods, v1alpha1.CancellingPod{Name: c.Name, UID: c.UID, Attempts: c.Attempts,
			Error: truncate(c.Err, maxCancelError), NextAttemptTime: &next})
	}

	ready, reason := metav1.ConditionFalse, ""
	switch {
	case obs.problem != "":
		st.Phase, reason, st.Message = v1alpha1.DelayedPhaseBlocked, obs.problemReason, "blocked: "+obs.problem+"; no replica is removed"
		st.PreparedPods, st.PreparedCount, st.EligibleReplicas = dd.Status.PreparedPods, dd.Status.PreparedCount, nil
		st.CancellingPods = dd.Status.CancellingPods
	case !plan.Pending:
		st.Phase, reason, ready = v1alpha1.DelayedPhaseIdle, v1alpha1.DelayedReasonIdle, metav1.ConditionTrue
		st.Message = fmt.Sprintf("no downscale pending (%d replicas)", in.Current)
	case len(plan.Errors) > 0:
		st.Phase, reason = v1alpha1.DelayedPhaseBlocked, v1alpha1.DelayedReasonPodErrors
		st.Message = fmt.Sprintf("holding the downscale to %d at %d replicas: %s; retried every %s", *in.Desired, *plan.Eligible, plan.Summary(), delayed.RetryAfterError)
	case *plan.Eligible < in.Current:
		st.Phase, reason = v1alpha1.DelayedPhaseScalingDown, v1alpha1.DelayedReasonEligible
		st.Message = fmt.Sprintf("the StatefulSet may shrink from %d to %d: those pods have been prepared for %s", in.Current, *plan.Eligible, in.Delay)
		if st.EarliestDownscaleTime != nil {
			st.Message += fmt.Sprintf("; the next pod is eligible at %s", st.EarliestDownscaleTime.UTC().Format(time.RFC3339))
		}
	case st.PreparedCount == int32(len(plan.Records)):
		st.Phase, reason = v1alpha1.DelayedPhaseWaiting, v1alpha1.DelayedReasonWaiting
		st.Message = fmt.Sprintf("%d pods prepared for the downscale from %d to %d; the first is eligible at %s",
			st.PreparedCount, in.Current, *in.Desired, plan.EarliestEligible.UTC().Format(time.RFC3339))
	default:
		st.Phase, reason = v1alpha1.DelayedPhasePreparing, v1alpha1.DelayedReasonPreparing
		st.Message = fmt.Sprintf("preparing %d pods for the downscale from %d to %d", len(plan.Records), in.Current, *in.Desired)
	}
	if len(plan.Cancelling) > 0 {
		st.Message += "; " + cancellingSummary(plan.Cancelling)
	}
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{
		Type: v1alpha1.DelayedConditionReady, Status: ready, Reason: reason, Message: st.Message, ObservedGeneration: dd.Generation,
	})
	return st
}

// maxCancelError bounds status.cancellingPods[].error (its CRD limit).
const maxCancelError = 1024

// cancellingSummary says which pods may still be prepared, for the message.
func cancellingSummary(retries []delayed.CancelRetry) string {
	parts := make([]string, 0, len(retries))
	for _, c := range retries {
		parts = append(parts, fmt.Sprintf("%s (%d failed, next at %s: %s)", c.Name, c.Attempts, c.Next.UTC().Format(time.RFC3339), c.Err))
	}
	return "cancelling the preparation failed, told again with backoff: " + strings.Join(parts, ", ")
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}
