/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
)

func TestBenchGroups(t *testing.T) {
	s := scenario{members: 3, replicas: 30, maxUnavailable: 5}
	groups := benchGroups(s, 2)
	want := []group{
		{name: groupName, members: []string{"zone-a", "zone-b", "zone-c"}},
		{name: "idle-01", members: []string{"idle-01-zone-a", "idle-01-zone-b", "idle-01-zone-c"}},
		{name: "idle-02", members: []string{"idle-02-zone-a", "idle-02-zone-b", "idle-02-zone-c"}},
	}
	if !slices.EqualFunc(groups, want, func(a, b group) bool { return a.name == b.name && slices.Equal(a.members, b.members) }) {
		t.Errorf("benchGroups = %+v, want %+v", groups, want)
	}
	names := statefulSetNames(groups)
	if len(names) != 10 || names[0] != "zone-a" || names[9] != floorName {
		t.Errorf("statefulSetNames = %v, want the 9 members and then %q", names, floorName)
	}
}

func TestForEachBoundsConcurrency(t *testing.T) {
	const n, workers = 200, 7
	var running, peak atomic.Int32
	var mu sync.Mutex
	seen := map[int]int{}
	err := forEach(context.Background(), n, workers, func(_ context.Context, i int) error {
		now := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		mu.Lock()
		seen[i]++
		mu.Unlock()
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) != n {
		t.Errorf("forEach called f for %d indices, want %d", len(seen), n)
	}
	for i, times := range seen {
		if times != 1 {
			t.Errorf("forEach called f(%d) %d times", i, times)
		}
	}
	if p := peak.Load(); p > workers {
		t.Errorf("forEach ran %d calls at once, more than %d workers", p, workers)
	}
}

func TestForEachJoinsErrorsAndStopsOnCancel(t *testing.T) {
	errOdd := errors.New("odd")
	err := forEach(context.Background(), 10, 3, func(_ context.Context, i int) error {
		if i%2 == 1 {
			return errOdd
		}
		return nil
	})
	if !errors.Is(err, errOdd) {
		t.Errorf("forEach = %v, want the calls' errors", err)
	}

	// The first call cancels: with one worker, no other call starts.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var calls atomic.Int32
	err = forEach(ctx, 100, 1, func(context.Context, int) error {
		calls.Add(1)
		cancel()
		return nil
	})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("forEach after cancel = %v, want context.Canceled", err)
	}
	if c := calls.Load(); c != 1 {
		t.Errorf("forEach made %d calls, want 1: none after its context was cancelled", c)
	}
}
