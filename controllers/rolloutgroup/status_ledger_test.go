package rolloutgroup

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/test/builders"
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

// status.disruption is written by other decisions too: the ledger serves
// the record whose last intent was decided last, of the cache's and its
// own, as current and as written, so that the status written next neither
// sends nor loses it.
func TestStatusLedgerServesTheFresherHold(t *testing.T) {
	l := newStatusLedger()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	intent := func(zone string, decided time.Time) v1alpha1.DisruptionIntent {
		return v1alpha1.DisruptionIntent{Zone: zone, Reason: v1alpha1.DisruptionRollout, DecidedAt: metav1.NewTime(decided),
			ExpiresAt: metav1.NewTime(decided.Add(45 * time.Second)), Pods: []v1alpha1.IntentPod{{Name: zone + "-0", UID: "uid-" + zone + "-0"}}}
	}
	record := func(intents ...v1alpha1.DisruptionIntent) *v1alpha1.DisruptionHold {
		return &v1alpha1.DisruptionHold{Intents: intents}
	}
	zones := func(h *v1alpha1.DisruptionHold) string {
		if h == nil {
			return "none"
		}
		var out []string
		for _, in := range h.Intents {
			out = append(out, in.Zone)
		}
		return strings.Join(out, ",")
	}
	cached := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", UID: "u1"}}
	l.Wrote(cached, v1alpha1.RolloutGroupStatus{PodsRolled: 3, Disruption: record(intent("zone-a", now.Add(5*time.Second)))}, now)
	for _, tt := range []struct {
		name   string
		cached *v1alpha1.DisruptionHold
		want   string // the zones of the record's intents
	}{
		{"the cache has not seen this process's record", nil, "zone-a"},
		{"the cache shows an older record", record(intent("zone-b", now)), "zone-a"},
		{"the cache shows an intent another decision recorded since", record(intent("zone-b", now.Add(6*time.Second))), "zone-b"},
		{"the cache shows this process's intent and another decided since", record(intent("zone-a", now.Add(5*time.Second)), intent("zone-b", now.Add(6*time.Second))), "zone-a,zone-b"},
		{"its latest intent, not its first, dates a record", record(intent("zone-b", now), intent("zone-c", now.Add(7*time.Second))), "zone-b,zone-c"},
		{"a tie goes to the cache", record(intent("zone-b", now.Add(5*time.Second))), "zone-b"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := cached.DeepCopy()
			c.Status.Disruption = tt.cached
			rg, written := l.Base(c)
			if zones(rg.Status.Disruption) != tt.want || zones(written.Disruption) != tt.want {
				t.Errorf("current record %+v, written record %+v; want both of intents of %s", rg.Status.Disruption, written.Disruption, tt.want)
			}
			if rg.Status.PodsRolled != 3 || written.PodsRolled != 3 {
				t.Errorf("the rest of the status comes from the ledger: podsRolled %d/%d, want 3", rg.Status.PodsRolled, written.PodsRolled)
			}
		})
	}
}

// The controller's status writes carry written's record whatever they computed.
func TestKeepHold(t *testing.T) {
	held := v1alpha1.RolloutGroupStatus{Disruption: &v1alpha1.DisruptionHold{Intents: []v1alpha1.DisruptionIntent{{Zone: "zone-b", Reason: v1alpha1.DisruptionEviction}}}}
	if got := keepHold(held, v1alpha1.RolloutGroupStatus{Phase: v1alpha1.PhaseComplete}); got.Disruption == nil || len(got.Disruption.Intents) != 1 ||
		got.Disruption.Intents[0].Zone != "zone-b" || got.Phase != v1alpha1.PhaseComplete {
		t.Errorf("keepHold = %+v, want the phase computed and zone-b's intent", got)
	}
	if got := keepHold(v1alpha1.RolloutGroupStatus{}, held); got.Disruption != nil {
		t.Errorf("keepHold sends record %+v that written does not hold", got.Disruption)
	}
	// Only the volume resizer writes status.volumeResize.
	resizing := v1alpha1.RolloutGroupStatus{VolumeResize: &v1alpha1.VolumeResizeStatus{Phase: v1alpha1.VolumeResizeResizing, CurrentZone: "zone-a"}}
	if got := keepHold(resizing, v1alpha1.RolloutGroupStatus{}); got.VolumeResize == nil || got.VolumeResize.CurrentZone != "zone-a" {
		t.Errorf("keepHold = %+v, want the volume resize as written", got.VolumeResize)
	}
}

