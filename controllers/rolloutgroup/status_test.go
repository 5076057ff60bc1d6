package rolloutgroup

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/analysis"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/internal/rollout/gate"
	"github.com/echelon-operator/echelon/internal/rollout/gate/gatetest"
)

var statusNow = time.Date(2026, time.May, 4, 10, 0, 0, 0, time.UTC)

func ago(d time.Duration) *metav1.Time {
	t := metav1.NewTime(statusNow.Add(-d))
	return &t
}

func member(name string, replicas, updated, available int32, phase v1alpha1.MemberPhase) rollout.MemberState {
	return rollout.MemberState{Name: name, Replicas: replicas, Updated: updated, Available: available, Ready: available,
		MaxUnavailable: 1, UpdateRevision: "r2", CurrentRevision: "r1", Phase: phase}
}

func group(mutate func(*v1alpha1.RolloutGroup)) *v1alpha1.RolloutGroup {
	rg := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Name: "ingester", Namespace: "mimir", Generation: 3}}
	if mutate != nil {
		mutate(rg)
	}
	return rg
}

// openRollout is a group whose rollout started 10 minutes ago and last
// progressed at lastProgress ago.
func openRollout(lastProgress time.Duration) func(*v1alpha1.RolloutGroup) {
	return func(rg *v1alpha1.RolloutGroup) {
		rg.Status.ObservedGeneration = rg.Generation
		rg.Status.Phase = v1alpha1.PhaseProgressing
		rg.Status.RolloutStartTime = ago(10 * time.Minute)
		rg.Status.LastProgressTime = ago(lastProgress)
		rg.Status.UpdatedReplicas = 4
		rg.Status.AvailableReplicas = 5
	}
}

