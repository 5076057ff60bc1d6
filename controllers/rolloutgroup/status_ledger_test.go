package rolloutgroup

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func TestStatusLedgerServesItsOwnRecordOverTheCache(t *testing.T) {
	l := newStatusLedger()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cached := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "u1"}}
	cached.Status.PodsRolled = 1

	rg, written := l.Base(cached)
	if rg.Status.PodsRolled != 1 || written.PodsRolled != 1 {
		t.Fatalf("unknown group: want the cached status, got %d/%d", rg.Status.PodsRolled, written.PodsRolled)
	}
	l.Wrote(rg, v1alpha1.RolloutGroupStatus{PodsRolled: 3}, now)
	// The cache has not seen the write yet: the ledger's record wins.
	if rg, written := l.Base(cached); rg.Status.PodsRolled != 3 || written.PodsRolled != 3 {
		t.Fatalf("after a write: got current %d written %d, want 3/3", rg.Status.PodsRolled, written.PodsRolled)
	}
	// A progress change inside the interval waits, and is served as current.
	if wait := l.Defer(rg, v1alpha1.RolloutGroupStatus{PodsRolled: 3}, v1alpha1.RolloutGroupStatus{PodsRolled: 4}, now.Add(2*time.Second), 5*time.Second); wait != 3*time.Second {
		t.Fatalf("wait = %s, want 3s", wait)
	}
	if rg, written := l.Base(cached); rg.Status.PodsRolled != 4 || written.PodsRolled != 3 {
		t.Fatalf("deferred: got current %d written %d, want 4/3", rg.Status.PodsRolled, written.PodsRolled)
	}
	// A new object with the same name starts from its own cached status.
	recreated := cached.DeepCopy()
	recreated.UID = "u2"
	recreated.Status.PodsRolled = 0
	if rg, _ := l.Base(recreated); rg.Status.PodsRolled != 0 {
		t.Fatalf("recreated group: got %d, want 0", rg.Status.PodsRolled)
	}
}

func TestUrgentStatusChange(t *testing.T) {
	base := v1alpha1.RolloutGroupStatus{
		Phase: v1alpha1.PhaseProgressing, CurrentStatefulSet: "a", Updated: "3/30", UpdatedReplicas: 3, Message: "a: 3/10 updated",
		Conditions:   []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonDeletingPods, Message: "x"}},
		StatefulSets: []v1alpha1.MemberStatus{{Name: "a", Phase: v1alpha1.MemberRolling, UpdatedReplicas: 3}},
	}
	interval := v1alpha1.RolloutGroupSpec{BatchInterval: &metav1.Duration{Duration: time.Minute}}
	tests := []struct {
		name   string
		spec   v1alpha1.RolloutGroupSpec
		mutate func(*v1alpha1.RolloutGroupStatus)
		want   bool
	}{
		{"counters and message wait", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) {
			s.Updated, s.UpdatedReplicas, s.Message, s.PodsRolled = "4/30", 4, "a: 4/10 updated", 4
			s.StatefulSets[0].UpdatedReplicas = 4
			s.Conditions[0].Message = "y"
		}, false},
		{"phase is urgent", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) { s.Phase = v1alpha1.PhaseComplete }, true},
		{"member being rolled is urgent", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) { s.CurrentStatefulSet = "b" }, true},
		{"a rollout's step (condition reason) waits", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) { s.Conditions[0].Reason = v1alpha1.ReasonWaitingForPods }, false},
		{"a condition reason with a phase change is urgent", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) {
			s.Phase, s.Conditions[0].Reason = v1alpha1.PhaseStalled, v1alpha1.ReasonProgressDeadlineExceeded
		}, true},
		{"a condition status is urgent", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) { s.Conditions[0].Status = metav1.ConditionTrue }, true},
		{"member phase is urgent", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) { s.StatefulSets[0].Phase = v1alpha1.MemberWaiting }, true},
		{"last batch time waits without batchInterval", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) { s.LastBatchTime = &metav1.Time{} }, false},
		{"last batch time is urgent with batchInterval", interval, func(s *v1alpha1.RolloutGroupStatus) { s.LastBatchTime = &metav1.Time{} }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := *base.DeepCopy()
			tt.mutate(&next)
			if got := urgentStatusChange(tt.spec, base, next); got != tt.want {
				t.Errorf("urgent = %v, want %v", got, tt.want)
			}
		})
	}
}
