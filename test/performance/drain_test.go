/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"flag"
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
)

var drainScenario = scenario{members: 3, replicas: 30, maxUnavailable: 5}

func TestDrainFloor(t *testing.T) {
	// 30 pods a zone, 5 at a time: 6 batches a zone, 18 in all.
	if got := drainScenario.floor(1500 * time.Millisecond); got != 27*time.Second {
		t.Errorf("floor = %v, want 18 batches x 1.5s = 27s", got)
	}
	// 30 by 4: 8 batches a zone, the last of 2 pods.
	if got := (scenario{members: 3, replicas: 30, maxUnavailable: 4}).floor(time.Second); got != 24*time.Second {
		t.Errorf("floor = %v, want 24 batches x 1s", got)
	}
}

func TestOwnerOf(t *testing.T) {
	tests := []struct {
		pod     string
		owner   string
		ordinal int
	}{
		{"zone-a-0", "zone-a", 0},
		{"zone-c-29", "zone-c", 29},
		{"zone-c-30", "", -1}, // above the wanted ordinals
		{"zone-b-01", "", -1},
		{"floor-3", "", -1},
		{"guarded-00-1", "", -1},
	}
	for _, tt := range tests {
		if owner, n := ownerOf(tt.pod, drainScenario); owner != tt.owner || n != tt.ordinal {
			t.Errorf("ownerOf(%q) = %q, %d; want %q, %d", tt.pod, owner, n, tt.owner, tt.ordinal)
		}
	}
}

func TestCheckPlacement(t *testing.T) {
	s := scenario{members: 3, replicas: 2, maxUnavailable: 1}
	allowed := map[string]string{"n0": "zone-a", "n1": "zone-b", "n2": "zone-c", "n3": "zone-a"}
	where := map[string]string{"zone-a-0": "n0", "zone-a-1": "n3", "zone-b-0": "n1", "zone-b-1": "n1", "zone-c-0": "n2", "zone-c-1": "n2"}
	got, err := checkPlacement(where, allowed, s)
	if err != nil {
		t.Fatal(err)
	}
	if want := map[string]int{"n0": 1, "n1": 2, "n2": 2, "n3": 1}; !maps.Equal(got, want) {
		t.Errorf("checkPlacement = %v, want %v", got, want)
	}
	for pod, node := range map[string]string{"zone-a-1": "n1", "zone-b-0": "n9", "zone-c-1": ""} {
		bad := maps.Clone(where)
		bad[pod] = node
		if _, err := checkPlacement(bad, allowed, s); err == nil || !strings.Contains(err.Error(), pod) {
			t.Errorf("%s on %q: err = %v, want one naming the pod", pod, node, err)
		}
	}
	// After a drain: no pod of the group on a drained node, so none counted there.
	if got, err := checkPlacement(map[string]string{}, map[string]string{"n0": "zone-a"}, s); err != nil || got["n0"] != 0 {
		t.Errorf("checkPlacement of no pods = %v, %v", got, err)
	}
}

func TestByDecision(t *testing.T) {
	admitted, refused, errs := byDecision(map[string]float64{
		"allowed/allowed": 90, "allowed/pod-terminating": 3, "denied/HeldByOtherZone": 400, "denied/ZoneBudgetExhausted": 50, "error/hold-contended": 7,
	})
	if admitted != 93 || refused != 450 || errs != 7 {
		t.Errorf("byDecision = %d, %d, %d", admitted, refused, errs)
	}
}

func TestDrainOutput(t *testing.T) {
	// As kubectl drain prints it: a refusal retried, and a failure it gives
	// up on, which it prints in its summary and again on its own.
	out := `node/kwok-node-4 cordoned
evicting pod bench-x/zone-b-1
evicting pod bench-x/zone-b-0
error when evicting pods/"zone-b-1" -n "bench-x" (will retry after 5s): admission webhook "eviction.echelon.dev" denied the request: RolloutGroup bench: zone zone-a holds the disruption budget
evicting pod bench-x/zone-b-1
pod/zone-b-0 evicted
pod/zone-b-4
error: unable to drain node "kwok-node-4" due to error: [error when evicting pods/"zone-b-1" -n "bench-x": Internal error occurred: failed calling webhook "eviction.echelon.dev": failed to call webhook: Post "https://127.0.0.1:35155/admission/eviction?timeout=10s": context deadline exceeded], continuing command...
There are pending nodes to be drained:
 kwok-node-4
error when evicting pods/"zone-b-1" -n "bench-x": Internal error occurred: failed calling webhook "eviction.echelon.dev": failed to call webhook: Post "https://127.0.0.1:35155/admission/eviction?timeout=10s": context deadline exceeded
--- bench: exit status 1; running kubectl drain again
node/kwok-node-4 already cordoned
evicting pod bench-x/zone-b-1
pod/zone-b-1 evicted
node/kwok-node-4 drained
`
	got := drainOutput(out)
	if got.evicted != 2 || got.retries != 1 || got.evictionErrors != 1 || !strings.HasPrefix(got.firstFailure, `error: unable to drain node "kwok-node-4" due to error: [error when evicting pods/"zone-b-1"`) {
		t.Errorf("drainOutput = %+v; want 2 evicted, 1 retry, 1 error and the failure", got)
	}
}

func readyPod(name string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid}, Status: corev1.PodStatus{
		Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}}}
}