func TestComputeStatusPhasesAndConditions(t *testing.T) {
	rolling := rollout.Plan{
		Current: "a", Message: "a: 4/6 updated, deleting 1 pods", Reason: v1alpha1.ReasonDeletingPods, Settled: true, ToRoll: 2,
		Members: []rollout.MemberState{member("a", 3, 1, 2, v1alpha1.MemberRolling), member("b", 3, 3, 3, v1alpha1.MemberComplete)},
	}
	waitingForPods := rollout.Plan{
		Current: "a", Message: "a: 5/5 updated, waiting: 1/5 pods not available", Reason: v1alpha1.ReasonWaitingForPods, Settled: true,
		Members: []rollout.MemberState{member("a", 5, 4, 4, v1alpha1.MemberWaiting)},
	}
	complete := rollout.Plan{
		Complete: true, Message: "all members updated and available", Reason: v1alpha1.ReasonUpToDate, Settled: true,
		Members: []rollout.MemberState{member("a", 3, 3, 3, v1alpha1.MemberComplete), member("b", 3, 3, 3, v1alpha1.MemberComplete)},
	}
	blocked := rollout.Plan{
		Blocked: &rollout.Blocker{Reason: v1alpha1.ReasonUnsupportedStrategy, Member: "b", Message: "blocked: StatefulSet b uses updateStrategy Canary"},
		Message: "blocked: StatefulSet b uses updateStrategy Canary", Reason: v1alpha1.ReasonUnsupportedStrategy, ToRoll: 5,
		Members: []rollout.MemberState{member("a", 3, 1, 3, v1alpha1.MemberPending), member("b", 3, 0, 3, v1alpha1.MemberBlocked)},
	}
	// A scale-up, or a pod lost to a node failure: every pod runs the update
	// revision, one is not available.
	scaledUp := rollout.Plan{
		Current: "b", Message: "b: 4/4 updated, waiting: 1/4 pods not available", Reason: v1alpha1.ReasonWaitingForPods, Settled: true,
		Members: []rollout.MemberState{member("a", 3, 3, 3, v1alpha1.MemberComplete), member("b", 4, 4, 3, v1alpha1.MemberWaiting)},
	}
	unsettled := rollout.Plan{
		Current: "a", Message: "a: waiting for the StatefulSet controller to observe generation 4", Reason: v1alpha1.ReasonWaitingForStatefulSet,
		Members: []rollout.MemberState{member("a", 3, 3, 3, v1alpha1.MemberWaiting)},
	}
	completeGroup := func(rg *v1alpha1.RolloutGroup) {
		rg.Status.ObservedGeneration = rg.Generation
		rg.Status.Phase = v1alpha1.PhaseComplete
		rg.Status.RolloutStartTime = ago(time.Hour)
		rg.Status.RolloutCompletionTime = ago(50 * time.Minute)
	}

	tests := []struct {
		name            string
		group           *v1alpha1.RolloutGroup
		plan            rollout.Plan
		acted           actionResult
		wantPhase       v1alpha1.RolloutPhase
		wantReady       metav1.ConditionStatus
		wantReadyReason string
		wantProgressing metav1.ConditionStatus
		wantProgReason  string
		wantPaused      metav1.ConditionStatus
		wantUpdated     string
	}{
		{
			name: "a group deleting a batch is Progressing, DeletingPods", group: group(openRollout(time.Minute)), plan: rolling,
			acted:     actionResult{deleted: 1},
			wantPhase: v1alpha1.PhaseProgressing, wantReady: metav1.ConditionFalse, wantReadyReason: v1alpha1.ReasonDeletingPods,
			wantProgressing: metav1.ConditionTrue, wantProgReason: v1alpha1.ReasonDeletingPods, wantPaused: metav1.ConditionFalse,
			wantUpdated: "4/6",
		},
		{
			name: "a rollout waiting for replaced pods says so, not RollingMember", group: group(openRollout(time.Minute)), plan: waitingForPods,
			wantPhase: v1alpha1.PhaseProgressing, wantReady: metav1.ConditionFalse, wantReadyReason: v1alpha1.ReasonWaitingForPods,
			wantProgressing: metav1.ConditionTrue, wantProgReason: v1alpha1.ReasonWaitingForPods, wantPaused: metav1.ConditionFalse,
			wantUpdated: "4/5",
		},
		{
			name: "complete group is Ready", group: group(openRollout(time.Minute)), plan: complete,
			wantPhase: v1alpha1.PhaseComplete, wantReady: metav1.ConditionTrue, wantReadyReason: v1alpha1.ReasonUpToDate,
			wantProgressing: metav1.ConditionFalse, wantProgReason: v1alpha1.ReasonUpToDate, wantPaused: metav1.ConditionFalse,
			wantUpdated: "6/6",
		},
		{
			name: "blocked group names the reason in both conditions", group: group(nil), plan: blocked,
			wantPhase: v1alpha1.PhaseBlocked, wantReady: metav1.ConditionFalse, wantReadyReason: v1alpha1.ReasonUnsupportedStrategy,
			wantProgressing: metav1.ConditionFalse, wantProgReason: v1alpha1.ReasonUnsupportedStrategy, wantPaused: metav1.ConditionFalse,
			wantUpdated: "1/6",
		},
		{
			name: "paused group with pods to roll reports Paused", plan: rolling,
			group:     group(func(rg *v1alpha1.RolloutGroup) { openRollout(time.Minute)(rg); rg.Spec.Paused = true }),
			wantPhase: v1alpha1.PhasePaused, wantReady: metav1.ConditionFalse, wantReadyReason: v1alpha1.ReasonPaused,
			wantProgressing: metav1.ConditionFalse, wantProgReason: v1alpha1.ReasonPaused, wantPaused: metav1.ConditionTrue,
			wantUpdated: "4/6",
		},
		{
			name: "paused group with nothing to roll is Complete and Ready, with Paused True", plan: complete,
			group:     group(func(rg *v1alpha1.RolloutGroup) { completeGroup(rg); rg.Spec.Paused = true }),
			wantPhase: v1alpha1.PhaseComplete, wantReady: metav1.ConditionTrue, wantReadyReason: v1alpha1.ReasonUpToDate,
			wantProgressing: metav1.ConditionFalse, wantProgReason: v1alpha1.ReasonUpToDate, wantPaused: metav1.ConditionTrue,
			wantUpdated: "6/6",
		},
		{
			name: "a scale-up outside a rollout is Waiting with PodsUnavailable, not Progressing", group: group(completeGroup), plan: scaledUp,
			wantPhase: v1alpha1.PhaseWaiting, wantReady: metav1.ConditionFalse, wantReadyReason: v1alpha1.ReasonPodsUnavailable,
			wantProgressing: metav1.ConditionFalse, wantProgReason: v1alpha1.ReasonPodsUnavailable, wantPaused: metav1.ConditionFalse,
			wantUpdated: "7/7",
		},
		{
			name: "a new group whose StatefulSet controller lags is Waiting for it", group: group(nil), plan: unsettled,
			wantPhase: v1alpha1.PhaseWaiting, wantReady: metav1.ConditionFalse, wantReadyReason: v1alpha1.ReasonWaitingForStatefulSet,
			wantProgressing: metav1.ConditionFalse, wantProgReason: v1alpha1.ReasonWaitingForStatefulSet, wantPaused: metav1.ConditionFalse,
			wantUpdated: "3/3",
		},
		{
			name: "an eviction refused shows as EvictionRefused", group: group(openRollout(time.Minute)), plan: rolling,
			acted:     actionResult{refused: "eviction of pod a-2 refused (PodDisruptionBudget)"},
			wantPhase: v1alpha1.PhaseProgressing, wantReady: metav1.ConditionFalse, wantReadyReason: v1alpha1.ReasonEvictionRefused,
			wantProgressing: metav1.ConditionTrue, wantProgReason: v1alpha1.ReasonEvictionRefused, wantPaused: metav1.ConditionFalse,
			wantUpdated: "4/6",
		},
		{
			name: "no progress past the default deadline is Stalled", group: group(openRollout(16 * time.Minute)),
			plan:      rollout.Plan{Current: "a", Message: "a: waiting", Reason: v1alpha1.ReasonWaitingForPods, Settled: true, Members: []rollout.MemberState{member("a", 5, 4, 5, v1alpha1.MemberRolling)}},
			wantPhase: v1alpha1.PhaseStalled, wantReady: metav1.ConditionFalse, wantReadyReason: v1alpha1.ReasonProgressDeadlineExceeded,
			wantProgressing: metav1.ConditionFalse, wantProgReason: v1alpha1.ReasonProgressDeadlineExceeded, wantPaused: metav1.ConditionFalse,
			wantUpdated: "4/5",
		},
		{
			name: "a custom progressDeadline not yet reached stays Progressing",
			group: group(func(rg *v1alpha1.RolloutGroup) {
				openRollout(16 * time.Minute)(rg)
				rg.Spec.ProgressDeadline = &metav1.Duration{Duration: time.Hour}
			}),
			plan:      rollout.Plan{Current: "a", Message: "a: waiting", Reason: v1alpha1.ReasonWaitingForPods, Settled: true, Members: []rollout.MemberState{member("a", 5, 4, 5, v1alpha1.MemberWaiting)}},
			wantPhase: v1alpha1.PhaseProgressing, wantReady: metav1.ConditionFalse, wantReadyReason: v1alpha1.ReasonWaitingForPods,
			wantProgressing: metav1.ConditionTrue, wantProgReason: v1alpha1.ReasonWaitingForPods, wantPaused: metav1.ConditionFalse,
			wantUpdated: "4/5",
		},
		{
			name: "progressDeadline 0s disables the deadline",
			group: group(func(rg *v1alpha1.RolloutGroup) {
				openRollout(48 * time.Hour)(rg)
				rg.Spec.ProgressDeadline = &metav1.Duration{}
			}),
			plan:      rollout.Plan{Current: "a", Message: "a: waiting", Reason: v1alpha1.ReasonWaitingForPods, Settled: true, Members: []rollout.MemberState{member("a", 5, 4, 5, v1alpha1.MemberWaiting)}},
			wantPhase: v1alpha1.PhaseProgressing, wantReady: metav1.ConditionFalse, wantReadyReason: v1alpha1.ReasonWaitingForPods,
			wantProgressing: metav1.ConditionTrue, wantProgReason: v1alpha1.ReasonWaitingForPods, wantPaused: metav1.ConditionFalse,
			wantUpdated: "4/5",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			up := computeStatus(tt.group, tt.plan, tt.acted, nil, statusNow)
			st := up.status
			if st.Phase != tt.wantPhase {
				t.Errorf("phase = %s, want %s (message %q)", st.Phase, tt.wantPhase, st.Message)
			}
			if st.Updated != tt.wantUpdated {
				t.Errorf("updated = %q, want %q", st.Updated, tt.wantUpdated)
			}
			if st.ObservedGeneration != 3 {
				t.Errorf("observedGeneration = %d, want 3", st.ObservedGeneration)
			}
			check := func(typ string, status metav1.ConditionStatus, reason string) {
				t.Helper()
				c := meta.FindStatusCondition(st.Conditions, typ)
				if c == nil {
					t.Fatalf("condition %s missing", typ)
				}
				if c.Status != status || (reason != "" && c.Reason != reason) {
					t.Errorf("condition %s = %s/%s, want %s/%s", typ, c.Status, c.Reason, status, reason)
				}
				if c.ObservedGeneration != 3 {
					t.Errorf("condition %s observedGeneration = %d, want 3", typ, c.ObservedGeneration)
				}
			}
			check(v1alpha1.ConditionReady, tt.wantReady, tt.wantReadyReason)
			check(v1alpha1.ConditionProgressing, tt.wantProgressing, tt.wantProgReason)
			check(v1alpha1.ConditionPaused, tt.wantPaused, "")
		})
	}
}

