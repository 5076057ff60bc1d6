package budget

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
)

// TestNamespaceClock: a namespace's clock is the highest resourceVersion of
// its pods a handler was told of, deletions and tombstones included; it
// never goes back, and says nothing of a namespace it was told nothing of.
func TestNamespaceClock(t *testing.T) {
	pod := func(ns, rv string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p", ResourceVersion: rv}}
	}
	var c namespaceClock
	if got := c.at("a"); got != "" {
		t.Fatalf("told nothing: %q, want \"\"", got)
	}
	c.tell(pod("a", "10"))
	c.tell(pod("a", "9")) // an older version, told late by a relist: ignored
	c.tell(pod("b", "100"))
	c.tell(pod("a", "")) // no version: ignored
	c.tell("not a pod")  // ignored
	if got := c.at("a"); got != "10" {
		t.Errorf("a: %q, want 10", got)
	}
	c.tell(toolscache.DeletedFinalStateUnknown{Key: "a/p", Obj: pod("a", "12")})
	if got := c.at("a"); got != "12" {
		t.Errorf("a after a tombstone: %q, want 12", got)
	}
	if got := c.at("b"); got != "100" {
		t.Errorf("b: %q, want 100", got)
	}
	if got := c.at("c"); got != "" {
		t.Errorf("c: %q, want \"\"", got)
	}
}
