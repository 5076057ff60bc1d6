/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"flag"
	"maps"
	"strings"
	"testing"
	"time"
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
		"wall per batch",
		"14.00s",
		"1m40s .. 4m10.5s",
		"90 / 300 / 0",
		"allowed/allowed 90",
		"90 / 300 / 6",
		"kubectl drains that failed and were run again 2",
		"breaches: an eviction while another zone was short, or two zones short at once (must be 0) 1",
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