func TestComputeStatusRolloutLifecycle(t *testing.T) {
	outdated := rollout.Plan{Current: "a", Settled: true, ToRoll: 3, Reason: v1alpha1.ReasonDeletingPods,
		Members: []rollout.MemberState{member("a", 3, 0, 3, v1alpha1.MemberRolling)}}
	rg := group(func(rg *v1alpha1.RolloutGroup) {
		rg.Status.ObservedGeneration = rg.Generation
		rg.Status.Phase = v1alpha1.PhaseComplete
		rg.Status.RolloutStartTime = ago(time.Hour)
		rg.Status.RolloutCompletionTime = ago(50 * time.Minute)
		rg.Status.PodsRolled = 30
	})

	up := computeStatus(rg, outdated, actionResult{deleted: 1}, nil, statusNow)
	if !up.rolloutStarted {
		t.Fatal("a new update revision after a completed rollout must start a rollout")
	}
	if got := up.status.RolloutStartTime.Time; !got.Equal(statusNow) {
		t.Errorf("rolloutStartTime = %s, want now", got)
	}
	if up.status.PodsRolled != 1 {
		t.Errorf("podsRolled = %d, want 1 (reset at start, then the one deleted)", up.status.PodsRolled)
	}
	if up.status.LastBatchTime == nil || !up.status.LastBatchTime.Time.Equal(statusNow) {
		t.Errorf("lastBatchTime = %v, want now", up.status.LastBatchTime)
	}
	if up.recheckAfter != defaultProgressDeadline {
		t.Errorf("recheckAfter = %s, want the full progress deadline %s", up.recheckAfter, defaultProgressDeadline)
	}

	rg.Status = up.status
	later := statusNow.Add(3 * time.Minute)
	done := rollout.Plan{Complete: true, Settled: true, Reason: v1alpha1.ReasonUpToDate, Members: []rollout.MemberState{member("a", 3, 3, 3, v1alpha1.MemberComplete)}}
	up = computeStatus(rg, done, actionResult{}, nil, later)
	if !up.rolloutCompleted {
		t.Fatal("the rollout must complete when the plan is complete")
	}
	if got := up.status.RolloutCompletionTime.Sub(up.status.RolloutStartTime.Time); got != 3*time.Minute {
		t.Errorf("rollout lasted %s, want 3m", got)
	}
	if up.status.PodsRolled != 1 {
		t.Errorf("podsRolled = %d, want 1", up.status.PodsRolled)
	}

	rg.Status = up.status
	up = computeStatus(rg, done, actionResult{}, nil, later.Add(time.Minute))
	if up.rolloutStarted || up.rolloutCompleted {
		t.Error("a complete group with nothing to do must neither start nor complete a rollout")
	}
}