func TestUrgentStatusChange(t *testing.T) {
	base := v1alpha1.RolloutGroupStatus{
		Phase: v1alpha1.PhaseProgressing, CurrentStatefulSet: "a", Updated: "3/30",
		RolloutStartTime: &metav1.Time{Time: time.Date(2026, 3, 1, 12, 0, 0, 300_000_000, time.UTC)}, UpdatedReplicas: 3, Message: "a: 3/10 updated",
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
		{"member phase is urgent", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) { s.StatefulSets[0].Phase = v1alpha1.MemberComplete }, true},
		// Each partition release: the member waits for its StatefulSet
		// controller to observe the new partition, for a pass (issue 29: two
		// status writes more per release).
		{"a partitioned member waiting for its StatefulSet controller waits", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) {
			s.StatefulSets[0].Phase, s.Conditions[0].Reason = v1alpha1.MemberWaiting, v1alpha1.ReasonWaitingForStatefulSet
			s.StatefulSets[0].Partition = ptr.To[int32](7)
		}, false},
		{"an OnDelete member waiting for its last pods waits", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) {
			s.StatefulSets[0].Phase, s.Conditions[0].Reason = v1alpha1.MemberWaiting, v1alpha1.ReasonWaitingForPods
		}, false},
		{"a member completing is urgent", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) {
			s.StatefulSets[0].Phase, s.Conditions[0].Reason = v1alpha1.MemberComplete, v1alpha1.ReasonWaitingForPods
		}, true},
		{"a member waiting while the group stops is urgent", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) {
			s.Phase, s.StatefulSets[0].Phase = v1alpha1.PhasePaused, v1alpha1.MemberWaiting
		}, true},
		{"a wait for the disruption budget is urgent", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) {
			s.Conditions[0].Reason = v1alpha1.ReasonWaitingForDisruption
		}, true},
		{"the rollout's start read back to the second waits", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) {
			s.RolloutStartTime = &metav1.Time{Time: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
		}, false},
		{"another rollout start is urgent", v1alpha1.RolloutGroupSpec{}, func(s *v1alpha1.RolloutGroupStatus) {
			s.RolloutStartTime = &metav1.Time{Time: time.Date(2026, 3, 1, 12, 0, 1, 0, time.UTC)}
		}, true},
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

// helm applies a chart's StatefulSets one after the other: the group waits
// for each member's StatefulSet controller in turn, and the member it names
// moves on within milliseconds. Only the wait's start is written at once.
func TestUrgentStatusChangeWhileStatefulSetControllersCatchUp(t *testing.T) {
	waiting := func(current string, phases ...v1alpha1.MemberPhase) v1alpha1.RolloutGroupStatus {
		st := v1alpha1.RolloutGroupStatus{
			Phase: v1alpha1.PhaseWaiting, CurrentStatefulSet: current, ObservedGeneration: 2,
			Conditions: []metav1.Condition{{Type: v1alpha1.ConditionReady, Status: metav1.ConditionFalse, Reason: v1alpha1.ReasonWaitingForStatefulSet}},
		}
		for i, p := range phases {
			st.StatefulSets = append(st.StatefulSets, v1alpha1.MemberStatus{Name: string(rune('a' + i)), Phase: p})
		}
		return st
	}
	complete := waiting("", v1alpha1.MemberComplete, v1alpha1.MemberComplete)
	complete.Phase, complete.Conditions[0].Reason = v1alpha1.PhaseComplete, v1alpha1.ReasonUpToDate
	rolling := waiting("a", v1alpha1.MemberRolling, v1alpha1.MemberPending)
	rolling.Phase, rolling.Conditions[0].Reason = v1alpha1.PhaseProgressing, v1alpha1.ReasonDeletingPods
	spec := v1alpha1.RolloutGroupSpec{}
	for _, tt := range []struct {
		name          string
		written, next v1alpha1.RolloutGroupStatus
		want          bool
	}{
		{"the wait begins", complete, waiting("a", v1alpha1.MemberWaiting, v1alpha1.MemberComplete), true},
		{"the next member's controller is the one behind", waiting("a", v1alpha1.MemberWaiting, v1alpha1.MemberComplete), waiting("b", v1alpha1.MemberPending, v1alpha1.MemberWaiting), false},
		{"the group's spec changes meanwhile", waiting("a", v1alpha1.MemberWaiting, v1alpha1.MemberComplete), func() v1alpha1.RolloutGroupStatus {
			st := waiting("b", v1alpha1.MemberPending, v1alpha1.MemberWaiting)
			st.ObservedGeneration = 3
			return st
		}(), true},
		{"the rollout starts", waiting("b", v1alpha1.MemberPending, v1alpha1.MemberWaiting), rolling, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if got := urgentStatusChange(spec, tt.written, tt.next); got != tt.want {
				t.Errorf("urgent = %v, want %v", got, tt.want)
			}
		})
	}
}

