package rollout

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/test/builders"
)

// heldBy is a hold of zone for reason, renewed ago before testNow, with the
// default 15 s lease.
func heldBy(zone string, reason v1alpha1.DisruptionReason, holder string, ago time.Duration) *disruption.Hold {
	return &disruption.Hold{Zone: zone, Reason: reason, Holder: holder, Since: testNow.Add(-time.Minute),
		Renewed: testNow.Add(-ago), Lease: disruption.DefaultLease}
}

func TestDecideDisruptionBudget(t *testing.T) {
	rolling2 := func(hold *disruption.Hold) Input {
		in := group(outdated("zone-a", 4).MaxUnavailable(2), updated("zone-b", 4))
		in.DisruptionHold, in.Holder = hold, "RolloutGroup ingester"
		return in
	}
	tests := []struct {
		name string
		in   Input
		want wantPlan
		// record, when deleting: whether the plan asks to record the hold first.
		record bool
		// reason is the plan's condition reason.
		reason string
	}{{
		name:   "no hold: the batch goes, its hold recorded first",
		in:     rolling2(nil),
		want:   wantPlan{delete: []string{"zone-a-3", "zone-a-2"}, current: "zone-a"},
		record: true, reason: v1alpha1.ReasonDeletingPods,
	}, {
		name: "another zone's eviction holds the budget: nothing deleted until it lapses",
		in:   rolling2(heldBy("zone-b", v1alpha1.DisruptionEviction, "eviction of pod zone-b-3", 5*time.Second)),
		want: wantPlan{current: "zone-a", requeueAfter: 10 * time.Second, phases: phases{"zone-a": rolling},
			message: []string{"zone-a: 0/4 updated, waiting: zone zone-b holds the disruption budget (Eviction, eviction of pod zone-b-3)"}},
		reason: v1alpha1.ReasonWaitingForDisruption,
	}, {
		name: "another zone's downscale holds the budget",
		in:   rolling2(heldBy("zone-b", v1alpha1.DisruptionDownscale, "ScalingPolicy zone-b", 0)),
		want: wantPlan{current: "zone-a", requeueAfter: 15 * time.Second,
			message: []string{"zone zone-b holds the disruption budget (Downscale, ScalingPolicy zone-b)"}},
		reason: v1alpha1.ReasonWaitingForDisruption,
	}, {
		name: "a downscale of the zone being rolled holds it: rolling and scaling never overlap",
		in:   rolling2(heldBy("zone-a", v1alpha1.DisruptionDownscale, "ScalingPolicy zone-a", 2*time.Second)),
		want: wantPlan{current: "zone-a", requeueAfter: 13 * time.Second,
			message: []string{"zone zone-a holds the disruption budget (Downscale, ScalingPolicy zone-a)", "a rollout waits for it"}},
		reason: v1alpha1.ReasonWaitingForDisruption,
	}, {
		name:   "another zone's hold has lapsed: the batch goes, recorded",
		in:     rolling2(heldBy("zone-b", v1alpha1.DisruptionEviction, "eviction of pod zone-b-3", 15*time.Second)),
		want:   wantPlan{delete: []string{"zone-a-3", "zone-a-2"}, current: "zone-a"},
		record: true, reason: v1alpha1.ReasonDeletingPods,
	}, {
		name:   "the rollout's own fresh hold: the batch goes without a write",
		in:     rolling2(heldBy("zone-a", v1alpha1.DisruptionRollout, "RolloutGroup ingester", 7*time.Second)),
		want:   wantPlan{delete: []string{"zone-a-3", "zone-a-2"}, current: "zone-a"},
		record: false, reason: v1alpha1.ReasonDeletingPods,
	}, {
		name:   "the rollout's own hold past half its lease: renewed",
		in:     rolling2(heldBy("zone-a", v1alpha1.DisruptionRollout, "RolloutGroup ingester", 8*time.Second)),
		want:   wantPlan{delete: []string{"zone-a-3", "zone-a-2"}, current: "zone-a"},
		record: true, reason: v1alpha1.ReasonDeletingPods,
	}, {
		name: "an eviction in the zone being rolled: the rollout goes on within the budget, counting the evicted pod, and records its own hold",
		in: with(group(
			makeMember(onDeleteSTS("zone-a", 4).Obj()).MaxUnavailable(2).
				Pods(readyPods("zone-a", oldRev, 1, 2, 3), builders.MakePod(testNamespace, "zone-a", 0).Revision(oldRev).Terminating(testNow).Obj()),
			updated("zone-b", 4)), func(in *Input) {
			in.DisruptionHold = heldBy("zone-a", v1alpha1.DisruptionEviction, "eviction of pod zone-a-0", time.Second)
		}),
		want:   wantPlan{delete: []string{"zone-a-3"}, current: "zone-a"},
		record: true, reason: v1alpha1.ReasonDeletingPods,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.in)
			checkPlan(t, got, tt.want)
			if got.Reason != tt.reason {
				t.Errorf("Reason = %s, want %s", got.Reason, tt.reason)
			}
			if got.Budget == nil {
				t.Fatalf("Budget = nil, want the budget's answer to the batch")
			}
			if got.Budget.Verdict.Allowed != (len(tt.want.delete) > 0) {
				t.Errorf("Budget.Verdict = %+v, want allowed %v", got.Budget.Verdict, len(tt.want.delete) > 0)
			}
			if len(tt.want.delete) == 0 {
				if ms, _ := memberState(got, "zone-a"); !strings.Contains(ms.Message, "holds the disruption budget") {
					t.Errorf("zone-a's message %q does not say who holds the budget", ms.Message)
				}
				return
			}
			if got.Budget.Record() != tt.record {
				t.Errorf("Budget.Record() = %v, want %v (verdict %+v, hold %+v)", got.Budget.Record(), tt.record, got.Budget.Verdict, tt.in.DisruptionHold)
			}
			h := got.Budget.Verdict.Hold
			if h.Zone != "zone-a" || h.Reason != v1alpha1.DisruptionRollout || h.Holder != tt.in.Holder || !h.Renewed.Equal(testNow) {
				t.Errorf("hold to record = %+v, want zone-a, Rollout, holder %q, renewed now", h, tt.in.Holder)
			}
			if req := got.Budget.Request; req.Zone != "zone-a" || strings.Join(req.Pods, ",") != strings.Join(tt.want.delete, ",") {
				t.Errorf("Budget.Request = %+v, want zone-a and the batch %v", req, tt.want.delete)
			}
		})
	}
}