func TestComputeStatusProgressAndStall(t *testing.T) {
	plan := rollout.Plan{Current: "a", Settled: true, Reason: v1alpha1.ReasonWaitingForPods, Members: []rollout.MemberState{member("a", 5, 4, 5, v1alpha1.MemberWaiting)}}

	// Same counts as last time, deadline passed: stalled, and only once.
	rg := group(openRollout(20 * time.Minute))
	up := computeStatus(rg, plan, actionResult{}, nil, statusNow)
	if !up.stalledNow || up.status.Phase != v1alpha1.PhaseStalled {
		t.Fatalf("want a fresh stall, got phase %s stalledNow %v", up.status.Phase, up.stalledNow)
	}
	rg.Status = up.status
	if again := computeStatus(rg, plan, actionResult{}, nil, statusNow.Add(time.Second)); again.stalledNow {
		t.Error("a group already Stalled must not count a new stall")
	}

	// A pod became available: that is progress, the clock restarts.
	progressed := rollout.Plan{Current: "a", Settled: true, Reason: v1alpha1.ReasonWaitingForPods, Members: []rollout.MemberState{member("a", 5, 5, 5, v1alpha1.MemberWaiting)}}
	up = computeStatus(group(openRollout(20*time.Minute)), progressed, actionResult{}, nil, statusNow)
	if up.status.Phase != v1alpha1.PhaseProgressing || !up.status.LastProgressTime.Time.Equal(statusNow) {
		t.Errorf("progress must reset the stall clock: phase %s lastProgress %v", up.status.Phase, up.status.LastProgressTime)
	}

	// Paused groups never stall.
	paused := group(func(rg *v1alpha1.RolloutGroup) { openRollout(20 * time.Minute)(rg); rg.Spec.Paused = true })
	if up := computeStatus(paused, plan, actionResult{}, nil, statusNow); up.status.Phase != v1alpha1.PhasePaused || up.stalledNow {
		t.Errorf("paused group: phase %s stalledNow %v", up.status.Phase, up.stalledNow)
	}
}

