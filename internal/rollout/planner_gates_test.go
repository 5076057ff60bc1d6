package rollout

import (
	"testing"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

// moved is a member rolled in this rollout: every pod on newRev, its stable
// revision oldRev.
func moved(name string, replicas int) *memberBuilder {
	return updated(name, replicas).Stable(oldRev)
}

// pendingMove is a member whose template moved but whose pods all still run
// oldRev.
func pendingMove(name string, replicas int) *memberBuilder {
	return outdated(name, replicas).Stable(oldRev)
}

// restored is a member whose template a rollback restored to oldRev (its
// stable revision) while its pods still run newRev; currentRevision was
// advanced to newRev when it completed.
func restored(name string, replicas int, onNew ...int) *memberBuilder {
	sts := builders.MakeStatefulSet(testNamespace, name).Replicas(int32(replicas)).OnDelete().Revision(oldRev).CurrentRevision(newRev).Obj()
	b := makeMember(sts).Stable(oldRev)
	for o := range replicas {
		rev := oldRev
		if len(onNew) == 0 || containsInt(onNew, o) {
			rev = newRev
		}
		b.Pods(builders.MakePod(testNamespace, name, o).Revision(rev).Obj())
	}
	return b
}

func containsInt(xs []int, x int) bool {
	for _, y := range xs {
		if x == y {
			return true
		}
	}
	return false
}

func TestDecideGates(t *testing.T) {
	hold := &Hold{Reason: v1alpha1.ReasonWaitingForAnalysis, Message: "AfterBatch gate after zone-a: checks running"}
	tests := []struct {
		name       string
		in         Input
		want       wantPlan
		wantDue    string
		wantReason string
	}{{
		name: "a hold deletes nothing and says why",
		in:   with(group(outdated("zone-a", 3)), func(in *Input) { in.Hold = hold }),
		want: wantPlan{current: "zone-a", message: []string{"zone-a: 0/3 updated, AfterBatch gate after zone-a: checks running"}},
		// The reason of the hold, not of the planner's step.
		wantReason: v1alpha1.ReasonWaitingForAnalysis,
	}, {
		name: "a member rolled and whole holds the next member until its gate passes",
		in:   with(group(moved("zone-a", 3), pendingMove("zone-b", 3)), func(in *Input) { in.MemberGates = true }),
		want: wantPlan{current: "zone-b", phases: phases{"zone-a": complete, "zone-b": rolling},
			message: []string{"zone-b: 0/3 updated, waiting for the AfterMember gate of zone-a"}},
		wantDue: "zone-a", wantReason: v1alpha1.ReasonWaitingForAnalysis,
	}, {
		name: "once its gate passed for the update revision the next member rolls",
		in: with(group(moved("zone-a", 3).GatePassed(newRev), pendingMove("zone-b", 3)),
			func(in *Input) { in.MemberGates = true }),
		want: wantPlan{current: "zone-b", delete: []string{"zone-b-2"}},
	}, {
		name: "a gate passed for an older revision does not count",
		in: with(group(moved("zone-a", 3).GatePassed("r0"), pendingMove("zone-b", 3)),
			func(in *Input) { in.MemberGates = true }),
		want:    wantPlan{current: "zone-b"},
		wantDue: "zone-a",
	}, {
		name: "the last member's gate keeps a complete group waiting",
		in: with(group(moved("zone-a", 2).GatePassed(newRev), moved("zone-b", 2)),
			func(in *Input) { in.MemberGates = true }),
		want:    wantPlan{complete: true, current: "zone-b", message: []string{"waiting for the AfterMember gate of zone-b"}},
		wantDue: "zone-b", wantReason: v1alpha1.ReasonWaitingForAnalysis,
	}, {
		name: "a member not yet whole is not gated: its pods come first",
		in: with(group(makeMember(onDeleteSTS("zone-a", 2).StatusReplicas(2, 1).Obj()).Stable(oldRev).
			Pods(readyPods("zone-a", newRev, 0), builders.MakePod(testNamespace, "zone-a", 1).Revision(newRev).NotReady().Obj()), pendingMove("zone-b", 2)),
			func(in *Input) { in.MemberGates = true }),
		want:       wantPlan{current: "zone-a", message: []string{"zone-a: 2/2 updated, waiting: 1/2 pods not available"}},
		wantReason: v1alpha1.ReasonWaitingForPods,
	}, {
		name: "a member whose stable revision is unknown is not gated",
		in:   with(group(updated("zone-a", 2), pendingMove("zone-b", 2)), func(in *Input) { in.MemberGates = true }),
		want: wantPlan{current: "zone-b", delete: []string{"zone-b-1"}},
	}, {
		name: "without member gates nothing is due",
		in:   group(moved("zone-a", 2), pendingMove("zone-b", 2)),
		want: wantPlan{current: "zone-b", delete: []string{"zone-b-1"}},
	}, {
		name: "no gate is due while rolling back",
		in: with(group(restored("zone-a", 2), moved("zone-b", 2)),
			func(in *Input) { in.MemberGates, in.RollingBack = true, true }),
		want: wantPlan{current: "zone-a", delete: []string{"zone-a-1"}},
	}, {
		name: "the first due member in list order is named",
		in: with(group(moved("zone-a", 1), moved("zone-b", 1), pendingMove("zone-c", 1)),
			func(in *Input) { in.MemberGates = true }),
		want:    wantPlan{current: "zone-c"},
		wantDue: "zone-a",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Decide(tt.in)
			checkPlan(t, got, tt.want)
			if got.GateDue != tt.wantDue {
				t.Errorf("GateDue = %q, want %q", got.GateDue, tt.wantDue)
			}
			if tt.wantReason != "" && got.Reason != tt.wantReason {
				t.Errorf("Reason = %q, want %q", got.Reason, tt.wantReason)
			}
		})
	}
}

