/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"fmt"
	"syscall"
	"time"
)

// handoverResult is how the rollout went on when its leader failed.
type handoverResult struct {
	Signal string `json:"signal"`
	// AfterPodsDeleted is how many pods the first leader had deleted when the
	// bench signalled it: half the rollout's, the end of its middle batch at
	// the floor.
	AfterPodsDeleted int `json:"afterPodsDeleted"`
	// TakeoverSeconds runs from the signal to the answer to the new leader's
	// first successful write of the Lease.
	TakeoverSeconds float64 `json:"takeoverSeconds"`
	// GapSeconds runs from the signal to the new leader's first pod deletion
	// reaching the API server. Had no leader failed, the next deletion would
	// have come one batch (the floor's median) after the last.
	GapSeconds float64 `json:"gapSeconds"`
}

// failLeader signals the leader once it has deleted `after` pods since the
// rollout began, and returns when it did.
func failLeader(ctx context.Context, leader *instance, sig syscall.Signal, after int, began time.Time) (time.Time, error) {
	if err := leader.counter.waitUntil(ctx, fmt.Sprintf("the leader to delete %d pods", after), func(reqs []request) bool {
		return countSince(reqs, began, successfulPodDeletion) >= after
	}); err != nil {
		return time.Time{}, err
	}
	return leader.send(sig)
}

// handoverTimes reads, from the new leader's requests, how long after the
// signal it took the Lease and how long until it deleted a pod.
func handoverTimes(reqs []request, signalled time.Time) (takeover, gap time.Duration, err error) {
	lease, ok := firstSince(reqs, signalled, successfulLeaseWrite)
	if !ok {
		return 0, 0, fmt.Errorf("the new leader wrote no Lease after the signal")
	}
	deletion, ok := firstSince(reqs, signalled, successfulPodDeletion)
	if !ok {
		return 0, 0, fmt.Errorf("the new leader deleted no pod after the signal")
	}
	return lease.done.Sub(signalled), deletion.arrived.Sub(signalled), nil
}
