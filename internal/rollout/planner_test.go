package rollout

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

const (
	oldRev = "r1" // the revision pods run before the rollout
	newRev = "r2" // status.updateRevision
)

// onDeleteSTS is a settled OnDelete StatefulSet whose template moved from oldRev
// to newRev.
func onDeleteSTS(name string, replicas int32) *builders.StatefulSetWrapper {
	return builders.MakeStatefulSet(testNamespace, name).Replicas(replicas).OnDelete().Revision(newRev).CurrentRevision(oldRev)
}

// outdated is a member whose replicas all run oldRev and are available.
func outdated(name string, replicas int) *memberBuilder {
	return makeMember(onDeleteSTS(name, int32(replicas)).Obj()).Pods(readyPods(name, oldRev, ords(0, replicas)...))
}

// updated is a member whose replicas all run newRev and are available.
func updated(name string, replicas int) *memberBuilder {
	return makeMember(onDeleteSTS(name, int32(replicas)).Obj()).Pods(readyPods(name, newRev, ords(0, replicas)...))
}

func group(members ...*memberBuilder) Input {
	in := Input{Now: testNow}
	for _, m := range members {
		in.Members = append(in.Members, m.Obj())
	}
	return in
}

// with applies changes to an Input, for the group-level knobs.
func with(in Input, change func(*Input)) Input {
	change(&in)
	return in
}

// wantPlan is what a test expects of a Plan. delete, current, complete, blocked
// and requeueAfter are always compared; phases and message only when set.
type wantPlan struct {
	delete       []string
	current      string
	complete     bool
	blocked      *Blocker // Reason and Member compared; Message must name the member
	requeueAfter time.Duration
	phases       map[string]v1alpha1.MemberPhase
	message      []string // substrings of Plan.Message
}

func checkPlan(t *testing.T, got Plan, want wantPlan) {
	t.Helper()
	if names := podNames(got.Delete); !slices.Equal(names, want.delete) {
		t.Errorf("Delete = %v, want %v (message %q)", names, want.delete, got.Message)
	}
	if got.Current != want.current {
		t.Errorf("Current = %q, want %q", got.Current, want.current)
	}
	if got.Complete != want.complete {
		t.Errorf("Complete = %v, want %v", got.Complete, want.complete)
	}
	switch {
	case want.blocked == nil && got.Blocked != nil:
		t.Errorf("Blocked = %+v, want nil", *got.Blocked)
	case want.blocked != nil && got.Blocked == nil:
		t.Errorf("Blocked = nil, want reason %s on member %q", want.blocked.Reason, want.blocked.Member)
	case want.blocked != nil:
		if got.Blocked.Reason != want.blocked.Reason || got.Blocked.Member != want.blocked.Member {
			t.Errorf("Blocked = %s on %q, want %s on %q", got.Blocked.Reason, got.Blocked.Member, want.blocked.Reason, want.blocked.Member)
		}
		if !strings.Contains(got.Blocked.Message, want.blocked.Member) || got.Message != got.Blocked.Message {
			t.Errorf("Blocked.Message = %q, Message = %q; want both to name %q", got.Blocked.Message, got.Message, want.blocked.Member)
		}
	}
	if got.RequeueAfter != want.requeueAfter {
		t.Errorf("RequeueAfter = %v, want %v", got.RequeueAfter, want.requeueAfter)
	}
	for name, phase := range want.phases {
		ms, ok := memberState(got, name)
		if !ok {
			t.Errorf("no MemberState for %q", name)
			continue
		}
		if ms.Phase != phase {
			t.Errorf("member %s phase = %s, want %s (message %q)", name, ms.Phase, phase, ms.Message)
		}
	}
	for _, s := range want.message {
		if !strings.Contains(got.Message, s) {
			t.Errorf("Message = %q, want it to contain %q", got.Message, s)
		}
	}
}

func runDecide(t *testing.T, in Input, want wantPlan) {
	t.Helper()
	got := Decide(in)
	checkPlan(t, got, want)
	if len(got.Members) != len(in.Members) {
		t.Errorf("len(Members) = %d, want %d", len(got.Members), len(in.Members))
	}
}

func podNames(pods []*corev1.Pod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

func memberState(p Plan, name string) (MemberState, bool) {
	for _, ms := range p.Members {
		if ms.Name == name {
			return ms, true
		}
	}
	return MemberState{}, false
}

type phases = map[string]v1alpha1.MemberPhase

const (
	complete = v1alpha1.MemberComplete
	rolling  = v1alpha1.MemberRolling
	pending  = v1alpha1.MemberPending
	waiting  = v1alpha1.MemberWaiting
	blocked  = v1alpha1.MemberBlocked
)

func TestResolveMaxUnavailable(t *testing.T) {
	tests := []struct {
		name     string
		value    *intstr.IntOrString
		replicas int32
		want     int32
	}{
		{"unset defaults to 1", nil, 10, 1},
		{"integer is taken as is", ptr.To(intstr.FromInt32(3)), 10, 3},
		{"integer above replicas is kept", ptr.To(intstr.FromInt32(5)), 3, 5},
		{"zero is raised to 1", ptr.To(intstr.FromInt32(0)), 10, 1},
		{"negative is raised to 1", ptr.To(intstr.FromInt32(-2)), 10, 1},
		{"percent of replicas", ptr.To(intstr.FromString("30%")), 10, 3},
		{"percent floors (30% of 12 is 3.6)", ptr.To(intstr.FromString("30%")), 12, 3},
		{"percent floors to 0 is raised to 1 (25% of 3)", ptr.To(intstr.FromString("25%")), 3, 1},
		{"0% is raised to 1", ptr.To(intstr.FromString("0%")), 10, 1},
		{"100% is every replica", ptr.To(intstr.FromString("100%")), 7, 7},
		{"percent of zero replicas is 1", ptr.To(intstr.FromString("50%")), 0, 1},
		{"malformed string falls back to 1", ptr.To(intstr.FromString("lots")), 10, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ResolveMaxUnavailable(tt.value, tt.replicas); got != tt.want {
				t.Errorf("ResolveMaxUnavailable(%v, %d) = %d, want %d", tt.value, tt.replicas, got, tt.want)
			}
		})
	}
}