// A spec change restarts the progress clock once. A pass that then fails
// keeps status.observedGeneration at the last successful pass (Reconcile);
// the passes after it, failing the same way, are not progress, and the group
// stalls at the deadline.
func TestComputeStatusFailingPassesAfterASpecChangeStall(t *testing.T) {
	plan := rollout.Plan{Current: "a", Settled: true, ToRoll: 1, Reason: v1alpha1.ReasonDeletingPods,
		Members: []rollout.MemberState{member("a", 5, 4, 5, v1alpha1.MemberRolling)}}
	rg := group(openRollout(20 * time.Minute))
	rg.Status.ObservedGeneration = rg.Generation - 1 // the spec just changed
	up := computeStatus(rg, plan, actionResult{}, nil, statusNow)
	if !up.status.LastProgressTime.Time.Equal(statusNow) {
		t.Fatalf("lastProgress %v after a spec change, want the clock restarted now", up.status.LastProgressTime)
	}
	for i := 1; i <= 4; i++ {
		up.status.ObservedGeneration = rg.Status.ObservedGeneration // the pass failed: Reconcile keeps it
		rg.Status = up.status
		up = computeStatus(rg, plan, actionResult{}, nil, statusNow.Add(time.Duration(i)*5*time.Minute))
	}
	if up.status.Phase != v1alpha1.PhaseStalled {
		t.Errorf("phase %s, lastProgress %v after 20 min of failing passes over the same spec: want Stalled (progressDeadline 15m)",
			up.status.Phase, up.status.LastProgressTime)
	}
}

func TestComputeStatusRefusedEvictionIsInTheMessage(t *testing.T) {
	plan := rollout.Plan{Current: "a", Message: "a: 0/3 updated, deleting 1 pods", Settled: true, ToRoll: 3, Members: []rollout.MemberState{member("a", 3, 0, 3, v1alpha1.MemberRolling)}}
	up := computeStatus(group(openRollout(time.Minute)), plan, actionResult{refused: "eviction of pod a-2 refused"}, nil, statusNow)
	if want := "a: 0/3 updated, deleting 1 pods; eviction of pod a-2 refused"; up.status.Message != want {
		t.Errorf("message = %q, want %q", up.status.Message, want)
	}
}

