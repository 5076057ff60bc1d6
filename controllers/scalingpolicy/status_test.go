package scalingpolicy

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/scaling"
)

func TestComputeStatus(t *testing.T) {
	now := time.Date(2026, time.August, 1, 9, 0, 0, 0, time.UTC)
	sp := &v1alpha1.ScalingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "zone-b", Generation: 2}}
	in := scaling.Input{Source: scaling.Source{Kind: scaling.SourceLeader, Name: "leader zone-a", Replicas: ptr.To[int32](3)}}
	tests := []struct {
		name          string
		plan          scaling.Plan
		scaled        bool
		old           v1alpha1.ScalingPolicyStatus
		wantReady     metav1.ConditionStatus
		wantScaling   metav1.ConditionStatus
		wantReplicas  int32
		wantDownscale bool
		wantWaiting   bool
	}{{
		name:      "stable: Ready, not scaling",
		plan:      scaling.Plan{Phase: v1alpha1.ScalingPhaseStable, Reason: v1alpha1.ScalingReasonAtDesiredReplicas, Current: 3, Desired: ptr.To[int32](3)},
		wantReady: metav1.ConditionTrue, wantScaling: metav1.ConditionFalse, wantReplicas: 3,
	}, {
		name:   "a downscale made records when, after the patch",
		plan:   scaling.Plan{Phase: v1alpha1.ScalingPhaseScalingDown, Reason: v1alpha1.ScalingReasonScaledDown, Current: 5, Desired: ptr.To[int32](3), Scale: ptr.To[int32](3)},
		scaled: true, wantReady: metav1.ConditionFalse, wantScaling: metav1.ConditionTrue, wantReplicas: 3, wantDownscale: true,
	}, {
		name:   "an upscale made records no downscale",
		plan:   scaling.Plan{Phase: v1alpha1.ScalingPhaseScalingUp, Reason: v1alpha1.ScalingReasonScaledUp, Current: 3, Desired: ptr.To[int32](5), Scale: ptr.To[int32](5)},
		scaled: true, wantReady: metav1.ConditionFalse, wantScaling: metav1.ConditionTrue, wantReplicas: 5,
	}, {
		name:      "a planned downscale that was not made keeps the current replicas",
		plan:      scaling.Plan{Phase: v1alpha1.ScalingPhaseScalingDown, Reason: v1alpha1.ScalingReasonScaledDown, Current: 5, Desired: ptr.To[int32](3), Scale: ptr.To[int32](3)},
		wantReady: metav1.ConditionFalse, wantScaling: metav1.ConditionTrue, wantReplicas: 5,
	}, {
		name: "waiting: scaling due, waitingUntil and waitingSince set",
		plan: scaling.Plan{Phase: v1alpha1.ScalingPhaseWaiting, Reason: v1alpha1.ScalingReasonZoneDelay, Current: 5, Desired: ptr.To[int32](3),
			WaitingUntil: now.Add(time.Hour)},
		wantReady: metav1.ConditionFalse, wantScaling: metav1.ConditionTrue, wantReplicas: 5, wantWaiting: true,
	}, {
		name:      "blocked: neither Ready nor scaling",
		plan:      scaling.Plan{Phase: v1alpha1.ScalingPhaseBlocked, Reason: v1alpha1.ScalingReasonSourceNotFound, Current: 5},
		wantReady: metav1.ConditionFalse, wantScaling: metav1.ConditionFalse, wantReplicas: 5,
	}, {
		name:      "paused: neither Ready nor scaling",
		plan:      scaling.Plan{Phase: v1alpha1.ScalingPhasePaused, Reason: v1alpha1.ScalingReasonPaused, Current: 5, Desired: ptr.To[int32](3)},
		wantReady: metav1.ConditionFalse, wantScaling: metav1.ConditionFalse, wantReplicas: 5,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := sp.DeepCopy()
			p.Status = tt.old
			scaledAt := now.Add(150 * time.Millisecond)
			st := computeStatus(p, in, tt.plan, tt.scaled, "app=zone-b", now, scaledAt)
			if st.ObservedGeneration != 2 || st.Phase != tt.plan.Phase || st.Replicas != tt.wantReplicas || st.Selector != "app=zone-b" || st.Source != "leader zone-a" {
				t.Errorf("status %+v", st)
			}
			for typ, want := range map[string]metav1.ConditionStatus{v1alpha1.ScalingConditionReady: tt.wantReady, v1alpha1.ScalingConditionScaling: tt.wantScaling} {
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil || c.Status != want || c.Reason != tt.plan.Reason || c.ObservedGeneration != 2 {
					t.Errorf("condition %s = %+v, want %s with reason %s", typ, c, want, tt.plan.Reason)
				}
			}
			if got := st.LastDownscaleTime != nil && st.LastDownscaleTime.Time.Equal(scaledAt); got != tt.wantDownscale {
				t.Errorf("lastDownscaleTime = %v, want it at %s: %v", st.LastDownscaleTime, scaledAt, tt.wantDownscale)
			}
			if (st.WaitingSince != nil) != tt.wantWaiting || (st.WaitingUntil != nil) != tt.wantWaiting {
				t.Errorf("waitingSince %v waitingUntil %v, want set: %v", st.WaitingSince, st.WaitingUntil, tt.wantWaiting)
			}
		})
	}

	// A wait keeps its start across passes.
	since := metav1.NewTime(now.Add(-time.Hour))
	p := sp.DeepCopy()
	p.Status.WaitingSince = &since
	st := computeStatus(p, in, scaling.Plan{Phase: v1alpha1.ScalingPhaseWaiting, Reason: v1alpha1.ScalingReasonRollout, Current: 5}, false, "", now, now)
	if st.WaitingSince == nil || !st.WaitingSince.Equal(&since) {
		t.Errorf("waitingSince = %v, want kept at %s", st.WaitingSince, since)
	}
	if src := computeStatus(&v1alpha1.ScalingPolicy{Spec: v1alpha1.ScalingPolicySpec{ForceReplicas: ptr.To[int32](1)}}, in, scaling.Plan{}, false, "", now, now).Source; src != "forced" {
		t.Errorf("source with forceReplicas = %q, want forced", src)
	}
}

// TestComputeStatusKeepsPendingDownscale: status.pendingDownscale is the
// prepare-downscale webhook's provisional record, settled by the webhook's
// controller; the ScalingPolicy controller's status carries it over, or its
// next patch would drop it and leave prepared pods never cancelled.
func TestComputeStatusKeepsPendingDownscale(t *testing.T) {
	now := time.Date(2026, time.August, 1, 9, 0, 0, 0, time.UTC)
	pending := &v1alpha1.PendingDownscale{Replicas: 3, AdmittedAt: metav1.NewMicroTime(now), Deadline: metav1.NewMicroTime(now.Add(20 * time.Second)),
		Pods: []v1alpha1.PendingPod{{Name: "zone-b-3", URL: "http://10.0.0.3:8080/prepare"}}}
	sp := &v1alpha1.ScalingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "zone-b", Generation: 2},
		Status: v1alpha1.ScalingPolicyStatus{PendingDownscale: pending}}
	plan := scaling.Plan{Phase: v1alpha1.ScalingPhaseBlocked, Reason: v1alpha1.ScalingReasonGuardOnly, Current: 5}
	st := computeStatus(sp, scaling.Input{}, plan, false, "", now, now)
	if st.PendingDownscale == nil || st.PendingDownscale.Replicas != 3 || len(st.PendingDownscale.Pods) != 1 {
		t.Errorf("pendingDownscale %+v, want the webhook's record %+v kept", st.PendingDownscale, pending)
	}
}