func TestDecideMemberOrder(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want wantPlan
	}{{
		name: "every pod updated and available: complete, nothing deleted",
		in:   group(updated("zone-a", 3), updated("zone-b", 3), updated("zone-c", 3)),
		want: wantPlan{complete: true, phases: phases{"zone-a": complete, "zone-b": complete, "zone-c": complete}},
	}, {
		name: "first member rolled first, highest ordinal first",
		in:   group(outdated("zone-a", 3), outdated("zone-b", 3), outdated("zone-c", 3)),
		want: wantPlan{delete: []string{"zone-a-2"}, current: "zone-a",
			phases:  phases{"zone-a": rolling, "zone-b": pending, "zone-c": pending},
			message: []string{"zone-a", "0/3 updated"}},
	}, {
		name: "first outdated member in list order is rolled after complete ones",
		in:   group(updated("zone-a", 3), outdated("zone-b", 3), outdated("zone-c", 3)),
		want: wantPlan{delete: []string{"zone-b-2"}, current: "zone-b",
			phases: phases{"zone-a": complete, "zone-b": rolling, "zone-c": pending}},
	}, {
		name: "list order wins over name order",
		in:   group(outdated("zone-c", 3), outdated("zone-a", 3)),
		want: wantPlan{delete: []string{"zone-c-2"}, current: "zone-c",
			phases: phases{"zone-c": rolling, "zone-a": pending}},
	}, {
		name: "partly rolled member continues with its highest outdated ordinal",
		in: group(
			makeMember(onDeleteSTS("zone-a", 4).Obj()).Pods(readyPods("zone-a", oldRev, 0, 1), readyPods("zone-a", newRev, 2, 3)),
			outdated("zone-b", 2)),
		want: wantPlan{delete: []string{"zone-a-1"}, current: "zone-a", message: []string{"2/4 updated"}},
	}, {
		name: "partly rolled member is finished before an earlier untouched one",
		in: group(outdated("zone-a", 3),
			makeMember(onDeleteSTS("zone-b", 3).Obj()).Pods(readyPods("zone-b", oldRev, 0, 1), readyPods("zone-b", newRev, 2)),
			makeMember(onDeleteSTS("zone-c", 3).Obj()).Pods(readyPods("zone-c", oldRev, 0), readyPods("zone-c", newRev, 1, 2))),
		want: wantPlan{delete: []string{"zone-b-1"}, current: "zone-b",
			phases: phases{"zone-a": pending, "zone-b": rolling, "zone-c": pending}},
	}, {
		name: "member scaled to zero is complete",
		in:   group(makeMember(onDeleteSTS("zone-a", 0).Obj()), outdated("zone-b", 2)),
		want: wantPlan{delete: []string{"zone-b-1"}, current: "zone-b", phases: phases{"zone-a": complete, "zone-b": rolling}},
	}, {
		name: "unset replicas means one pod",
		in:   group(makeMember(onDeleteSTS("zone-a", 0).NilReplicas().Obj()).Pods(readyPods("zone-a", oldRev, 0))),
		want: wantPlan{delete: []string{"zone-a-0"}, current: "zone-a"},
	}, {
		name: "rollback: pods on status.currentRevision are rolled when the template was reverted",
		in: group(
			makeMember(onDeleteSTS("zone-a", 3).Revision(oldRev).CurrentRevision(newRev).Obj()).
				Pods(readyPods("zone-a", newRev, 0, 1, 2)),
			updated("zone-b", 3)),
		want: wantPlan{delete: []string{"zone-a-2"}, current: "zone-a", phases: phases{"zone-a": rolling}},
	}, {
		name: "a pod on a third revision is outdated too",
		in: group(makeMember(onDeleteSTS("zone-a", 3).Obj()).
			Pods(readyPods("zone-a", newRev, 0, 2), readyPods("zone-a", "r0", 1))),
		want: wantPlan{delete: []string{"zone-a-1"}, current: "zone-a"},
	}, {
		name: "a pod without a revision label is outdated",
		in: group(makeMember(onDeleteSTS("zone-a", 2).Obj()).
			Pods(readyPods("zone-a", newRev, 0), builders.MakePod(testNamespace, "zone-a", 1).Obj())),
		want: wantPlan{delete: []string{"zone-a-1"}, current: "zone-a"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runDecide(t, tt.in, tt.want) })
	}
}