// TestComputeStatusNotARollout: pods that become available, appear or vanish
// without a new revision do not start a rollout, reset podsRolled or record a
// duration.
func TestComputeStatusNotARollout(t *testing.T) {
	rg := group(func(rg *v1alpha1.RolloutGroup) {
		rg.Status.ObservedGeneration = rg.Generation
		rg.Status.Phase = v1alpha1.PhaseComplete
		rg.Status.RolloutStartTime = ago(time.Hour)
		rg.Status.RolloutCompletionTime = ago(50 * time.Minute)
		rg.Status.PodsRolled = 30
	})
	scaledUp := rollout.Plan{Current: "a", Settled: true, Reason: v1alpha1.ReasonWaitingForPods,
		Members: []rollout.MemberState{member("a", 5, 5, 3, v1alpha1.MemberWaiting)}}
	up := computeStatus(rg, scaledUp, actionResult{}, nil, statusNow)
	if up.rolloutStarted || up.rolloutCompleted || up.status.PodsRolled != 30 || !up.status.RolloutStartTime.Equal(rg.Status.RolloutStartTime) {
		t.Errorf("a scale-up started=%v completed=%v podsRolled=%d start=%v: want no rollout and nothing reset",
			up.rolloutStarted, up.rolloutCompleted, up.status.PodsRolled, up.status.RolloutStartTime)
	}
	rg.Status = up.status
	done := rollout.Plan{Complete: true, Settled: true, Reason: v1alpha1.ReasonUpToDate, Members: []rollout.MemberState{member("a", 5, 5, 5, v1alpha1.MemberComplete)}}
	if up := computeStatus(rg, done, actionResult{}, nil, statusNow.Add(time.Minute)); up.rolloutCompleted || up.status.Phase != v1alpha1.PhaseComplete {
		t.Errorf("the scale-up finishing: completed=%v phase %s, want no rollout completing and Complete", up.rolloutCompleted, up.status.Phase)
	}

	// A paused group with a new revision does not start a rollout until resumed.
	paused := group(func(rg *v1alpha1.RolloutGroup) { rg.Spec.Paused = true })
	outdated := rollout.Plan{Current: "a", Settled: true, ToRoll: 3, Reason: v1alpha1.ReasonPaused, Members: []rollout.MemberState{member("a", 3, 0, 3, v1alpha1.MemberRolling)}}
	if up := computeStatus(paused, outdated, actionResult{}, nil, statusNow); up.rolloutStarted || up.status.Phase != v1alpha1.PhasePaused {
		t.Errorf("paused: started=%v phase %s, want no start and Paused", up.rolloutStarted, up.status.Phase)
	}
	// Nor does a group whose StatefulSet controllers have not observed the change.
	unsettled := outdated
	unsettled.Settled = false
	if up := computeStatus(group(nil), unsettled, actionResult{}, nil, statusNow); up.rolloutStarted {
		t.Error("a rollout started before every StatefulSet controller observed its spec")
	}
}

// TestComputeStatusDeadlineClock: as for a Deployment, the progress clock
// restarts on resume, unblock and spec change, and waiting out batchInterval
// counts as progress.
func TestComputeStatusDeadlineClock(t *testing.T) {
	waiting := rollout.Plan{Current: "a", Settled: true, Reason: v1alpha1.ReasonWaitingForPods,
		Members: []rollout.MemberState{member("a", 5, 4, 5, v1alpha1.MemberWaiting)}}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.RolloutGroup)
		plan   rollout.Plan
	}{
		{"resumed after a pause", func(rg *v1alpha1.RolloutGroup) { rg.Status.Phase = v1alpha1.PhasePaused }, waiting},
		{"unblocked", func(rg *v1alpha1.RolloutGroup) { rg.Status.Phase = v1alpha1.PhaseBlocked }, waiting},
		{"spec changed", func(rg *v1alpha1.RolloutGroup) { rg.Generation = 4 }, waiting},
		{"waiting out batchInterval", nil, rollout.Plan{Current: "a", Settled: true, ToRoll: 1, Reason: v1alpha1.ReasonWaitingForBatchInterval,
			Members: []rollout.MemberState{member("a", 5, 4, 5, v1alpha1.MemberRolling)}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rg := group(openRollout(20 * time.Minute))
			if tt.mutate != nil {
				tt.mutate(rg)
			}
			up := computeStatus(rg, tt.plan, actionResult{}, nil, statusNow)
			if up.status.Phase == v1alpha1.PhaseStalled || !up.status.LastProgressTime.Time.Equal(statusNow) {
				t.Errorf("phase %s lastProgress %v: want the clock restarted now", up.status.Phase, up.status.LastProgressTime)
			}
		})
	}
}

