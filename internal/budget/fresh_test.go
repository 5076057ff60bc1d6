package budget

import (
	"context"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func TestCovers(t *testing.T) {
	for _, tc := range []struct {
		have, need string
		want       bool
	}{
		{"", "", false},   // a cache that cannot say covers nothing
		{"", "10", false}, // idem
		{"10", "", true},  // nothing needed
		{"10", "10", true},
		{"11", "10", true},
		{"9", "10", false},
		{"100", "99", true}, // numerically, not as strings
		{"99", "100", false},
		{"x", "10", false}, // not comparable: read live
		{"10", "x", false},
	} {
		if got := Covers(tc.have, tc.need); got != tc.want {
			t.Errorf("Covers(%q, %q) = %v, want %v", tc.have, tc.need, got, tc.want)
		}
	}
}

func TestWaitCovered(t *testing.T) {
	ctx := context.Background()
	var rv atomic.Int64
	rv.Store(5)
	clock := func(string) string { return strconv.FormatInt(rv.Load(), 10) }
	if got := WaitCovered(ctx, clock, "ns", "5", 0); got != "5" {
		t.Errorf("covered at once: got %q, want 5", got)
	}
	if got := WaitCovered(ctx, nil, "ns", "", time.Second); got != "" {
		t.Errorf("no clock: got %q, want \"\" (read live)", got)
	}
	start := time.Now()
	if got := WaitCovered(ctx, clock, "ns", "6", 20*time.Millisecond); got != "" {
		t.Errorf("never covered: got %q, want \"\"", got)
	}
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Errorf("gave up after %s, before the 20ms it may wait", waited)
	}
	go func() {
		time.Sleep(5 * time.Millisecond)
		rv.Store(7)
	}()
	if got := WaitCovered(ctx, clock, "ns", "6", 10*time.Second); got != "7" {
		t.Errorf("covered by the cache catching up: got %q, want 7", got)
	}
	canceled, cancel := context.WithCancel(ctx)
	cancel()
	if got := WaitCovered(canceled, clock, "ns", "8", 10*time.Second); got != "" {
		t.Errorf("context ended: got %q, want \"\"", got)
	}
}

// TestRecordsSeen: a record needs views from the version it was first seen
// in; a later version with the same record (a condition written) does not
// raise it; one this process wrote needs the view it was decided on.
func TestRecordsSeen(t *testing.T) {
	var seen RecordsSeen
	rg := func(rv string, intents ...string) *v1alpha1.RolloutGroup {
		g := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{UID: "g", ResourceVersion: rv}}
		if len(intents) > 0 {
			g.Status.Disruption = &v1alpha1.DisruptionHold{}
			for _, z := range intents {
				g.Status.Disruption.Intents = append(g.Status.Disruption.Intents, v1alpha1.DisruptionIntent{Zone: z, Reason: v1alpha1.DisruptionEviction})
			}
		}
		return g
	}
	if got := seen.Need(rg("7")); got != "" {
		t.Errorf("a record of no intent: need %q, want none", got)
	}
	if got := seen.Need(rg("8", "zone-a")); got != "8" {
		t.Errorf("never seen: need %q, want its own version 8", got)
	}
	seen.Observe(rg("10", "zone-a"))
	seen.Observe(rg("12", "zone-a")) // status written again, same record
	if got := seen.Need(rg("12", "zone-a")); got != "10" {
		t.Errorf("same record since 10: need %q, want 10", got)
	}
	seen.Observe(rg("15", "zone-a", "zone-c"))
	if got := seen.Need(rg("15", "zone-a", "zone-c")); got != "15" {
		t.Errorf("record changed at 15: need %q, want 15", got)
	}
	if got := seen.Need(rg("16", "zone-a", "zone-b")); got != "16" {
		t.Errorf("a record not seen yet: need %q, want its own version 16", got)
	}
	// This process wrote zone-b's intent at 20, deciding on a view at 14.
	seen.Wrote(rg("20", "zone-a", "zone-b"), "14")
	if got := seen.Need(rg("20", "zone-a", "zone-b")); got != "14" {
		t.Errorf("written on a view at 14: need %q, want 14", got)
	}
	seen.Observe(rg("20", "zone-a", "zone-b")) // the watch brings the write back
	if got := seen.Need(rg("21", "zone-a", "zone-b")); got != "14" {
		t.Errorf("the watch's copy of the write: need %q, want 14 still", got)
	}
	seen.Wrote(rg("22", "zone-b"), "") // decided on a live read
	if got := seen.Need(rg("22", "zone-b")); got != "22" {
		t.Errorf("written after a live read: need %q, want the write's 22", got)
	}
	seen.Forget("g")
	if got := seen.Need(rg("22", "zone-b")); got != "22" {
		t.Errorf("forgotten: need %q, want its own version", got)
	}
}
