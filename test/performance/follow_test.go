/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	var fifty []time.Duration
	for i := 1; i <= 50; i++ {
		fifty = append(fifty, time.Duration(i)*time.Millisecond)
	}
	tests := []struct {
		ds   []time.Duration
		p    float64
		want time.Duration
	}{
		{fifty, 0.99, 50 * time.Millisecond}, // nearest rank: of 50, p99 is the largest
		{fifty, 0.90, 45 * time.Millisecond},
		{fifty, 0.50, 25 * time.Millisecond},
		{[]time.Duration{3, 1, 2}, 0.99, 3},
		{[]time.Duration{7}, 0.01, 7},
	}
	for _, tt := range tests {
		if got := percentile(tt.ds, tt.p); got != tt.want {
			t.Errorf("percentile(%d samples, %v) = %v, want %v", len(tt.ds), tt.p, got, tt.want)
		}
	}
}

func TestReplicasSeenAllSince(t *testing.T) {
	t0 := time.Now()
	s := &replicasSeen{events: []replicasEvent{
		{at: t0.Add(-time.Second), name: "zone-b", replicas: 3}, // before the change: not this sample
		{at: t0.Add(10 * time.Millisecond), name: "zone-b", replicas: 3},
		{at: t0.Add(20 * time.Millisecond), name: "zone-b", replicas: 3}, // a later event of the same value
		{at: t0.Add(5 * time.Millisecond), name: "zone-c", replicas: 2},
	}}
	if _, ok := s.allSince([]string{"zone-b", "zone-c"}, 3, t0); ok {
		t.Fatal("zone-c never reached 3, yet all followers were reported there")
	}
	s.events = append(s.events, replicasEvent{at: t0.Add(30 * time.Millisecond), name: "zone-c", replicas: 3})
	got, ok := s.allSince([]string{"zone-b", "zone-c"}, 3, t0)
	if !ok || got != 30*time.Millisecond {
		t.Errorf("allSince = %v, %t; want 30ms (the last follower's first arrival), true", got, ok)
	}
}