func TestDecideMaxUnavailable(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want wantPlan
	}{{
		name: "unset deletes one pod",
		in:   group(outdated("zone-a", 5)),
		want: wantPlan{delete: []string{"zone-a-4"}, current: "zone-a"},
	}, {
		name: "1 deletes one pod",
		in:   group(outdated("zone-a", 5).MaxUnavailable(1)),
		want: wantPlan{delete: []string{"zone-a-4"}, current: "zone-a"},
	}, {
		name: "3 deletes the three highest ordinals",
		in:   group(outdated("zone-a", 5).MaxUnavailable(3)),
		want: wantPlan{delete: []string{"zone-a-4", "zone-a-3", "zone-a-2"}, current: "zone-a"},
	}, {
		name: "above replicas deletes every outdated pod",
		in:   group(outdated("zone-a", 3).MaxUnavailable(10)),
		want: wantPlan{delete: []string{"zone-a-2", "zone-a-1", "zone-a-0"}, current: "zone-a"},
	}, {
		name: "only outdated pods are deleted, whatever the budget",
		in: group(makeMember(onDeleteSTS("zone-a", 4).Obj()).MaxUnavailable(4).
			Pods(readyPods("zone-a", oldRev, 0, 2), readyPods("zone-a", newRev, 1, 3))),
		want: wantPlan{delete: []string{"zone-a-2", "zone-a-0"}, current: "zone-a"},
	}, {
		name: "30% of 10 replicas is 3",
		in:   group(outdated("zone-a", 10).MaxUnavailable("30%")),
		want: wantPlan{delete: []string{"zone-a-9", "zone-a-8", "zone-a-7"}, current: "zone-a"},
	}, {
		name: "30% of 12 replicas floors to 3",
		in:   group(outdated("zone-a", 12).MaxUnavailable("30%")),
		want: wantPlan{delete: []string{"zone-a-11", "zone-a-10", "zone-a-9"}, current: "zone-a"},
	}, {
		name: "25% of 3 replicas floors to 0 and is raised to 1",
		in:   group(outdated("zone-a", 3).MaxUnavailable("25%")),
		want: wantPlan{delete: []string{"zone-a-2"}, current: "zone-a"},
	}, {
		name: "percent is of the rolled member's replicas, not the group's",
		in:   group(updated("zone-a", 20).MaxUnavailable("30%"), outdated("zone-b", 4).MaxUnavailable("50%")),
		want: wantPlan{delete: []string{"zone-b-3", "zone-b-2"}, current: "zone-b"},
	}, {
		// The controller resolves member-over-group; the planner must use each
		// member's own value, not the first member's.
		name: "member override beats group value",
		in:   group(updated("zone-a", 5).MaxUnavailable(1), outdated("zone-b", 5).MaxUnavailable(3), outdated("zone-c", 5).MaxUnavailable(1)),
		want: wantPlan{delete: []string{"zone-b-4", "zone-b-3", "zone-b-2"}, current: "zone-b"},
	}, {
		name: "pods already unavailable use the budget",
		in: group(makeMember(onDeleteSTS("zone-a", 5).Obj()).MaxUnavailable(3).
			Pods(builders.MakePod(testNamespace, "zone-a", 0).Revision(newRev).NotReady().Obj(), readyPods("zone-a", oldRev, 1, 2, 3, 4))),
		want: wantPlan{delete: []string{"zone-a-4", "zone-a-3"}, current: "zone-a", message: []string{"deleting 2 pods"}},
	}, {
		name: "budget used up: nothing deleted until a pod is available",
		in: group(makeMember(onDeleteSTS("zone-a", 5).Obj()).MaxUnavailable(2).
			Pods(builders.MakePod(testNamespace, "zone-a", 4).Revision(newRev).NotReady().Obj(),
				builders.MakePod(testNamespace, "zone-a", 3).Revision(newRev).Terminating(testNow.Add(-time.Second)).Obj(),
				readyPods("zone-a", oldRev, 0, 1, 2))),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": rolling}, message: []string{"2/2 pods unavailable"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runDecide(t, tt.in, tt.want) })
	}
}

