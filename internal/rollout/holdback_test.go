package rollout

import (
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/echelon-operator/echelon/internal/fuzzinput"
	"github.com/echelon-operator/echelon/test/builders"
)

func TestHoldBack(t *testing.T) {
	tests := []struct {
		name string
		in   Input
		// held are the pods the hook refuses.
		held []string
		// want is the batch left, and release the partition change left for
		// the current member ("" none, "3->1" lowered, "3->3" no change).
		want    []string
		release string
	}{{
		name: "OnDelete: only the held pod leaves the batch",
		in:   group(outdated("zone-a", 4).MaxUnavailable(3)),
		held: []string{"zone-a-2"},
		want: []string{"zone-a-3", "zone-a-1"},
	}, {
		name: "OnDelete: nothing held, the batch stays",
		in:   group(outdated("zone-a", 4).MaxUnavailable(2)),
		want: []string{"zone-a-3", "zone-a-2"},
	}, {
		name:    "partition: nothing held releases the whole batch",
		in:      group(partitioned("zone-a", 4, 4, oldRev, oldRev).MaxUnavailable(3)),
		want:    []string{"zone-a-3", "zone-a-2", "zone-a-1"},
		release: "4->1",
	}, {
		name:    "partition: the lowest pod held releases the pods above it, the partition stops above it",
		in:      group(partitioned("zone-a", 4, 4, oldRev, oldRev).MaxUnavailable(3)),
		held:    []string{"zone-a-1"},
		want:    []string{"zone-a-3", "zone-a-2"},
		release: "4->2",
	}, {
		name:    "partition: a middle pod held keeps every pod below it too (the StatefulSet controller cannot skip it)",
		in:      group(partitioned("zone-a", 4, 4, oldRev, oldRev).MaxUnavailable(3)),
		held:    []string{"zone-a-2"},
		want:    []string{"zone-a-3"},
		release: "4->3",
	}, {
		name: "partition: the highest pod held releases nothing and the partition stays",
		in:   group(partitioned("zone-a", 4, 4, oldRev, oldRev).MaxUnavailable(3)),
		held: []string{"zone-a-3"},
	}, {
		name: "partition with ordinals.start: the highest pod held releases nothing",
		in: group(makeMember(builders.MakeStatefulSet(testNamespace, "zone-a").Replicas(3).OrdinalsStart(5).RollingUpdate().Partition(3).
			Revision(newRev).CurrentRevision(oldRev).Obj()).Pods(readyPods("zone-a", oldRev, ords(5, 8)...)).MaxUnavailable(2)),
		held: []string{"zone-a-7"},
	}, {
		name: "partition with ordinals.start: the partition is relative to start",
		in: group(makeMember(builders.MakeStatefulSet(testNamespace, "zone-a").Replicas(3).OrdinalsStart(5).RollingUpdate().Partition(3).
			Revision(newRev).CurrentRevision(oldRev).Obj()).Pods(readyPods("zone-a", oldRev, ords(5, 8)...)).MaxUnavailable(3)),
		held:    []string{"zone-a-5"},
		want:    []string{"zone-a-7", "zone-a-6"},
		release: "3->1",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := Decide(tt.in)
			if len(plan.Delete) == 0 {
				t.Fatalf("no batch planned: %s", plan.Message)
			}
			plan.HoldBack(func(pod *corev1.Pod) bool { return slices.Contains(tt.held, pod.Name) })
			if got := podNames(plan.Delete); !slices.Equal(got, tt.want) {
				t.Errorf("batch %v, want %v", got, tt.want)
			}
			release := ""
			for _, c := range plan.PartitionChanges() {
				if c.Member == plan.Current && c.To < c.From {
					release = fmt.Sprintf("%d->%d", c.From, c.To)
					if !c.Release {
						t.Errorf("partition lowered without a release: %+v", c)
					}
				}
			}
			if release != tt.release {
				t.Errorf("partition lowered %q, want %q", release, tt.release)
			}
		})
	}
}

