/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestScenarioBatches(t *testing.T) {
	tests := []struct {
		s    scenario
		want int
	}{
		{scenario{members: 3, replicas: 30, maxUnavailable: 5}, 18},
		{scenario{members: 3, replicas: 10, maxUnavailable: 2}, 15},
		{scenario{members: 3, replicas: 10, maxUnavailable: 3}, 12},
		{scenario{members: 1, replicas: 5, maxUnavailable: 5}, 1},
	}
	for _, tt := range tests {
		if got := tt.s.batches(); got != tt.want {
			t.Errorf("%+v.batches() = %d, want %d", tt.s, got, tt.want)
		}
	}
}

func TestDeletedAfterBatches(t *testing.T) {
	tests := []struct {
		s       scenario
		batches int
		want    int
	}{
		{scenario{members: 3, replicas: 30, maxUnavailable: 5}, 9, 45},
		{scenario{members: 3, replicas: 30, maxUnavailable: 5}, 0, 0},
		{scenario{members: 3, replicas: 30, maxUnavailable: 5}, 18, 90},
		// 10 pods by 3: batches of 3, 3, 3 and 1 per member.
		{scenario{members: 3, replicas: 10, maxUnavailable: 3}, 4, 10},
		{scenario{members: 3, replicas: 10, maxUnavailable: 3}, 6, 16},
		{scenario{members: 3, replicas: 10, maxUnavailable: 3}, 12, 30},
		{scenario{members: 3, replicas: 10, maxUnavailable: 3}, 99, 30},
	}
	for _, tt := range tests {
		if got := tt.s.deletedAfterBatches(tt.batches); got != tt.want {
			t.Errorf("%+v.deletedAfterBatches(%d) = %d, want %d", tt.s, tt.batches, got, tt.want)
		}
	}
}

func TestCases(t *testing.T) {
	opts := caseOptions{
		kinds:            []string{kindScale, kindSingle, kindSIGKILL},
		podStarts:        []time.Duration{time.Second, 5 * time.Second},
		failoverPodStart: 2 * time.Second,
		scalePodStart:    3 * time.Second,
		scale:            scaleOptions{groups: []int{300, 50}, replicas: 40},
	}
	got, err := cases(opts)
	if err != nil {
		t.Fatal(err)
	}
	want := []benchCase{
		{kind: kindSingle, podStart: time.Second, operators: 1},
		{kind: kindSingle, podStart: 5 * time.Second, operators: 1},
		{kind: kindSIGKILL, podStart: 2 * time.Second, operators: 2, handover: syscall.SIGKILL},
		{kind: kindScale, podStart: 3 * time.Second, operators: 1, idleGroups: 49, podsPerStatefulSet: 40, followers: true, profile: true},
		{kind: kindScale, podStart: 3 * time.Second, operators: 1, idleGroups: 299, podsPerStatefulSet: 40, followers: true, profile: true},
	}
	if !slices.Equal(got, want) {
		t.Errorf("cases = %+v,\nwant %+v (in the order of allKinds)", got, want)
	}
	s := scenario{members: 3, replicas: 30, maxUnavailable: 5}
	if title := want[3].title(s); title != "50 groups, 6000 pods" {
		t.Errorf("title of the scale case = %q", title)
	}
	if a, b := want[3].slug(), want[4].slug(); a == b {
		t.Errorf("two scale sizes share the slug %q", a)
	}

	opts.kinds = []string{"single", "failover"}
	if _, err := cases(opts); err == nil {
		t.Error("an unknown scenario was accepted")
	}
}