func TestDecideUnavailablePods(t *testing.T) {
	terminatingA2 := builders.MakePod(testNamespace, "zone-a", 2).Revision(oldRev).Terminating(testNow.Add(-time.Second)).Obj()
	deletedA2 := builders.MakePod(testNamespace, "zone-a", 2).Revision(oldRev).Obj() // the cache still shows it Ready
	tests := []struct {
		name string
		in   Input
		want wantPlan
	}{{
		name: "not-Ready outdated pod is deleted first and free of budget",
		in: group(makeMember(onDeleteSTS("zone-a", 5).Obj()).
			Pods(readyPods("zone-a", oldRev, 0, 2, 3, 4), builders.MakePod(testNamespace, "zone-a", 1).Revision(oldRev).NotReady().Obj())),
		want: wantPlan{delete: []string{"zone-a-1"}, current: "zone-a"},
	}, {
		name: "not-Ready outdated pod first, then ready ones within the budget",
		in: group(makeMember(onDeleteSTS("zone-a", 5).Obj()).MaxUnavailable(2).
			Pods(readyPods("zone-a", oldRev, 0, 2, 3, 4), builders.MakePod(testNamespace, "zone-a", 1).Revision(oldRev).NotReady().Obj())),
		want: wantPlan{delete: []string{"zone-a-1", "zone-a-4"}, current: "zone-a"},
	}, {
		name: "every not-Ready outdated pod is deleted even beyond maxUnavailable",
		in: group(makeMember(onDeleteSTS("zone-a", 4).Obj()).MaxUnavailable(1).
			Pods(readyPods("zone-a", oldRev, 1, 3),
				builders.MakePod(testNamespace, "zone-a", 0).Revision(oldRev).NotReady().Obj(),
				builders.MakePod(testNamespace, "zone-a", 2).Revision(oldRev).Phase(corev1.PodPending).Obj())),
		want: wantPlan{delete: []string{"zone-a-2", "zone-a-0"}, current: "zone-a"},
	}, {
		name: "member with not-available pods is finished first even if later in the list",
		in: group(outdated("zone-a", 3),
			makeMember(onDeleteSTS("zone-b", 3).Obj()).MaxUnavailable(2).
				Pods(readyPods("zone-b", oldRev, 0, 1), builders.MakePod(testNamespace, "zone-b", 2).Revision(newRev).NotReady().Obj())),
		want: wantPlan{delete: []string{"zone-b-1"}, current: "zone-b",
			phases: phases{"zone-a": pending, "zone-b": rolling}},
	}, {
		name: "later member with an updated but not-Ready pod is waited on",
		in: group(outdated("zone-a", 3),
			makeMember(onDeleteSTS("zone-b", 3).Obj()).
				Pods(readyPods("zone-b", newRev, 0, 2), builders.MakePod(testNamespace, "zone-b", 1).Revision(newRev).NotReady().Obj())),
		want: wantPlan{current: "zone-b", phases: phases{"zone-a": pending, "zone-b": waiting},
			message: []string{"zone-b", "waiting: 1/3 pods not available"}},
	}, {
		name: "two members with not-available pods: nothing deleted",
		in: group(
			makeMember(onDeleteSTS("zone-a", 3).Obj()).MaxUnavailable(3).
				Pods(readyPods("zone-a", oldRev, 1, 2), builders.MakePod(testNamespace, "zone-a", 0).Revision(oldRev).NotReady().Obj()),
			makeMember(onDeleteSTS("zone-b", 3).Obj()).MaxUnavailable(3).Pods(readyPods("zone-b", oldRev, 0, 1)),
			outdated("zone-c", 3)),
		want: wantPlan{message: []string{"zone-a", "zone-b"}},
	}, {
		name: "missing pod counts as unavailable and uses the budget",
		in:   group(makeMember(onDeleteSTS("zone-a", 3).Obj()).Pods(readyPods("zone-a", oldRev, 0, 2))),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": rolling}},
	}, {
		name: "missing pod leaves the rest of the budget",
		in:   group(makeMember(onDeleteSTS("zone-a", 3).Obj()).MaxUnavailable(2).Pods(readyPods("zone-a", oldRev, 0, 2))),
		want: wantPlan{delete: []string{"zone-a-2"}, current: "zone-a"},
	}, {
		name: "missing pod in another member stops the rollout",
		in:   group(outdated("zone-a", 3), makeMember(onDeleteSTS("zone-b", 3).Obj()).Pods(readyPods("zone-b", newRev, 0, 1))),
		want: wantPlan{current: "zone-b", phases: phases{"zone-a": pending, "zone-b": waiting}},
	}, {
		name: "terminating pod uses a slot",
		in:   group(makeMember(onDeleteSTS("zone-a", 3).Obj()).Pods(readyPods("zone-a", oldRev, 0, 1), terminatingA2)),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": rolling}},
	}, {
		name: "terminating pod is not deleted again",
		in:   group(makeMember(onDeleteSTS("zone-a", 3).Obj()).MaxUnavailable(2).Pods(readyPods("zone-a", oldRev, 0, 1), terminatingA2)),
		want: wantPlan{delete: []string{"zone-a-1"}, current: "zone-a"},
	}, {
		name: "pod Echelon deleted that the cache still shows uses a slot",
		in: with(group(makeMember(onDeleteSTS("zone-a", 3).Obj()).Pods(readyPods("zone-a", oldRev, 0, 1), deletedA2)),
			func(in *Input) { in.Deleting = sets.New(deletedA2.UID) }),
		want: wantPlan{current: "zone-a"},
	}, {
		name: "pod Echelon deleted that the cache still shows is not deleted again",
		in: with(group(makeMember(onDeleteSTS("zone-a", 3).Obj()).MaxUnavailable(2).Pods(readyPods("zone-a", oldRev, 0, 1), deletedA2)),
			func(in *Input) { in.Deleting = sets.New(deletedA2.UID) }),
		want: wantPlan{delete: []string{"zone-a-1"}, current: "zone-a"},
	}, {
		name: "a Deleting entry for another UID does not hide a recreated pod",
		in: with(group(makeMember(onDeleteSTS("zone-a", 3).Obj()).Pods(readyPods("zone-a", oldRev, 0, 1, 2))),
			func(in *Input) { in.Deleting = sets.New(deletedA2.UID) }),
		want: wantPlan{delete: []string{"zone-a-2"}, current: "zone-a"},
	}, {
		name: "terminating pod in another member stops the rollout",
		in: group(outdated("zone-a", 3),
			makeMember(onDeleteSTS("zone-b", 2).Obj()).Pods(readyPods("zone-b", newRev, 0), builders.MakePod(testNamespace, "zone-b", 1).Revision(newRev).Terminating(testNow.Add(-time.Second)).Obj())),
		want: wantPlan{current: "zone-b", phases: phases{"zone-b": waiting}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runDecide(t, tt.in, tt.want) })
	}
}