// FuzzHoldBack holds random pods of random plans' batches and checks what
// is left: no held pod goes; an OnDelete batch loses exactly the held pods;
// a partition releases no held pod nor any pod below one, still releases
// exactly the outdated live pods at or above it (checkRelease), and is not
// lowered at all when nothing is left.
func FuzzHoldBack(f *testing.F) {
	f.Add([]byte{})
	fuzzinput.AddRandomSeeds(f, 3, 4, 400, 16, 180)
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzinput.New(data)
		g := generateHoldBackGroup(b)
		plan := Decide(g.in)
		if len(plan.Delete) == 0 {
			return
		}
		held := map[string]bool{}
		for _, pod := range plan.Delete {
			held[pod.Name] = b.Rare(3)
		}
		batch := podNames(plan.Delete)
		partitioned := plan.CurrentPartitioned()
		plan.HoldBack(func(pod *corev1.Pod) bool { return held[pod.Name] })
		left := podNames(plan.Delete)
		for _, name := range left {
			if held[name] {
				t.Fatalf("held pod %s left in the batch %v (was %v)", name, left, batch)
			}
		}
		if !partitioned {
			want := slices.DeleteFunc(slices.Clone(batch), func(n string) bool { return held[n] })
			if !slices.Equal(left, want) {
				t.Fatalf("OnDelete batch %v held %v: left %v, want %v", batch, held, left, want)
			}
			return
		}
		var cur memberView
		for i, m := range g.in.Members {
			if m.Name == plan.Current {
				cur = g.view(i)
			}
		}
		if len(plan.Delete) == 0 {
			if to, _ := partitionAfter(plan, cur); to < cur.partition {
				t.Fatalf("%s: every pod of %v held, partition lowered from %d to %d", cur.name, batch, cur.partition, to)
			}
			return
		}
		if err := g.checkRelease(plan, cur); err != nil {
			t.Fatalf("batch %v held %v: %v\n%s", batch, held, err, g.describe())
		}
		to, _ := partitionAfter(plan, cur)
		for name, h := range held {
			if ord := ordinalOf(cur.live, podByName(g, plan.Current, name)); h && ord >= cur.start+to {
				t.Fatalf("%s: held pod %s released by partition %d", cur.name, name, to)
			}
		}
	})
}

// generateHoldBackGroup is a group whose first member has a batch to go
// more often than FuzzDecide's groups do: long-Ready pods, old or new at
// random, behind a random partition (most often) or OnDelete, a second
// member complete.
func generateHoldBackGroup(b *fuzzinput.Bytes) fuzzGroup {
	g := fuzzGroup{in: Input{Now: testNow, Deleting: sets.New[types.UID]()}}
	replicas, start := 1+b.Intn(8), 0
	if b.Rare(4) {
		start = 1 + b.Intn(3)
	}
	maxUnav := 1 + b.Intn(4)
	sts := builders.MakeStatefulSet(testNamespace, "zone-a").Replicas(int32(replicas)).Revision(newRev).CurrentRevision(oldRev)
	if start > 0 {
		sts.OrdinalsStart(int32(start))
	}
	if b.Rare(4) {
		sts.OnDelete()
	} else {
		sts.RollingUpdate().Partition(int32(b.Intn(replicas + 1)))
	}
	var pods []*corev1.Pod
	for ord := start; ord < start+replicas; ord++ {
		rev := oldRev
		if b.Rare(3) {
			rev = newRev
		}
		pods = append(pods, builders.MakePod(testNamespace, "zone-a", ord).Revision(rev).Obj())
	}
	g.in.Members = []Member{makeMember(sts.Obj()).Pods(pods).MaxUnavailable(maxUnav).Obj(), updated("zone-b", 2).Obj()}
	g.members = []fuzzMember{
		{name: "zone-a", maxUnavailable: fuzzMaxUnavailable{set: true, value: maxUnav}, wanted: ords(start, start+replicas)},
		{name: "zone-b", wanted: ords(0, 2)},
	}
	return g
}

func podByName(g fuzzGroup, member, name string) *corev1.Pod {
	for _, m := range g.in.Members {
		if m.Name != member {
			continue
		}
		for _, p := range m.Pods {
			if p.Name == name {
				return p
			}
		}
	}
	return nil
}
