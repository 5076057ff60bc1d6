/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"testing"
	"time"
)

func TestHandoverTimes(t *testing.T) {
	signal := at(1000)
	newLeader := []request{
		answered("GET leases", 400, 410, 200), // a standby only reads the Lease
		answered("GET leases", 1400, 1410, 200),
		answered("UPDATE leases", 2900, 2950, 409), // lost a race: not yet the leader
		answered("UPDATE leases", 3400, 3420, 200),
		answered("DELETE pods", 3600, 3700, 404), // a stale view, refused
		answered("DELETE pods", 3800, 3850, 200),
		answered("DELETE pods", 3790, 3900, 200),
	}
	takeover, gap, err := handoverTimes(newLeader, signal)
	if err != nil {
		t.Fatal(err)
	}
	if takeover != 2420*time.Millisecond {
		t.Errorf("takeover = %s, want 2.42s (to the answer of the first successful Lease write)", takeover)
	}
	if gap != 2790*time.Millisecond {
		t.Errorf("gap = %s, want 2.79s (to the arrival of the first successful deletion)", gap)
	}

	if _, _, err := handoverTimes(newLeader[:3], signal); err == nil {
		t.Error("no error when the new leader never took the Lease")
	}
	if _, _, err := handoverTimes(newLeader[:5], signal); err == nil {
		t.Error("no error when the new leader never deleted a pod")
	}
}
