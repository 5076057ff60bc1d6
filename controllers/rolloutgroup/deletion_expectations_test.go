package rolloutgroup

import (
	"testing"
	"time"

	"github.com/echelon-operator/echelon/test/builders"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestDeletionExpectationsHidesDeletedPodsUntilTheCacheCatchesUp(t *testing.T) {
	group := types.NamespacedName{Namespace: "ns", Name: "g"}
	other := types.NamespacedName{Namespace: "ns", Name: "other"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := newDeletionExpectations()
	a, b := builders.MakePod("", "a", 0).UID("uid-a").Obj(), builders.MakePod("", "a", 1).UID("uid-b").Obj()
	tr.Expect(group, a, now)
	tr.Expect(group, b, now)

	// The cache still shows both pods live: both are pending.
	if got := tr.Pending(group, []*corev1.Pod{a, b}, now.Add(time.Second)); got.Len() != 2 {
		t.Fatalf("pending = %v, want both pods", got.UnsortedList())
	}
	// Another group never sees them.
	if got := tr.Pending(other, []*corev1.Pod{a, b}, now); got.Len() != 0 {
		t.Fatalf("pending for another group = %v, want none", got.UnsortedList())
	}
	// The cache shows a terminating and b gone, replaced by a new pod with the same name.
	replaced := builders.MakePod("", "a", 1).UID("uid-b2").Obj()
	got := tr.Pending(group, []*corev1.Pod{builders.MakePod("", "a", 0).UID("uid-a").Terminating(time.Now()).Obj(), replaced}, now.Add(2*time.Second))
	if got.Len() != 0 {
		t.Fatalf("pending = %v, want none once the cache caught up", got.UnsortedList())
	}
	// Forgotten for good: the old UID showing up again (a stale cache) is not pending.
	if got := tr.Pending(group, []*corev1.Pod{a}, now.Add(3*time.Second)); got.Len() != 0 {
		t.Fatalf("pending = %v, want none after forgetting", got.UnsortedList())
	}
}

func TestDeletionExpectationsTrustsTheCacheAfterTTL(t *testing.T) {
	group := types.NamespacedName{Namespace: "ns", Name: "g"}
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tr := newDeletionExpectations()
	a := builders.MakePod("", "a", 0).UID("uid-a").Obj()
	tr.Expect(group, a, now)
	if got := tr.Pending(group, []*corev1.Pod{a}, now.Add(deletionTTL+time.Second)); got.Len() != 0 {
		t.Fatalf("pending = %v, want none after the TTL", got.UnsortedList())
	}
}