func TestDecideBlocked(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want wantPlan
	}{{
		name: "missing StatefulSet blocks the group",
		in:   group(outdated("zone-a", 3), makeMissingMember("zone-b"), outdated("zone-c", 3)),
		want: wantPlan{blocked: &Blocker{Reason: v1alpha1.ReasonMemberNotFound, Member: "zone-b"},
			phases: phases{"zone-b": blocked}, message: []string{"does not exist"}},
	}, {
		name: "a member of an update strategy Echelon does not control blocks the group",
		in: group(outdated("zone-a", 3),
			makeMember(onDeleteSTS("zone-b", 3).Strategy("Canary").Obj()).Pods(readyPods("zone-b", oldRev, 0, 1, 2))),
		want: wantPlan{blocked: &Blocker{Reason: v1alpha1.ReasonUnsupportedStrategy, Member: "zone-b"},
			phases: phases{"zone-b": blocked}, message: []string{"Canary", "OnDelete and RollingUpdate"}},
	}, {
		name: "member claimed by another group blocks the group",
		in:   group(outdated("zone-a", 3).ClaimedBy("other-group"), outdated("zone-b", 3)),
		want: wantPlan{blocked: &Blocker{Reason: v1alpha1.ReasonMemberClaimedByOtherGroup, Member: "zone-a"},
			phases: phases{"zone-a": blocked}, message: []string{"other-group"}},
	}, {
		name: "blocked even when the blocking member is complete",
		in:   group(outdated("zone-a", 3), updated("zone-b", 3).ClaimedBy("other-group")),
		want: wantPlan{blocked: &Blocker{Reason: v1alpha1.ReasonMemberClaimedByOtherGroup, Member: "zone-b"},
			phases: phases{"zone-b": blocked}},
	}, {
		name: "first blocker in list order is reported, every blocking member is marked",
		in: group(outdated("zone-a", 3), makeMember(onDeleteSTS("zone-b", 3).Strategy("Canary").Obj()),
			makeMissingMember("zone-c")),
		want: wantPlan{blocked: &Blocker{Reason: v1alpha1.ReasonUnsupportedStrategy, Member: "zone-b"},
			phases: phases{"zone-a": pending, "zone-b": blocked, "zone-c": blocked}},
	}, {
		name: "blocked wins over an unsettled member",
		in:   group(makeMember(onDeleteSTS("zone-a", 3).NotObserved().Obj()), makeMissingMember("zone-b")),
		want: wantPlan{blocked: &Blocker{Reason: v1alpha1.ReasonMemberNotFound, Member: "zone-b"}},
	}, {
		name: "invalid spec blocks the group before any member is looked at",
		in: with(group(outdated("zone-a", 3), makeMissingMember("zone-b")),
			func(in *Input) { in.InvalidSpec = "spec.selector: invalid value" }),
		want: wantPlan{blocked: &Blocker{Reason: v1alpha1.ReasonInvalidSpec}, message: []string{"spec.selector: invalid value"},
			phases: phases{"zone-a": pending, "zone-b": blocked}},
	}, {
		name: "no members: blocked with the given reason",
		in:   Input{NoMembersReason: "selector app=ingester matches no StatefulSet", Now: testNow},
		want: wantPlan{blocked: &Blocker{Reason: v1alpha1.ReasonMemberNotFound}, message: []string{"selector app=ingester matches no StatefulSet"}},
	}, {
		name: "no members and no reason: blocked with a default message",
		in:   Input{Now: testNow},
		want: wantPlan{blocked: &Blocker{Reason: v1alpha1.ReasonMemberNotFound}, message: []string{"no member"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runDecide(t, tt.in, tt.want) })
	}
}

func TestDecideWaits(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want wantPlan
	}{{
		name: "paused: nothing deleted",
		in:   with(group(outdated("zone-a", 3).MaxUnavailable(3)), func(in *Input) { in.Paused = true }),
		want: wantPlan{current: "zone-a", message: []string{"paused"}},
	}, {
		name: "paused: not-Ready outdated pods are not deleted either",
		in: with(group(makeMember(onDeleteSTS("zone-a", 2).Obj()).
			Pods(readyPods("zone-a", oldRev, 0), builders.MakePod(testNamespace, "zone-a", 1).Revision(oldRev).NotReady().Obj())),
			func(in *Input) { in.Paused = true }),
		want: wantPlan{current: "zone-a"},
	}, {
		name: "batchInterval not elapsed: nothing deleted, requeue for the rest",
		in: with(group(outdated("zone-a", 3)), func(in *Input) {
			in.BatchInterval = time.Minute
			in.LastBatchTime = testNow.Add(-20 * time.Second)
		}),
		want: wantPlan{current: "zone-a", requeueAfter: 40 * time.Second, message: []string{"batchInterval"}},
	}, {
		name: "batchInterval elapsed: next batch deleted",
		in: with(group(outdated("zone-a", 3)), func(in *Input) {
			in.BatchInterval = time.Minute
			in.LastBatchTime = testNow.Add(-time.Minute)
		}),
		want: wantPlan{delete: []string{"zone-a-2"}, current: "zone-a"},
	}, {
		name: "batchInterval without a previous batch: first batch deleted",
		in:   with(group(outdated("zone-a", 3)), func(in *Input) { in.BatchInterval = time.Hour }),
		want: wantPlan{delete: []string{"zone-a-2"}, current: "zone-a"},
	}, {
		name: "minReadySeconds: pod Ready for less is not available, requeue when it will be",
		in: with(group(
			makeMember(onDeleteSTS("zone-a", 3).Obj()).Pods(readyPods("zone-a", newRev, 0, 1),
				builders.MakePod(testNamespace, "zone-a", 2).Revision(newRev).Ready(testNow.Add(-10*time.Second)).Obj()),
			outdated("zone-b", 3)),
			func(in *Input) { in.MinReadySeconds = 30 }),
		want: wantPlan{current: "zone-a", requeueAfter: 20 * time.Second,
			phases: phases{"zone-a": waiting, "zone-b": pending}},
	}, {
		name: "minReadySeconds: pod Ready for exactly that long is available",
		in: with(group(
			makeMember(onDeleteSTS("zone-a", 3).Obj()).Pods(readyPods("zone-a", newRev, 0, 1),
				builders.MakePod(testNamespace, "zone-a", 2).Revision(newRev).Ready(testNow.Add(-30*time.Second)).Obj()),
			outdated("zone-b", 3)),
			func(in *Input) { in.MinReadySeconds = 30 }),
		want: wantPlan{delete: []string{"zone-b-2"}, current: "zone-b", phases: phases{"zone-a": complete}},
	}, {
		name: "minReadySeconds: outdated pod not yet available is replaced free of budget",
		in: with(group(makeMember(onDeleteSTS("zone-a", 3).Obj()).
			Pods(readyPods("zone-a", oldRev, 1, 2), builders.MakePod(testNamespace, "zone-a", 0).Revision(oldRev).Ready(testNow.Add(-5*time.Second)).Obj())),
			func(in *Input) { in.MinReadySeconds = 30 }),
		want: wantPlan{delete: []string{"zone-a-0"}, current: "zone-a", requeueAfter: 25 * time.Second},
	}, {
		name: "StatefulSet generation not observed yet: nothing deleted",
		in:   group(makeMember(onDeleteSTS("zone-a", 3).Generation(2).NotObserved().Obj()).Pods(readyPods("zone-a", oldRev, 0, 1, 2))),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": waiting}, message: []string{"generation 2"}},
	}, {
		name: "later member not observed yet: nothing of the group deleted",
		in: group(outdated("zone-a", 3),
			makeMember(onDeleteSTS("zone-b", 3).Generation(5).NotObserved().Obj()).Pods(readyPods("zone-b", oldRev, 0, 1, 2))),
		want: wantPlan{current: "zone-b", phases: phases{"zone-b": waiting}},
	}, {
		name: "empty updateRevision: nothing deleted",
		in:   group(makeMember(onDeleteSTS("zone-a", 3).Revision("").Obj()).Pods(readyPods("zone-a", oldRev, 0, 1, 2))),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": waiting}, message: []string{"update revision"}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runDecide(t, tt.in, tt.want) })
	}
}

