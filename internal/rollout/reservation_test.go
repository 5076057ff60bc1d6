package rollout

import (
	"slices"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/test/builders"
)

// TestPartitionSlotsUnderAReservation: a partitioned zone's first batch
// records a reservation of the whole zone; the next slots go under it with
// no record of their own while it is young enough to act on, and only
// while the other zones are whole; an old one is replaced by a new one for
// the rest of the zone.
func TestPartitionSlotsUnderAReservation(t *testing.T) {
	const holder = "RolloutGroup ingester"
	start := func() Input {
		in := group(partitioned("zone-a", 6, 6, oldRev, oldRev).MaxUnavailable(2), partitionedUpdated("zone-b", 3, newRev))
		in.Holder = holder
		return in
	}
	first := Decide(start())
	b := first.Budget
	if b == nil || !b.Verdict.Allowed || b.Reserved || !b.Record() {
		t.Fatalf("first batch: budget %+v, want a reservation to record", b)
	}
	want := []string{"zone-a-5", "zone-a-4", "zone-a-3", "zone-a-2", "zone-a-1", "zone-a-0"}
	var got []string
	for _, p := range b.Verdict.Intent.Pods {
		got = append(got, p.Name)
	}
	if !slices.Equal(got, want) || b.Verdict.Intent.MaxAtOnce != 2 || !slices.Equal(b.Request.Pods, want[:2]) {
		t.Fatalf("first batch %v reserves %v at most %d at once, want %v reserving %v at most 2", b.Request.Pods, got, b.Verdict.Intent.MaxAtOnce, want[:2], want)
	}

	// The first two are replaced and available, the partition at 4: the
	// reservation, decided ago, is what the group's status records.
	after := func(ago time.Duration, change ...func(*Input)) Input {
		in := start()
		sts := builders.MakeStatefulSet(testNamespace, "zone-a").Replicas(6).RollingUpdate().Partition(4).Revision(newRev).CurrentRevision(oldRev).Obj()
		pods := readyPods("zone-a", oldRev, ords(0, 4)...)
		for _, o := range []int{4, 5} {
			pods = append(pods, builders.MakePod(testNamespace, "zone-a", o).Revision(newRev).Created(testNow.Add(-time.Second)).Ready(testNow.Add(-time.Second)).Obj())
		}
		in.Members[0] = makeMember(sts).Pods(pods).MaxUnavailable(2).Obj()
		r := b.Verdict.Intent
		r.Decided, r.Expires = testNow.Add(-ago), testNow.Add(-ago).Add(intentLife)
		in.Intents = []disruption.Intent{r}
		for _, f := range change {
			f(&in)
		}
		return in
	}
	next := Decide(after(5 * time.Second))
	if nb := next.Budget; nb == nil || !nb.Reserved || nb.Record() || nb.Verdict.Record != nil || !slices.Equal(nb.Request.Pods, want[2:4]) ||
		!nb.Verdict.Intent.Decided.Equal(testNow.Add(-5*time.Second)) {
		t.Fatalf("next slot 5 s after the reservation: budget %+v, want %v under the reservation, nothing to record", nb, want[2:4])
	}
	if len(next.PartitionChanges()) != 1 || next.PartitionChanges()[0].To != 2 {
		t.Errorf("partition changes %+v, want zone-a lowered to 2", next.PartitionChanges())
	}

	late := Decide(after(25 * time.Second))
	lb := late.Budget
	if lb == nil || lb.Reserved || !lb.Record() || len(lb.Verdict.Record) != 1 || lb.Verdict.Record[0].MaxAtOnce != 2 || len(lb.Verdict.Record[0].Pods) != 4 {
		t.Fatalf("next slot 25 s after the reservation: budget %+v, want a new reservation of the 4 pods left replacing it", lb)
	}

	disrupted := Decide(after(5*time.Second, func(in *Input) {
		in.Members[1].Pods = slices.Clone(in.Members[1].Pods)
		in.Members[1].Pods[2] = builders.MakePod(testNamespace, "zone-b", 2).Revision(newRev).NotReady().Obj()
	}))
	if len(disrupted.Delete) != 0 || disrupted.Reason == v1alpha1.ReasonDeletingPods {
		t.Fatalf("zone-b not Ready: deletes %v (%s, %s), want nothing", podNames(disrupted.Delete), disrupted.Reason, disrupted.Message)
	}
}