func TestZonesShort(t *testing.T) {
	s := scenario{members: 3, replicas: 2, maxUnavailable: 1}
	pods := map[string]*corev1.Pod{}
	for _, m := range memberNames {
		for i := range 2 {
			name := fmt.Sprintf("%s-%d", m, i)
			pods[name] = readyPod(name, types.UID(name))
		}
	}
	if got := zonesShort(pods, s); len(got) != 0 {
		t.Fatalf("every pod Ready: short %v", got)
	}
	delete(pods, "zone-a-1")
	terminating := readyPod("zone-b-0", "b0")
	terminating.DeletionTimestamp = &metav1.Time{Time: time.Now()}
	pods["zone-b-0"] = terminating
	notReady := readyPod("zone-c-1", "c1")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	pods["zone-c-1"] = notReady
	pods["zone-c-2"] = notReady // above the wanted ordinals: not looked at
	want := "[zone-a (zone-a-1 missing) zone-b (zone-b-0 terminating) zone-c (zone-c-1 not Ready)]"
	if got := zonesShort(pods, s); fmt.Sprint(got) != want {
		t.Errorf("zonesShort = %v, want %v", got, want)
	}
}

// TestShortZones plays a watch: zone a loses a pod and gets it back, then
// zone b loses one while zone c is short, then both are whole.
func TestShortZones(t *testing.T) {
	s := scenario{members: 3, replicas: 1, maxUnavailable: 1}
	z := newShortZones(s)
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tick := func(d time.Duration) time.Time { at = at.Add(d); return at }
	for _, m := range memberNames {
		z.observe(readyPod(m+"-0", types.UID(m)), false, tick(0))
	}
	z.observe(readyPod("zone-a-0", "a"), true, tick(time.Second))
	z.observe(readyPod("zone-a-0", "a2"), false, tick(time.Second))
	z.observe(readyPod("floor-0", "f"), true, tick(time.Second)) // not the group's
	if got := z.stretches(at); len(got) != 0 {
		t.Fatalf("one zone short at a time: stretches %+v", got)
	}
	notReady := readyPod("zone-c-0", "c")
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	z.observe(notReady, false, tick(time.Second))
	z.observe(toolscache.DeletedFinalStateUnknown{Key: "ns/zone-b-0", Obj: readyPod("zone-b-0", "zone-b")}, true, tick(time.Second))
	began := at
	if got := z.stretches(tick(500 * time.Millisecond)); len(got) != 1 || got[0].Seconds != 0.5 || got[0].From != began {
		t.Fatalf("open stretch = %+v", got)
	}
	z.observe(readyPod("zone-c-0", "c"), false, tick(1500*time.Millisecond))
	got := z.stretches(tick(time.Hour))
	want := "[zone-b (zone-b-0 missing) zone-c (zone-c-0 not Ready)]"
	if len(got) != 1 || got[0].Seconds != 2 || fmt.Sprint(got[0].Zones) != want {
		t.Errorf("stretches = %+v, want one of 2s with %s", got, want)
	}
}

func TestDrainOptionsValidate(t *testing.T) {
	var o drainOptions
	bindDrainFlags(flag.NewFlagSet("bench", flag.ContinueOnError), &o)
	if err := o.validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	if err := (drainOptions{}).validate(); err == nil {
		t.Error("a zero --drain-timeout was accepted")
	}
}

func TestPrintDrain(t *testing.T) {
	r := &drainResult{
		PodStartSeconds: 1, Zones: 3, PodsPerZone: 30, MaxUnavailable: 5, NodesDrained: 9, Batches: 18,
		PodsPerNode:  map[string]int{"kwok-node-0": 10, "kwok-node-1": 10},
		BatchSeconds: []float64{1.2, 1.3, 1.25}, BatchMedianSeconds: 1.25, FloorSeconds: 22.5,
		DrainsSeconds: []float64{100, 250.5}, WallSeconds: 252, Ratio: 11.2,
		Decisions: map[string]float64{"allowed/allowed": 90, "denied/HeldByOtherZone": 300}, Admitted: 90, Refused: 300,
		KubectlEvicted: 90, KubectlRetries: 300, KubectlEvictionErrors: 6, DrainRestarts: 2, DrainFailure: "error: unable to drain node", Evictions: 90, ZoneOrder: []string{"zone-b", "zone-a", "zone-c"},
		PeakUnavailable: map[string]int{"zone-a": 5, "zone-b": 5, "zone-c": 4},
		Breaches:        []string{"Jan  1 00:00:00.000 zone-a-1 rolled while zone-b has 1 pods unavailable"},
	}
	var b bytes.Buffer
	printDrain(&b, []*drainResult{r})
	out := b.String()
	// Words as printed, whatever the table's padding.
	flat := strings.Join(strings.Fields(out), " ")
	for _, want := range []string{
		"Drain of 90 pods in 3 zones (3 StatefulSets x 30 pods, OnDelete, Parallel) on 9 fake nodes (10 pods each)",
		"18 batches (6 per zone x 3 zones)",
		"floor: 18 batches x median",
		"22.50s",
		"wall / floor",
		"11.20",
		"wall per batch (the eviction hold's lease is 15s) 14.00s",
		"1m40s .. 4m10.5s",
		"90 / 300 / 0",
		"allowed/allowed 90",
		"90 / 300 / 6",
		"kubectl drains that failed and were run again 2",
		"breaches: an eviction while another zone was short (must be 0) 1",
		"first failed drain: error: unable to drain node",
		"zone-b zone-a zone-c",
		"zone-a 5, zone-b 5, zone-c 4",
		"breach: Jan 1 00:00:00.000 zone-a-1 rolled",
	} {
		if !strings.Contains(flat, want) {
			t.Errorf("printDrain lacks %q:\n%s", want, out)
		}
	}
}