func TestDecideOrdinals(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want wantPlan
	}{{
		name: "outdated pods being scaled away are not rolled, and are waited for",
		in: group(makeMember(onDeleteSTS("zone-a", 3).Obj()).
			Pods(readyPods("zone-a", newRev, 0, 1, 2), readyPods("zone-a", oldRev, 3, 4))),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": waiting},
			message: []string{"zone-a", "2 pods above the wanted ordinals still leaving"}},
	}, {
		name: "the scale-down's leaving pods use the member's budget",
		in: group(makeMember(onDeleteSTS("zone-a", 3).Obj()).MaxUnavailable(3).
			Pods(readyPods("zone-a", oldRev, 0, 1, 2, 3, 4))),
		want: wantPlan{delete: []string{"zone-a-2"}, current: "zone-a"},
	}, {
		name: "rolling waits while the scale-down's leaving pods fill the budget",
		in:   group(makeMember(onDeleteSTS("zone-a", 3).Obj()).Pods(readyPods("zone-a", oldRev, 0, 1, 2, 3, 4))),
		want: wantPlan{current: "zone-a", message: []string{"zone-a: 0/3 updated, 2/1 pods unavailable"}},
	}, {
		name: "another member's pod being scaled away stops the rollout, even Ready",
		in: group(makeMember(onDeleteSTS("zone-a", 3).Obj()).
			Pods(readyPods("zone-a", newRev, 0, 1, 2, 3)),
			outdated("zone-b", 2)),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": waiting, "zone-b": pending}},
	}, {
		name: "another member's terminating pod above its replicas stops the rollout",
		in: group(makeMember(onDeleteSTS("zone-a", 3).Obj()).
			Pods(readyPods("zone-a", newRev, 0, 1, 2), builders.MakePod(testNamespace, "zone-a", 3).Revision(newRev).Terminating(testNow.Add(-time.Second)).NotReady().Obj()),
			outdated("zone-b", 2)),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": waiting, "zone-b": pending}},
	}, {
		name: "another member whose status has fewer Ready pods than pods stops the rollout",
		in: group(makeMember(onDeleteSTS("zone-a", 3).StatusReplicas(4, 3).Obj()).
			Pods(readyPods("zone-a", newRev, 0, 1, 2)),
			outdated("zone-b", 2)),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": waiting, "zone-b": pending},
			message: []string{"StatefulSet status shows 3 of 4 pods Ready"}},
	}, {
		// The StatefulSet controller counts a pod it recreated a moment after
		// the pod exists: the cache may show it Ready first. Judged on the
		// pods alone the member would be complete, then waiting for its
		// status, then complete again.
		name: "a member whose status has not counted every wanted pod yet is not complete and stops the rollout",
		in: group(makeMember(onDeleteSTS("zone-a", 4).StatusReplicas(3, 3).Obj()).
			Pods(readyPods("zone-a", newRev, 0, 1, 2, 3)),
			outdated("zone-b", 2)),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": waiting, "zone-b": pending},
			message: []string{"StatefulSet status shows 3 of 4 pods Ready"}},
	}, {
		name: "a member whose status agrees with its pods does not hold the group",
		in: group(makeMember(onDeleteSTS("zone-a", 3).StatusReplicas(3, 3).Obj()).
			Pods(readyPods("zone-a", newRev, 0, 1, 2)),
			outdated("zone-b", 2)),
		want: wantPlan{delete: []string{"zone-b-1"}, current: "zone-b", phases: phases{"zone-a": complete}},
	}, {
		name: "spec.ordinals.start: wanted ordinals start there",
		in: group(makeMember(onDeleteSTS("zone-a", 3).OrdinalsStart(5).Obj()).MaxUnavailable(2).
			Pods(readyPods("zone-a", oldRev, 5, 6, 7))),
		want: wantPlan{delete: []string{"zone-a-7", "zone-a-6"}, current: "zone-a"},
	}, {
		name: "spec.ordinals.start: pods below start are leaving and the missing start ordinal is unavailable",
		in: group(makeMember(onDeleteSTS("zone-a", 3).OrdinalsStart(5).Obj()).
			Pods(readyPods("zone-a", newRev, 0, 6, 7)),
			outdated("zone-b", 3)),
		want: wantPlan{current: "zone-a", phases: phases{"zone-a": waiting, "zone-b": pending}},
	}, {
		name: "pods whose names are not ordinals of the member are ignored",
		in: group(makeMember(onDeleteSTS("zone-a", 2).Obj()).
			Pods(readyPods("zone-a", newRev, 0, 1), readyPods("zone-a-x", oldRev, 1), readyPods("zone-b", oldRev, 0))),
		want: wantPlan{complete: true},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runDecide(t, tt.in, tt.want) })
	}
}