// The rollback plan: members whose template was restored roll back most
// recently rolled first (a partly rolled member, then the others in reverse
// list order), within maxUnavailable, one member at a time, and never a member
// whose template is not restored yet.
func TestDecideRollback(t *testing.T) {
	rollingBack := func(in *Input) { in.RollingBack = true }
	tests := []struct {
		name string
		in   Input
		want wantPlan
	}{{
		name: "the last member of the list comes back first",
		in:   with(group(restored("zone-a", 3), restored("zone-b", 3), moved("zone-c", 3).Stable(newRev)), rollingBack),
		want: wantPlan{current: "zone-b", delete: []string{"zone-b-2"}, phases: phases{"zone-a": pending, "zone-b": rolling, "zone-c": complete}},
	}, {
		name: "in a rollout the same members go in list order",
		in:   group(restored("zone-a", 3), restored("zone-b", 3)),
		want: wantPlan{current: "zone-a", delete: []string{"zone-a-2"}},
	}, {
		name: "a partly rolled member comes back before a fully rolled one",
		in:   with(group(restored("zone-a", 4), restored("zone-b", 4, 3), restored("zone-c", 4)), rollingBack),
		want: wantPlan{current: "zone-b", delete: []string{"zone-b-3"}},
	}, {
		name: "the budget is the member's maxUnavailable",
		in:   with(group(restored("zone-a", 5).MaxUnavailable(2), restored("zone-b", 5).MaxUnavailable(3)), rollingBack),
		want: wantPlan{current: "zone-b", delete: []string{"zone-b-4", "zone-b-3", "zone-b-2"}},
	}, {
		name: "a not-Ready pod of the member uses the budget but is replaced first",
		in: with(group(restored("zone-a", 4), makeMember(builders.MakeStatefulSet(testNamespace, "zone-b").Replicas(4).OnDelete().Revision(oldRev).CurrentRevision(newRev).Obj()).
			Stable(oldRev).MaxUnavailable(2).Pods(readyPods("zone-b", newRev, 0, 1, 3), builders.MakePod(testNamespace, "zone-b", 2).Revision(newRev).NotReady().Obj())), rollingBack),
		want: wantPlan{current: "zone-b", delete: []string{"zone-b-2", "zone-b-3"}},
	}, {
		name: "another member's not-Ready pod stops the rollback",
		in: with(group(makeMember(builders.MakeStatefulSet(testNamespace, "zone-a").Replicas(2).OnDelete().Revision(oldRev).CurrentRevision(newRev).Obj()).
			Stable(oldRev).Pods(readyPods("zone-a", newRev, 0), builders.MakePod(testNamespace, "zone-a", 1).Revision(oldRev).NotReady().Obj()), restored("zone-b", 2)), rollingBack),
		want: wantPlan{current: "zone-a", message: []string{"zone-a: 1/2 updated"}},
	}, {
		name: "a member whose template is not restored yet is not rolled forward",
		in:   with(group(restored("zone-a", 2), pendingMove("zone-b", 2)), rollingBack),
		want: wantPlan{current: "zone-b", message: []string{"zone-b: 0/2 updated, waiting for its template of revision r1 to be restored"}},
	}, {
		name: "a member without a known stable revision is not rolled while rolling back",
		in:   with(group(outdated("zone-a", 2)), rollingBack),
		want: wantPlan{current: "zone-a", message: []string{"restored"}},
	}, {
		name: "batchInterval paces a rollback too",
		in: with(group(restored("zone-a", 2), restored("zone-b", 2)), func(in *Input) {
			in.RollingBack, in.BatchInterval, in.LastBatchTime = true, time.Minute, testNow.Add(-10*time.Second)
		}),
		want: wantPlan{current: "zone-b", requeueAfter: 50 * time.Second, message: []string{"next batch after batchInterval"}},
	}, {
		name: "spec.paused pauses a rollback",
		in:   with(group(restored("zone-a", 2)), func(in *Input) { in.RollingBack, in.Paused = true, true }),
		want: wantPlan{current: "zone-a", message: []string{"paused"}},
	}, {
		name: "a rolled-back group is complete",
		in:   with(group(restored("zone-a", 2, -1), restored("zone-b", 2, -1)), rollingBack),
		want: wantPlan{complete: true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runDecide(t, tt.in, tt.want) })
	}
}