// No batch, no question: a plan that deletes nothing for its own reasons
// does not ask the budget, and a hold does not change its reason.
func TestDecideAsksTheBudgetOnlyForABatch(t *testing.T) {
	in := with(group(outdated("zone-a", 3), updated("zone-b", 3)), func(in *Input) {
		in.Paused = true
		in.DisruptionHold = heldBy("zone-b", v1alpha1.DisruptionEviction, "eviction of pod zone-b-0", 0)
	})
	got := Decide(in)
	if got.Budget != nil || got.Reason != v1alpha1.ReasonPaused {
		t.Errorf("paused group: Budget %+v, Reason %s; want no question and Paused", got.Budget, got.Reason)
	}
}

// The budget's view of the group is the planner's: the same zones, each with
// its member's resolved maxUnavailable, and the same pods counted
// unavailable, a pod this process deleted that the cache still shows
// included.
func TestBudgetView(t *testing.T) {
	a := outdated("zone-a", 4).MaxUnavailable("50%")
	in := group(a, outdated("zone-b", 3), makeMissingMember("zone-c"))
	in.Deleting = sets.New(a.Obj().Pods[1].UID)
	in.DisruptionHold = heldBy("zone-b", v1alpha1.DisruptionEviction, "x", 0)
	v := BudgetView(in)
	if len(v.Zones) != 2 || v.Zones[0].Name != "zone-a" || v.Zones[1].Name != "zone-b" {
		t.Fatalf("zones %+v, want zone-a and zone-b (zone-c has no StatefulSet)", v.Zones)
	}
	plan := Decide(in)
	for i, z := range v.Zones {
		ms := plan.Members[i]
		if z.MaxUnavailable != ms.MaxUnavailable || z.Unavailable() != ms.Unavailable+ms.Leaving {
			t.Errorf("zone %s: maxUnavailable %d, unavailable %d; planner %d, %d", z.Name, z.MaxUnavailable, z.Unavailable(), ms.MaxUnavailable, ms.Unavailable+ms.Leaving)
		}
	}
	if v.Zones[0].MaxUnavailable != 2 || v.Zones[0].Unavailable() != 1 {
		t.Errorf("zone-a: maxUnavailable %d, unavailable %d; want 2 (50%% of 4) and 1 (the pod being deleted)", v.Zones[0].MaxUnavailable, v.Zones[0].Unavailable())
	}
	if v.Hold != in.DisruptionHold || !v.Now.Equal(testNow) {
		t.Errorf("view hold %+v at %v, want the input's", v.Hold, v.Now)
	}
}