// What a process that takes a group over recovers from the pods: pods the
// previous one deleted (terminating, off the update revision) and pods
// replaced since the rollout began; never less than status says.
func TestRecoverDeferred(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	sts := builders.MakeStatefulSet("ns", "zone-a").Obj()
	sts.Status.UpdateRevision = "r2"
	pod := func(ordinal int, rev string, created time.Time, deleted ...time.Time) *corev1.Pod {
		w := builders.MakePod("ns", "zone-a", ordinal).Revision(rev)
		if len(deleted) > 0 {
			w.Terminating(deleted[0])
		}
		p := w.Obj()
		p.CreationTimestamp = metav1.NewTime(created)
		return p
	}
	open := v1alpha1.RolloutGroupStatus{RolloutStartTime: &metav1.Time{Time: start}, PodsRolled: 1,
		LastBatchTime: &metav1.Time{Time: start}, LastProgressTime: &metav1.Time{Time: start.Add(time.Second)}}
	for _, tt := range []struct {
		name          string
		status        v1alpha1.RolloutGroupStatus
		pods          []*corev1.Pod
		wantRolled    int32
		wantLastBatch time.Time
	}{{
		name:   "a deletion not written yet and a pod replaced",
		status: open,
		pods: []*corev1.Pod{
			pod(0, "r2", start.Add(3*time.Second)),
			pod(1, "r1", start.Add(-time.Hour), start.Add(5*time.Second)),
			pod(2, "r1", start.Add(-time.Hour)),
		},
		wantRolled: 2, wantLastBatch: start.Add(5 * time.Second),
	}, {
		name:   "pods on the update revision from before the rollout are not counted",
		status: open,
		pods: []*corev1.Pod{
			pod(0, "r2", start.Add(-time.Hour)),
			pod(1, "r1", start.Add(-time.Hour)),
		},
		wantRolled: 1, wantLastBatch: start,
	}, {
		name:       "status counting more (a rollback rolls a pod twice) is kept",
		status:     func() v1alpha1.RolloutGroupStatus { s := *open.DeepCopy(); s.PodsRolled = 5; return s }(),
		pods:       []*corev1.Pod{pod(0, "r2", start.Add(3*time.Second))},
		wantRolled: 5, wantLastBatch: start,
	}, {
		name:       "no rollout open: nothing recovered",
		status:     v1alpha1.RolloutGroupStatus{PodsRolled: 1, LastBatchTime: &metav1.Time{Time: start}},
		pods:       []*corev1.Pod{pod(0, "r1", start.Add(-time.Hour), start.Add(5*time.Second))},
		wantRolled: 1, wantLastBatch: start,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			got := recoverDeferred(tt.status, []rollout.Member{{Name: "zone-a", StatefulSet: sts, Pods: tt.pods}})
			if got.PodsRolled != tt.wantRolled || !got.LastBatchTime.Time.Equal(tt.wantLastBatch) {
				t.Errorf("podsRolled %d lastBatchTime %v, want %d and %v", got.PodsRolled, got.LastBatchTime, tt.wantRolled, tt.wantLastBatch)
			}
			if got.LastProgressTime != nil && got.LastProgressTime.Time.Before(got.LastBatchTime.Time) && lookup.RolloutOpen(tt.status) {
				t.Errorf("lastProgressTime %v before the last deletion %v", got.LastProgressTime, got.LastBatchTime)
			}
		})
	}
}
