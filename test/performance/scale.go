/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// The scale scenario (issue 19): many idle groups, each of 3 StatefulSets
// whose followers (zone-b and zone-c) follow zone-a through ScalingPolicies,
// a third of those followers with a DelayedDownscale too, while one group
// rolls. Besides the rollout's figures it measures the operator's start-up
// to a warm cache, where its memory goes (a heap profile), its CPU while
// everything is idle, and, on the same control plane, an operator that
// caches whole objects (--cache-transforms=false) beside it.
const (
	// scaleSettle is how long after every group is Complete (or, for the
	// operator without transforms, after it is ready) the bench waits before
	// reading the memory: long enough for the last status writes and Events.
	scaleSettle = 10 * time.Second
	// delayedEvery puts a DelayedDownscale on every delayedEvery-th follower.
	delayedEvery = 3
	// A DelayedDownscale's endpoint and delay: the bench never scales down,
	// so neither is used; they only have to be valid.
	delayedPath  = "/prepare-downscale"
	delayedPort  = 8080
	delayedDelay = "1h"
)

// scaleOptions are the flags of the scale scenario.
type scaleOptions struct {
	// groups are the runs' sizes in groups, the rolling one included: one run,
	// on a control plane of its own, each.
	groups   []int
	replicas int
	// idle is the window over which the idle CPU is measured.
	idle time.Duration
	// compare starts, after the rollout, an operator with the cache transforms
	// off on the same control plane, for the memory they save.
	compare bool
	// heapTop is how many functions the heap summary lists.
	heapTop int
}

func bindScaleFlags(fs *flag.FlagSet, o *scaleOptions) {
	o.groups, o.replicas, o.idle, o.compare, o.heapTop = []int{100}, 50, 5*time.Minute, true, 12
	fs.Var((*intList)(&o.groups), "scale-groups", "Comma-separated sizes of the scale scenario in groups of 3 StatefulSets, the rolling one included; one run each, smallest first (e.g. 100,300,1000).")
	fs.IntVar(&o.replicas, "scale-replicas", o.replicas, "Pods per StatefulSet of the scale scenario.")
	fs.DurationVar(&o.idle, "scale-idle", o.idle, "Window over which the scale scenario measures the operator's CPU with every group idle; 0 skips it.")
	fs.BoolVar(&o.compare, "scale-compare-transforms", o.compare, "After the scale scenario's rollout, start an operator with --cache-transforms=false on the same control plane and print its memory beside the first's.")
	fs.IntVar(&o.heapTop, "scale-heap-top", o.heapTop, "How many functions the scale scenario's heap summary lists.")
}

func (o scaleOptions) validate() error {
	for _, g := range o.groups {
		if g < 1 {
			return fmt.Errorf("--scale-groups: %d: every size must be at least 1", g)
		}
	}
	switch {
	case len(o.groups) == 0:
		return errors.New("--scale-groups: at least one size")
	case o.replicas < 1:
		return fmt.Errorf("--scale-replicas=%d: must be at least 1", o.replicas)
	case o.idle < 0:
		return fmt.Errorf("--scale-idle=%s: must not be negative", o.idle)
	case o.heapTop < 1:
		return fmt.Errorf("--scale-heap-top=%d: must be at least 1", o.heapTop)
	}
	return nil
}

// scaleResult is what the scale scenario measures beyond a rollout's figures.
// Durations are in seconds.
type scaleResult struct {
	ScalingPolicies   int `json:"scalingPolicies"`
	DelayedDownscales int `json:"delayedDownscales"`
	// CacheSyncSeconds runs from the operator's start to its /ready, which
	// answers once every informer has synced.
	CacheSyncSeconds float64 `json:"cacheSyncSeconds"`
	// AtStart is the operator after every group is Complete and scaleSettle.
	AtStart memoryFigures `json:"atStart"`
	// IdleCPUCores is the operator's CPU time over IdleSeconds, every group
	// idle, divided by IdleSeconds.
	IdleSeconds  float64 `json:"idleSeconds"`
	IdleCPUCores float64 `json:"idleCPUCores"`
	// Load averages of the machine (1, 5 and 15 minutes), read at the end of
	// the idle window and at the end of the rollout: the machine is shared.
	LoadAfterIdle    [3]float64 `json:"loadAverageAfterIdle"`
	LoadAfterRollout [3]float64 `json:"loadAverageAfterRollout"`
	// Untransformed is an operator caching whole objects, started on the same
	// control plane after the rollout, at the same point: ready and scaleSettle.
	Untransformed *untransformedResult `json:"untransformed,omitempty"`
}

// memoryFigures are an operator's memory and CPU at one moment.
type memoryFigures struct {
	CPUSeconds   float64     `json:"cpuSeconds"`
	PeakRSSBytes int64       `json:"peakRSSBytes"`
	RSSBytes     int64       `json:"rssBytes"`
	Heap         heapSummary `json:"heap"`
}

type untransformedResult struct {
	CacheSyncSeconds float64       `json:"cacheSyncSeconds"`
	Figures          memoryFigures `json:"figures"`
	Load             [3]float64    `json:"loadAverage"`
}

// createFollowers makes zone-b and zone-c of every group follow zone-a
// through ScalingPolicies, and gives every delayedEvery-th follower a
// DelayedDownscale; it returns how many of each it made.
func createFollowers(ctx context.Context, c client.Client, ns string, groups []group) (policies, delayed int, _ error) {
	var objs []client.Object
	for _, g := range groups {
		for _, follower := range g.members[1:] {
			objs = append(objs, builders.MakeScalingPolicy(ns, follower).Target("", follower).Leader(g.members[0]).Obj())
			if policies++; policies%delayedEvery == 0 {
				objs = append(objs, builders.MakeDelayedDownscale(ns, follower).Delay(delayedDelay).PrepareEndpoint(delayedPath, delayedPort).Obj())
				delayed++
			}
		}
	}
	return policies, delayed, createAll(ctx, c, objs)
}