func TestDecideMemberStates(t *testing.T) {
	terminating := builders.MakePod(testNamespace, "zone-b", 3).Revision(newRev).Terminating(testNow.Add(-time.Second)).Obj()
	in := with(group(
		updated("zone-a", 2),
		makeMember(onDeleteSTS("zone-b", 6).Obj()).MaxUnavailable("50%").Pods(
			readyPods("zone-b", oldRev, 0, 1),
			builders.MakePod(testNamespace, "zone-b", 2).Revision(newRev).Ready(testNow.Add(-time.Second)).Obj(), // Ready, not yet available
			terminating,
			builders.MakePod(testNamespace, "zone-b", 4).Revision(oldRev).NotReady().Obj(),
			// zone-b-5 missing
			readyPods("zone-b", oldRev, 6), // being scaled away
		),
		outdated("zone-c", 1),
	), func(in *Input) { in.MinReadySeconds = 10 })

	got := Decide(in)
	want := []MemberState{
		{Name: "zone-a", Replicas: 2, Ready: 2, Available: 2, Updated: 2, MaxUnavailable: 1, Unavailable: 0,
			CurrentRevision: oldRev, UpdateRevision: newRev, UniformRevision: newRev, Phase: complete},
		// Updated counts the terminating pod: it was created from newRev. The pod
		// being scaled away is Leaving.
		{Name: "zone-b", Replicas: 6, Ready: 3, Available: 2, Updated: 2, MaxUnavailable: 3, Unavailable: 4, Leaving: 1,
			ToRoll: 3, Pending: 3, CurrentRevision: oldRev, UpdateRevision: newRev, Phase: rolling},
		{Name: "zone-c", Replicas: 1, Ready: 1, Available: 1, Updated: 0, MaxUnavailable: 1, Unavailable: 0,
			ToRoll: 1, Pending: 1, CurrentRevision: oldRev, UpdateRevision: newRev, UniformRevision: oldRev, Phase: pending},
	}
	if len(got.Members) != len(want) {
		t.Fatalf("got %d members, want %d", len(got.Members), len(want))
	}
	for i, w := range want {
		g := got.Members[i]
		outdatedNames := podNames(g.Outdated)
		g.Outdated, g.Message = nil, ""
		if !reflect.DeepEqual(g, w) {
			t.Errorf("member %d:\n got %+v\nwant %+v", i, g, w)
		}
		wantOutdated := map[string][]string{"zone-b": {"zone-b-0", "zone-b-1", "zone-b-4"}, "zone-c": {"zone-c-0"}}[w.Name]
		slices.Sort(outdatedNames)
		if !slices.Equal(outdatedNames, wantOutdated) {
			t.Errorf("member %s Outdated = %v, want %v", w.Name, outdatedNames, wantOutdated)
		}
	}
	// zone-b has 4 of 6 not available (budget 3 used up): only its not-Ready
	// outdated pod goes; zone-b-2 becomes available in 9s.
	checkPlan(t, got, wantPlan{delete: []string{"zone-b-4"}, current: "zone-b", requeueAfter: 9 * time.Second})
}

func TestDecideBlocksObjectsBeingDeleted(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		want wantPlan
	}{{
		name: "a member StatefulSet being deleted blocks the group",
		in:   group(outdated("zone-a", 3), makeMember(onDeleteSTS("zone-b", 3).Deleting(testNow.Add(-time.Second)).Obj()).Pods(readyPods("zone-b", oldRev, 0, 1, 2))),
		want: wantPlan{blocked: &Blocker{Reason: v1alpha1.ReasonMemberDeleting, Member: "zone-b"}, phases: phases{"zone-b": v1alpha1.MemberBlocked}},
	}, {
		name: "a RolloutGroup being deleted deletes nothing more",
		in:   with(group(outdated("zone-a", 3)), func(in *Input) { in.GroupDeleting = true }),
		want: wantPlan{blocked: &Blocker{Reason: v1alpha1.ReasonGroupDeleting}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) { runDecide(t, tt.in, tt.want) })
	}
}