// computeStatus with analysis: the rollout is not complete while a gate is
// pending, the stable revision stays what the pods ran until it is, and a
// completed rollback ends the rollout without completing it.
func TestComputeStatusWithAnalysis(t *testing.T) {
	complete := gatetest.Plan(gatetest.Member("a", 3, 3), gatetest.Member("b", 3, 3))
	complete.Complete = true
	complete.Message = "all members updated and available"
	rg := gatetest.Group(0, v1alpha1.FailurePause, func(rg *v1alpha1.RolloutGroup) {
		openRollout(time.Minute)(rg)
		rg.Status.StatefulSets = []v1alpha1.MemberStatus{{Name: "a", StableRevision: "r1", GatePassedRevision: "r2"}, {Name: "b", StableRevision: "r1"}}
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{Gate: &v1alpha1.GateStatus{Member: "b", Kind: v1alpha1.GateAfterMember, Revision: "r2",
			StartTime: ptr.To(metav1.NewTime(at(-time.Minute))), SoakUntil: ptr.To(metav1.NewTime(at(-time.Minute)))},
			Checks: []v1alpha1.CheckStatus{{Name: "zone", Phase: v1alpha1.CheckRunning, LastTime: ptr.To(metav1.NewTime(at(-time.Second))), LastValue: "1"}}}
	})
	ap := gate.New(rg, statusNow)
	ap.Begin(complete)
	up := computeStatus(rg, complete, actionResult{}, ap, statusNow)
	st := up.status
	if up.rolloutCompleted || st.Phase != v1alpha1.PhaseAnalyzing || st.StatefulSets[1].StableRevision != "r1" || st.StatefulSets[0].GatePassedRevision != "r2" {
		t.Fatalf("with b's gate pending: completed %v phase %s members %+v", up.rolloutCompleted, st.Phase, st.StatefulSets)
	}
	if c := findCondition(st.Conditions, v1alpha1.ConditionProgressing); c == nil || c.Status != metav1.ConditionTrue || c.Reason != v1alpha1.ReasonWaitingForAnalysis {
		t.Errorf("Progressing = %+v, want True WaitingForAnalysis", c)
	}
	if !strings.Contains(st.Message, "AfterMember gate of b (revision r2): zone Running 0/2 (1)") {
		t.Errorf("message %q", st.Message)
	}
	// The gate passes: complete, and the stable revisions become r2.
	ap.Record(map[string]analysis.Outcome{"zone": gatetest.Outcome(true)})
	ap.Record(map[string]analysis.Outcome{"zone": gatetest.Outcome(true)})
	ap.Decide(complete)
	up = computeStatus(rg, complete, actionResult{}, ap, statusNow)
	if !up.rolloutCompleted || up.status.Phase != v1alpha1.PhaseComplete || up.status.StatefulSets[1].StableRevision != "r2" {
		t.Fatalf("gate passed: completed %v phase %s members %+v", up.rolloutCompleted, up.status.Phase, up.status.StatefulSets)
	}

	// A completed rollback ends the rollout, Failed, without completing it.
	rolledBack := gatetest.Plan(gatetest.Member("a", 3, 3))
	rolledBack.Members[0].UpdateRevision = "r1"
	rolledBack.Complete = true
	rb := gatetest.Group(0, v1alpha1.FailureRollback, func(rg *v1alpha1.RolloutGroup) {
		openRollout(time.Minute)(rg)
		rg.Status.Analysis = &v1alpha1.AnalysisStatus{
			Failure:  &v1alpha1.AnalysisFailure{Reason: v1alpha1.ReasonAnalysisFailed, Message: "check zone failed"},
			Rollback: &v1alpha1.RollbackStatus{StartTime: metav1.NewTime(at(-time.Minute)), Members: []v1alpha1.RollbackMember{{Name: "a", From: "r2", To: "r1"}}},
		}
	})
	ap = gate.New(rb, statusNow)
	ap.Begin(rolledBack)
	ap.AfterAct(rolledBack, 0)
	up = computeStatus(rb, rolledBack, actionResult{}, ap, statusNow)
	if up.rolloutCompleted || !up.rolledBack || up.status.Phase != v1alpha1.PhaseFailed || up.status.RolloutCompletionTime == nil {
		t.Fatalf("rolled back: completed %v rolledBack %v phase %s", up.rolloutCompleted, up.rolledBack, up.status.Phase)
	}
	if c := findCondition(up.status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonAnalysisFailed {
		t.Errorf("Ready = %+v, want reason AnalysisFailed", c)
	}
	// Failed, a new rollout does not start while the failed revision is back.
	again := gatetest.Plan(gatetest.Member("a", 0, 3))
	again.ToRoll = 3
	rb.Status = up.status
	ap = gate.New(rb, at(time.Minute))
	ap.Begin(again)
	if up := computeStatus(rb, again, actionResult{}, ap, at(time.Minute)); up.rolloutStarted || up.status.Phase != v1alpha1.PhaseFailed {
		t.Errorf("failed group: rolloutStarted %v phase %s", up.rolloutStarted, up.status.Phase)
	}
}

func at(d time.Duration) time.Time { return statusNow.Add(d) }

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

// The stall a failure policy acts on is measured only while a rollout is
// open, from its last progress.
func TestWithoutProgressFor(t *testing.T) {
	tests := map[string]struct {
		rg       *v1alpha1.RolloutGroup
		want     time.Duration
		wantOpen bool
	}{
		"open, progressed 3m ago": {rg: group(openRollout(3 * time.Minute)), want: 3 * time.Minute, wantOpen: true},
		"no rollout yet":          {rg: group(nil)},
		"completed": {rg: group(func(rg *v1alpha1.RolloutGroup) {
			rg.Status.RolloutStartTime, rg.Status.RolloutCompletionTime, rg.Status.LastProgressTime = ago(time.Hour), ago(time.Minute), ago(time.Minute)
		})},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got, open := withoutProgressFor(tt.rg, statusNow)
			if got != tt.want || open != tt.wantOpen {
				t.Errorf("withoutProgressFor = %s, %v; want %s, %v", got, open, tt.want, tt.wantOpen)
			}
		})
	}
}

