package rollout

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/test/builders"
)

// intentLife is how long after its decision an intent expires when its
// holder never acts: disruption.ActWindow and the 15 s margin Decide adds.
const intentLife = disruption.ActWindow + 15*time.Second

// intentOn is an intent of zone for reason by holder, decided ago before
// testNow, letting pods go: each named with the UID in shows it with
// (untouched), or "uid-gone" when in has no such pod.
func intentOn(in Input, zone string, reason v1alpha1.DisruptionReason, holder string, ago time.Duration, pods ...string) disruption.Intent {
	it := disruption.Intent{Zone: zone, Reason: reason, Holder: holder, Decided: testNow.Add(-ago), Expires: testNow.Add(-ago).Add(intentLife)}
	for _, name := range pods {
		uid := types.UID("uid-gone")
		for _, m := range in.Members {
			for _, p := range m.Pods {
				if p.Name == name {
					uid = p.UID
				}
			}
		}
		it.Pods = append(it.Pods, disruption.IntentPod{Name: name, UID: uid})
	}
	return it
}

func TestDecideDisruptionBudget(t *testing.T) {
	const holder = "RolloutGroup ingester"
	rolling2 := func(change ...func(in *Input)) Input {
		in := group(outdated("zone-a", 4).MaxUnavailable(2), updated("zone-b", 4))
		in.Holder = holder
		for _, f := range change {
			f(&in)
		}
		return in
	}
	// recorded records the intent intentOn makes of the input.
	recorded := func(zone string, reason v1alpha1.DisruptionReason, who string, ago time.Duration, pods ...string) func(*Input) {
		return func(in *Input) { in.Intents = append(in.Intents, intentOn(*in, zone, reason, who, ago, pods...)) }
	}
	// zoneBReplaced replaces zone-b-3 with an available pod created now.
	zoneBReplaced := func(in *Input) {
		in.Members[1].Pods = slices.Clone(in.Members[1].Pods)
		in.Members[1].Pods[3] = builders.MakePod(testNamespace, "zone-b", 3).Revision(newRev).Created(testNow).Obj()
	}
	tests := []struct {
		name string
		in   Input
		want wantPlan
		// kept, when deleting: the recorded intents the record keeps
		// before the batch's own (indexes into in.Intents).
		kept []int
		// code, when not deleting: the budget's refusal; waiting are
		// substrings of zone-a's message.
		code    string
		waiting []string
		// reason is the plan's condition reason.
		reason string
	}{{
		name:   "no intent recorded: the batch goes, its intent recorded first",
		in:     rolling2(),
		want:   wantPlan{delete: []string{"zone-a-3", "zone-a-2"}, current: "zone-a"},
		reason: v1alpha1.ReasonDeletingPods,
	}, {
		name: "another zone's eviction recorded, its pod shown untouched: nothing deleted, look again when it expires",
		in:   rolling2(recorded("zone-b", v1alpha1.DisruptionEviction, "eviction of pod zone-b-3", 5*time.Second, "zone-b-3")),
		want: wantPlan{current: "zone-a", requeueAfter: 40 * time.Second, phases: phases{"zone-a": rolling},
			message: []string{"zone-a: 0/4 updated, waiting: zone zone-b (1 pod", "eviction of pod zone-b-3", "2026-03-01T11:59:55Z", "not seen going yet) holds the disruption budget"}},
		code: disruption.CodeHeldByOtherZone, waiting: []string{"zone zone-b (1 pod", "holds the disruption budget"},
		reason: v1alpha1.ReasonWaitingForDisruption,
	}, {
		name:   "another zone's evicted pod seen replaced and available: the batch goes at once, the done intent dropped",
		in:     rolling2(recorded("zone-b", v1alpha1.DisruptionEviction, "eviction of pod zone-b-3", 5*time.Second, "zone-b-3"), zoneBReplaced),
		want:   wantPlan{delete: []string{"zone-a-3", "zone-a-2"}, current: "zone-a"},
		reason: v1alpha1.ReasonDeletingPods,
	}, {
		name: "another zone's downscale recorded, its ordinal still there: nothing deleted",
		in:   rolling2(recorded("zone-b", v1alpha1.DisruptionDownscale, "ScalingPolicy zone-b", 0, "zone-b-3")),
		want: wantPlan{current: "zone-a", requeueAfter: 45 * time.Second,
			message: []string{"a downscale of zone zone-b (ScalingPolicy zone-b", "is not seen done; a rollout waits for it"}},
		code: disruption.CodeHeldByOtherZone, waiting: []string{"downscale of zone zone-b"},
		reason: v1alpha1.ReasonWaitingForDisruption,
	}, {
		name:   "another zone's downscale done, its ordinal gone: the batch goes",
		in:     rolling2(recorded("zone-b", v1alpha1.DisruptionDownscale, "ScalingPolicy zone-b", 0, "zone-b-4")),
		want:   wantPlan{delete: []string{"zone-a-3", "zone-a-2"}, current: "zone-a"},
		reason: v1alpha1.ReasonDeletingPods,
	}, {
		name: "a downscale of the zone being rolled recorded: rolling and scaling never overlap",
		in:   rolling2(recorded("zone-a", v1alpha1.DisruptionDownscale, "ScalingPolicy zone-a", 2*time.Second, "zone-a-3")),
		want: wantPlan{current: "zone-a", requeueAfter: 43 * time.Second,
			message: []string{"a downscale of zone zone-a (ScalingPolicy zone-a", "a rollout waits for it"}},
		code: disruption.CodeHeldByOtherZone, waiting: []string{"downscale of zone zone-a"},
		reason: v1alpha1.ReasonWaitingForDisruption,
	}, {
		name:   "another zone's intent whose holder never acted has expired: the batch goes, the intent dropped",
		in:     rolling2(recorded("zone-b", v1alpha1.DisruptionEviction, "eviction of pod zone-b-3", intentLife, "zone-b-3")),
		want:   wantPlan{delete: []string{"zone-a-3", "zone-a-2"}, current: "zone-a"},
		reason: v1alpha1.ReasonDeletingPods,
	}, {
		name: "another zone's intent a second before its expiry still holds",
		in:   rolling2(recorded("zone-b", v1alpha1.DisruptionRollout, "RolloutGroup other", intentLife-time.Second, "zone-b-3")),
		want: wantPlan{current: "zone-a", requeueAfter: time.Second},
		code: disruption.CodeHeldByOtherZone, waiting: []string{"zone zone-b (1 pod"},
		reason: v1alpha1.ReasonWaitingForDisruption,
	}, {
		name:   "the rollout's own batch not seen going yet, asked again: it costs once, and is kept in the record",
		in:     rolling2(recorded("zone-a", v1alpha1.DisruptionRollout, holder, 7*time.Second, "zone-a-3", "zone-a-2")),
		want:   wantPlan{delete: []string{"zone-a-3", "zone-a-2"}, current: "zone-a"},
		kept:   []int{0},
		reason: v1alpha1.ReasonDeletingPods,
	}, {
		name: "an eviction in the zone being rolled, seen terminating: the rollout goes on within the budget, counting it, and keeps it recorded",
		in: with(group(
			makeMember(onDeleteSTS("zone-a", 4).Obj()).MaxUnavailable(2).
				Pods(readyPods("zone-a", oldRev, 1, 2, 3), builders.MakePod(testNamespace, "zone-a", 0).Revision(oldRev).Terminating(testNow).Obj()),
			updated("zone-b", 4)), func(in *Input) {
			in.Holder = holder
			in.Intents = []disruption.Intent{intentOn(*in, "zone-a", v1alpha1.DisruptionEviction, "eviction of pod zone-a-0", time.Second, "zone-a-0")}
		}),
		want:   wantPlan{delete: []string{"zone-a-3"}, current: "zone-a"},
		kept:   []int{0},
		reason: v1alpha1.ReasonDeletingPods,
	}, {
		name: "an eviction in the zone being rolled, its pod shown untouched: it counts against the zone's budget, and the batch waits",
		in:   rolling2(recorded("zone-a", v1alpha1.DisruptionEviction, "eviction of pod zone-a-0", time.Second, "zone-a-0")),
		want: wantPlan{current: "zone-a", requeueAfter: 44 * time.Second,
			message: []string{"zone zone-a has 1 of 4 pods unavailable and maxUnavailable 2", "eviction of pod zone-a-0", "not seen going yet"}},
		code: disruption.CodeZoneBudget, waiting: []string{"1 of 4 pods unavailable"},
		reason: v1alpha1.ReasonWaitingForDisruption,
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
			v := got.Budget.Verdict
			if v.Allowed != (len(tt.want.delete) > 0) || got.Budget.Record() != v.Allowed {
				t.Errorf("Budget.Verdict = %+v, Record() %v; want allowed and recorded %v", v, got.Budget.Record(), len(tt.want.delete) > 0)
			}
			if len(tt.want.delete) == 0 {
				if v.Code != tt.code {
					t.Errorf("Budget.Verdict.Code = %s, want %s (message %q)", v.Code, tt.code, v.Message)
				}
				if len(v.Record) != 0 || len(v.Intent.Pods) != 0 {
					t.Errorf("a refusal records %+v, intent %+v; want nothing", v.Record, v.Intent)
				}
				ms, _ := memberState(got, "zone-a")
				for _, s := range tt.waiting {
					if !strings.Contains(ms.Message, s) {
						t.Errorf("zone-a's message %q does not contain %q", ms.Message, s)
					}
				}
				if req := got.Budget.Request; req.Zone != "zone-a" || req.Reason != v1alpha1.DisruptionRollout || len(req.Pods) == 0 {
					t.Errorf("Budget.Request = %+v, want zone-a's batch", req)
				}
				return
			}
			want := intentOn(tt.in, "zone-a", v1alpha1.DisruptionRollout, holder, 0, tt.want.delete...)
			if !reflect.DeepEqual(v.Intent, want) {
				t.Errorf("intent to record = %+v\nwant %+v (zone-a, Rollout, holder %q, decided now, the batch's pods and UIDs)", v.Intent, want, holder)
			}
			var record []disruption.Intent
			for _, i := range tt.kept {
				record = append(record, tt.in.Intents[i])
			}
			if record = append(record, want); !reflect.DeepEqual(v.Record, record) {
				t.Errorf("record to write = %+v\nwant %+v", v.Record, record)
			}
			if req := got.Budget.Request; req.Zone != "zone-a" || strings.Join(req.Pods, ",") != strings.Join(tt.want.delete, ",") {
				t.Errorf("Budget.Request = %+v, want zone-a and the batch %v", req, tt.want.delete)
			}
		})
	}
}

// No batch, no question: a plan that deletes nothing for its own reasons
// does not ask the budget, and a recorded intent does not change its reason.
func TestDecideAsksTheBudgetOnlyForABatch(t *testing.T) {
	in := with(group(outdated("zone-a", 3), updated("zone-b", 3)), func(in *Input) {
		in.Paused = true
		in.Intents = []disruption.Intent{intentOn(*in, "zone-b", v1alpha1.DisruptionEviction, "eviction of pod zone-b-0", 0, "zone-b-0")}
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
	in.Intents = []disruption.Intent{intentOn(in, "zone-b", v1alpha1.DisruptionEviction, "x", 0, "zone-b-0")}
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
	if !reflect.DeepEqual(v.Intents, in.Intents) || !v.Now.Equal(testNow) {
		t.Errorf("view intents %+v at %v, want the input's %+v", v.Intents, v.Now, in.Intents)
	}
}