// TestDecideReasonsAndCounts covers what the status is built from: the reason
// naming what the group does, whether the StatefulSets are settled, how many
// pods a rollout has to roll, and which members get their currentRevision set.
func TestDecideReasonsAndCounts(t *testing.T) {
	tests := []struct {
		name        string
		in          Input
		wantReason  string
		wantSettled bool
		wantToRoll  int32
		wantAdvance []string
	}{{
		name:        "deleting a batch",
		in:          group(outdated("zone-a", 3), outdated("zone-b", 3)),
		wantReason:  v1alpha1.ReasonDeletingPods,
		wantSettled: true, wantToRoll: 6,
	}, {
		name: "waiting for the member's replaced pods",
		in: group(makeMember(onDeleteSTS("zone-a", 3).Obj()).
			Pods(readyPods("zone-a", oldRev, 0, 1), builders.MakePod(testNamespace, "zone-a", 2).Revision(newRev).NotReady().Obj())),
		wantReason:  v1alpha1.ReasonWaitingForPods,
		wantSettled: true, wantToRoll: 2,
	}, {
		name: "waiting for two members that both use availability",
		in: group(makeMember(onDeleteSTS("zone-a", 2).Obj()).Pods(readyPods("zone-a", oldRev, 0)),
			makeMember(onDeleteSTS("zone-b", 2).Obj()).Pods(readyPods("zone-b", oldRev, 0))),
		wantReason:  v1alpha1.ReasonWaitingForMembers,
		wantSettled: true, wantToRoll: 2,
	}, {
		name:        "waiting for another member's scale-down",
		in:          group(makeMember(onDeleteSTS("zone-a", 2).Obj()).Pods(readyPods("zone-a", newRev, 0, 1, 2)), outdated("zone-b", 2)),
		wantReason:  v1alpha1.ReasonWaitingForScale,
		wantSettled: true, wantToRoll: 2, wantAdvance: nil,
	}, {
		name: "waiting for another member's scale-up",
		in: group(makeMember(onDeleteSTS("zone-a", 3).StatusReplicas(2, 2).Obj()).Pods(readyPods("zone-a", newRev, 0, 1)),
			outdated("zone-b", 2)),
		wantReason:  v1alpha1.ReasonWaitingForScale,
		wantSettled: true, wantToRoll: 2, wantAdvance: nil,
	}, {
		name: "waiting for another member's lost pod",
		in: group(makeMember(onDeleteSTS("zone-a", 3).StatusReplicas(3, 2).Obj()).Pods(readyPods("zone-a", newRev, 0, 1), builders.MakePod(testNamespace, "zone-a", 2).Revision(newRev).NotReady().Obj()),
			outdated("zone-b", 2)),
		wantReason:  v1alpha1.ReasonWaitingForPods,
		wantSettled: true, wantToRoll: 2, wantAdvance: nil,
	}, {
		name:        "waiting out batchInterval",
		in:          with(group(outdated("zone-a", 2)), func(in *Input) { in.BatchInterval, in.LastBatchTime = time.Minute, testNow.Add(-time.Second) }),
		wantReason:  v1alpha1.ReasonWaitingForBatchInterval,
		wantSettled: true, wantToRoll: 2,
	}, {
		name:        "paused",
		in:          with(group(outdated("zone-a", 2)), func(in *Input) { in.Paused = true }),
		wantReason:  v1alpha1.ReasonPaused,
		wantSettled: true, wantToRoll: 2,
	}, {
		name:       "a StatefulSet controller that has not observed the new template: not settled, nothing to roll yet",
		in:         group(updated("zone-a", 2), makeMember(onDeleteSTS("zone-b", 2).Generation(4).NotObserved().Obj()).Pods(readyPods("zone-b", newRev, 0, 1))),
		wantReason: v1alpha1.ReasonWaitingForStatefulSet,
	}, {
		name:        "up to date: complete members with an old currentRevision get it advanced",
		in:          group(updated("zone-a", 2), makeMember(onDeleteSTS("zone-b", 2).CurrentRevision(newRev).Obj()).Pods(readyPods("zone-b", newRev, 0, 1))),
		wantReason:  v1alpha1.ReasonUpToDate,
		wantSettled: true, wantAdvance: []string{"zone-a"},
	}, {
		name:        "mid-rollout, the member already complete gets its currentRevision advanced",
		in:          group(updated("zone-a", 2), outdated("zone-b", 2)),
		wantReason:  v1alpha1.ReasonDeletingPods,
		wantSettled: true, wantToRoll: 2, wantAdvance: []string{"zone-a"},
	}, {
		name:        "pods without a revision label count as pods to roll",
		in:          group(makeMember(onDeleteSTS("zone-a", 2).Obj()).Pods(builders.MakePod(testNamespace, "zone-a", 0).NoRevision().Obj(), readyPods("zone-a", newRev, 1))),
		wantReason:  v1alpha1.ReasonDeletingPods,
		wantSettled: true, wantToRoll: 1,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.in)
			if p.Reason != tt.wantReason || p.Settled != tt.wantSettled || p.ToRoll != tt.wantToRoll || !slices.Equal(p.AdvanceRevision, tt.wantAdvance) {
				t.Errorf("Reason=%q Settled=%v ToRoll=%d AdvanceRevision=%v, want %q %v %d %v (message %q)",
					p.Reason, p.Settled, p.ToRoll, p.AdvanceRevision, tt.wantReason, tt.wantSettled, tt.wantToRoll, tt.wantAdvance, p.Message)
			}
		})
	}
}