// measureAtStart reads what the operator holds once it has settled: its CPU
// time and memory from /proc and its heap profile.
func measureAtStart(ctx context.Context, in *instance, top int) (memoryFigures, error) {
	if err := sleepCtx(ctx, scaleSettle); err != nil {
		return memoryFigures{}, err
	}
	u, err := usageOf(in.pid)
	if err != nil {
		return memoryFigures{}, fmt.Errorf("usage of %s: %w", in.Name, err)
	}
	rss, err := rssBytes(in.pid)
	if err != nil {
		return memoryFigures{}, fmt.Errorf("RSS of %s: %w", in.Name, err)
	}
	heap, err := fetchHeap(ctx, in.pprofPort, top)
	if err != nil {
		return memoryFigures{}, fmt.Errorf("heap profile of %s: %w", in.Name, err)
	}
	return memoryFigures{CPUSeconds: u.cpuSeconds, PeakRSSBytes: u.peakRSSBytes, RSSBytes: rss, Heap: heap}, nil
}

// measureIdle returns the operator's CPU time over window divided by window.
func measureIdle(ctx context.Context, in *instance, window time.Duration) (float64, error) {
	before, err := cpuSeconds(in.pid)
	if err != nil {
		return 0, err
	}
	began := time.Now()
	if err := sleepCtx(ctx, window); err != nil {
		return 0, err
	}
	after, err := cpuSeconds(in.pid)
	if err != nil {
		return 0, err
	}
	return (after - before) / time.Since(began).Seconds(), nil
}

// compareUntransformed stops ops, starts one operator caching whole objects
// and measures it as measureAtStart measured the first.
func compareUntransformed(ctx context.Context, cfg runConfig, user *controlplane.User, ns string, ops operators) (*untransformedResult, error) {
	if err := ops.stop(); err != nil {
		return nil, err
	}
	cfg.variant = "-untransformed"
	cfg.operators = 1
	cfg.operatorLogArgs = append(append([]string(nil), cfg.operatorLogArgs...), "--cache-transforms=false")
	other, err := startOperators(ctx, cfg, user, ns)
	defer func() { _ = other.stop() }()
	if err != nil {
		return nil, err
	}
	out := &untransformedResult{CacheSyncSeconds: other[0].readyAfter.Seconds()}
	if out.Figures, err = measureAtStart(ctx, other[0], cfg.scale.heapTop); err != nil {
		return nil, err
	}
	cfg.say("without cache transforms: caches synced %s after the start; settled: RSS %s, heap in use %s",
		seconds(out.CacheSyncSeconds), mib(out.Figures.RSSBytes), mib(out.Figures.Heap.InuseBytes))
	out.Load, err = loadAverage()
	if err != nil {
		return nil, err
	}
	return out, other.stop()
}

// loadAverage reads the machine's 1, 5 and 15-minute load averages.
func loadAverage() ([3]float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return [3]float64{}, err
	}
	return parseLoadAverage(string(b))
}

func parseLoadAverage(s string) ([3]float64, error) {
	var out [3]float64
	fields := strings.Fields(s)
	if len(fields) < 3 {
		return out, fmt.Errorf("/proc/loadavg: too few fields in %q", s)
	}
	for i := range out {
		v, err := strconv.ParseFloat(fields[i], 64)
		if err != nil {
			return out, fmt.Errorf("/proc/loadavg: %w", err)
		}
		out[i] = v
	}
	return out, nil
}

// intList is a flag of comma-separated integers.
type intList []int

func (l *intList) String() string {
	parts := make([]string, len(*l))
	for i, n := range *l {
		parts[i] = strconv.Itoa(n)
	}
	return strings.Join(parts, ",")
}

func (l *intList) Set(v string) error {
	var out []int
	for _, p := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(p))
		if err != nil {
			return err
		}
		out = append(out, n)
	}
	*l = out
	return nil
}

// profileIdle measures the operator once every group is Complete: its
// start-up to a warm cache, its memory and heap once settled, and its CPU
// over the idle window.
func profileIdle(ctx context.Context, cfg runConfig, in *instance, res *result) error {
	if res.Scale == nil {
		res.Scale = &scaleResult{}
	}
	sc := res.Scale
	sc.CacheSyncSeconds = in.readyAfter.Seconds()
	var err error
	if sc.AtStart, err = measureAtStart(ctx, in, cfg.scale.heapTop); err != nil {
		return err
	}
	cfg.say("caches synced %s after the start; settled: RSS %s, heap in use %s", seconds(sc.CacheSyncSeconds), mib(sc.AtStart.RSSBytes), mib(sc.AtStart.Heap.InuseBytes))
	if cfg.scale.idle > 0 {
		if sc.IdleCPUCores, err = measureIdle(ctx, in, cfg.scale.idle); err != nil {
			return err
		}
		sc.IdleSeconds = cfg.scale.idle.Seconds()
	}
	if sc.LoadAfterIdle, err = loadAverage(); err != nil {
		return err
	}
	cfg.say("idle over %s: %.1f millicores (load average %.2f)", cfg.scale.idle, sc.IdleCPUCores*1000, sc.LoadAfterIdle[0])
	return nil
}
