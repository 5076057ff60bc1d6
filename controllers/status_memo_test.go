package controllers

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func TestStatusMemoServesTheWriteUntilTheCacheMovesOn(t *testing.T) {
	memo := newStatusMemo()
	cachedBefore := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "g", ResourceVersion: "10"}}
	written := cachedBefore.DeepCopy()
	written.ResourceVersion = "11"
	written.Status.PodsRolled = 5
	memo.Wrote("10", written)

	if got := memo.Freshest(cachedBefore); got.Status.PodsRolled != 5 || got.ResourceVersion != "11" {
		t.Fatalf("stale cache: got podsRolled %d rv %s, want the written status", got.Status.PodsRolled, got.ResourceVersion)
	}
	cachedAfter := written.DeepCopy()
	cachedAfter.ResourceVersion = "12"
	cachedAfter.Status.PodsRolled = 6
	if got := memo.Freshest(cachedAfter); got.Status.PodsRolled != 6 {
		t.Fatalf("fresh cache: got podsRolled %d, want the cache's 6", got.Status.PodsRolled)
	}
	// Once the cache moved on, the memo is dropped.
	if got := memo.Freshest(cachedBefore); got.Status.PodsRolled != 0 {
		t.Fatalf("after the memo was dropped: got podsRolled %d, want the cached 0", got.Status.PodsRolled)
	}
}
