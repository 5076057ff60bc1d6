package scalingpolicy

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/scaling"
)

// computeStatus derives a policy's status from the old one, the plan,
// what was done and the target's selector. It has no client.
//
// scaled is true when this pass patched the target's replicas as planned. A
// downscale records lastDownscaleTime, which the zone delay of the other
// members' policies counts from. waitingSince marks when a due scale started
// to wait, so the wait can be measured when the scale is finally made.
//
// scaledAt is when the scale was made (after the patch); a downscale records it
// so the other zones' delay counts from the moment the StatefulSet changed.
func computeStatus(sp *v1alpha1.ScalingPolicy, in scaling.Input, plan scaling.Plan, scaled bool, selector string, now, scaledAt time.Time) v1alpha1.ScalingPolicyStatus {
	old := sp.Status
	st := v1alpha1.ScalingPolicyStatus{
		ObservedGeneration: sp.Generation,
		Phase:              plan.Phase,
		Message:            plan.Message,
		Replicas:           plan.Current,
		DesiredReplicas:    plan.Desired,
		SourceReplicas:     in.Source.Replicas,
		Source:             sourceDisplay(sp, in),
		Selector:           selector,
		LastDownscaleTime:  old.LastDownscaleTime,
		PendingDownscale:   old.PendingDownscale, // the prepare-downscale webhook's, settled by it
		PendingCancels:     old.PendingCancels,   // the same
		WaitingSince:       old.WaitingSince,
		Notifications:      old.Notifications.DeepCopy(), // the notifier's
		Conditions:         append([]metav1.Condition(nil), old.Conditions...),
	}
	ts := metav1.NewTime(now)
	if scaled {
		st.Replicas = *plan.Scale
		if *plan.Scale < plan.Current {
			at := metav1.NewMicroTime(scaledAt)
			st.LastDownscaleTime = &at
		}
	}
	switch {
	case plan.Phase != v1alpha1.ScalingPhaseWaiting:
		st.WaitingSince = nil
	case st.WaitingSince == nil:
		st.WaitingSince = &ts
	}
	if !plan.WaitingUntil.IsZero() {
		until := metav1.NewMicroTime(plan.WaitingUntil)
		st.WaitingUntil = &until
	}

	ready, scaling := metav1.ConditionFalse, metav1.ConditionFalse
	switch plan.Phase {
	case v1alpha1.ScalingPhaseStable:
		ready = metav1.ConditionTrue
	case v1alpha1.ScalingPhaseScalingUp, v1alpha1.ScalingPhaseScalingDown, v1alpha1.ScalingPhaseWaiting:
		scaling = metav1.ConditionTrue
	}
	for _, c := range []metav1.Condition{
		{Type: v1alpha1.ScalingConditionReady, Status: ready},
		{Type: v1alpha1.ScalingConditionScaling, Status: scaling},
	} {
		c.Reason, c.Message, c.ObservedGeneration = plan.Reason, plan.Message, sp.Generation
		meta.SetStatusCondition(&st.Conditions, c)
	}
	return st
}

// sourceDisplay names the source for the Source printer column.
func sourceDisplay(sp *v1alpha1.ScalingPolicy, in scaling.Input) string {
	switch {
	case sp.Spec.ForceReplicas != nil:
		return "forced"
	case in.Source.Kind == scaling.SourceSelf:
		return "self"
	default:
		return in.Source.Name
	}
}
