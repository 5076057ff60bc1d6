package delayeddownscale

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/delayed"
)

func TestComputeStatus(t *testing.T) {
	now := time.Date(2026, time.August, 1, 9, 0, 0, 0, time.UTC)
	dd := &v1alpha1.DelayedDownscale{ObjectMeta: metav1.ObjectMeta{Name: "ing", Generation: 3}}
	pending := observation{in: delayed.Input{Now: now, Delay: time.Hour, Desired: ptr.To[int32](2), Current: 4}}
	prepared := []delayed.Record{{Name: "ing-3", PreparedAt: now.Add(-2 * time.Hour)}, {Name: "ing-2", PreparedAt: now.Add(-time.Minute)}}
	tests := []struct {
		name         string
		obs          observation
		plan         delayed.Plan
		wantPhase    v1alpha1.DelayedDownscalePhase
		wantReason   string
		wantReady    metav1.ConditionStatus
		wantPrepared int32
		wantMessage  string
	}{{
		name:      "no downscale pending: Idle and Ready",
		obs:       observation{in: delayed.Input{Now: now, Desired: ptr.To[int32](4), Current: 4}},
		wantPhase: v1alpha1.DelayedPhaseIdle, wantReason: v1alpha1.DelayedReasonIdle, wantReady: metav1.ConditionTrue,
		wantMessage: "no downscale pending",
	}, {
		name:      "some pods eligible: ScalingDown to the eligible replicas",
		obs:       pending,
		plan:      delayed.Plan{Pending: true, Records: prepared, Eligible: ptr.To[int32](3), EarliestEligible: now.Add(59 * time.Minute)},
		wantPhase: v1alpha1.DelayedPhaseScalingDown, wantReason: v1alpha1.DelayedReasonEligible, wantReady: metav1.ConditionFalse,
		wantPrepared: 2, wantMessage: "may shrink from 4 to 3",
	}, {
		name: "every pod prepared, none eligible yet: Waiting until the first is",
		obs:  pending,
		plan: delayed.Plan{Pending: true, Records: []delayed.Record{{Name: "ing-3", PreparedAt: now}, {Name: "ing-2", PreparedAt: now}},
			Eligible: ptr.To[int32](4), EarliestEligible: now.Add(time.Hour)},
		wantPhase: v1alpha1.DelayedPhaseWaiting, wantReason: v1alpha1.DelayedReasonWaiting, wantReady: metav1.ConditionFalse,
		wantPrepared: 2, wantMessage: "the first is eligible at 2026-08-01T10:00:00Z",
	}, {
		name: "a pod in error: Blocked, naming it",
		obs:  pending,
		plan: delayed.Plan{Pending: true, Records: []delayed.Record{{Name: "ing-3", Err: "POST answered 500"}, prepared[1]},
			Eligible: ptr.To[int32](4), Errors: []string{"ing-3: POST answered 500"}},
		wantPhase: v1alpha1.DelayedPhaseBlocked, wantReason: v1alpha1.DelayedReasonPodErrors, wantReady: metav1.ConditionFalse,
		wantPrepared: 1, wantMessage: "ing-3: POST answered 500",
	}, {
		name:      "a failed cancel: Idle, saying which pod may still be prepared and when it is told again",
		obs:       observation{in: delayed.Input{Now: now, Desired: ptr.To[int32](4), Current: 4}},
		plan:      delayed.Plan{Cancelling: []delayed.CancelRetry{{Name: "ing-3", UID: "u3", Attempts: 2, Err: "DELETE answered 503", Next: now.Add(20 * time.Second)}}},
		wantPhase: v1alpha1.DelayedPhaseIdle, wantReason: v1alpha1.DelayedReasonIdle, wantReady: metav1.ConditionTrue,
		wantMessage: "cancelling the preparation failed, told again with backoff: ing-3 (2 failed, next at 2026-08-01T09:00:20Z: DELETE answered 503)",
	}, {
		name: "no ScalingPolicy: Blocked, the last records kept",
		obs: observation{in: delayed.Input{Now: now, Current: 4},
			problem: "no ScalingPolicy targets StatefulSet ing", problemReason: v1alpha1.DelayedReasonNoScalingPolicy},
		wantPhase: v1alpha1.DelayedPhaseBlocked, wantReason: v1alpha1.DelayedReasonNoScalingPolicy, wantReady: metav1.ConditionFalse,
		wantMessage: "no ScalingPolicy targets StatefulSet ing",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := computeStatus(dd, tt.obs, tt.plan)
			if st.Phase != tt.wantPhase || st.ObservedGeneration != 3 || st.PreparedCount != tt.wantPrepared || !strings.Contains(st.Message, tt.wantMessage) {
				t.Errorf("phase %s generation %d prepared %d message %q; want %s 3 %d %q", st.Phase, st.ObservedGeneration, st.PreparedCount, st.Message,
					tt.wantPhase, tt.wantPrepared, tt.wantMessage)
			}
			c := meta.FindStatusCondition(st.Conditions, v1alpha1.DelayedConditionReady)
			if c == nil || c.Status != tt.wantReady || c.Reason != tt.wantReason || c.ObservedGeneration != 3 {
				t.Errorf("Ready = %+v, want %s with reason %s", c, tt.wantReady, tt.wantReason)
			}
			if len(st.CancellingPods) != len(tt.plan.Cancelling) {
				t.Errorf("cancellingPods %+v, want one a retry of %+v", st.CancellingPods, tt.plan.Cancelling)
			}
			for _, p := range st.PreparedPods {
				if p.Error == "" && (p.PreparedAt == nil || p.EligibleAt == nil || p.EligibleAt.Sub(p.PreparedAt.Time) != tt.obs.in.Delay) {
					t.Errorf("prepared pod %+v: want preparedAt and eligibleAt one delay apart", p)
				}
			}
		})
	}
}