// TestComputeStatusStepOfAGroupThatNeverRolled: a group with steps whose
// pods were on their update revision from the start has no rollout, so no
// step: the planner's "past the last step" ({index: 3, waitingFor: Done})
// would read as a rollout that went through its steps. Once a rollout has
// started the step is recorded, and stays after it completes.
func TestComputeStatusStepOfAGroupThatNeverRolled(t *testing.T) {
	steps := func(rg *v1alpha1.RolloutGroup) {
		rg.Spec.Steps = []v1alpha1.RolloutStep{{Percent: 10}, {Percent: 50}, {Percent: 100}}
	}
	past := &rollout.StepState{Index: 3, Percent: 100, Target: 3, WaitingFor: v1alpha1.StepWaitDone}
	done := rollout.Plan{Complete: true, Settled: true, Reason: v1alpha1.ReasonUpToDate, Step: past,
		Members: []rollout.MemberState{member("a", 3, 3, 3, v1alpha1.MemberComplete)}}
	up := computeStatus(group(steps), done, actionResult{}, nil, statusNow)
	if up.status.Step != nil {
		t.Errorf("a group that never rolled: status.step %+v, want none", up.status.Step)
	}

	first := &rollout.StepState{Index: 0, Percent: 10, Target: 1, WaitingFor: v1alpha1.StepWaitPods, Since: statusNow}
	outdated := rollout.Plan{Current: "a", Settled: true, ToRoll: 3, Reason: v1alpha1.ReasonDeletingPods, Step: first,
		Members: []rollout.MemberState{member("a", 3, 0, 3, v1alpha1.MemberRolling)}}
	rg := group(steps)
	rg.Status = up.status
	up = computeStatus(rg, outdated, actionResult{deleted: 1}, nil, statusNow)
	if up.status.Step == nil || up.status.Step.Index != 0 || up.status.Step.WaitingFor != v1alpha1.StepWaitPods {
		t.Errorf("a rollout starting: status.step %+v, want step 0 waiting for pods", up.status.Step)
	}
	rg.Status = up.status
	up = computeStatus(rg, done, actionResult{}, nil, statusNow.Add(time.Minute))
	if up.status.Step == nil || up.status.Step.WaitingFor != v1alpha1.StepWaitDone {
		t.Errorf("a rollout complete: status.step %+v, want past the last step, Done", up.status.Step)
	}
}
