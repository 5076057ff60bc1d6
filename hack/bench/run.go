/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/test/controlplane"
)

const (
	groupName  = "bench"
	floorName  = "floor"
	oldImage   = "example.com/bench:1"
	newImage   = "example.com/bench:2"
	nodes      = 6
	stopWithin = 15 * time.Second
	// settle is how long after Complete the requests and CPU of the rollout are
	// still counted.
	settle = 2 * time.Second
)

// memberNames are the StatefulSets of the group, in rollout order.
var memberNames = []string{"zone-a", "zone-b", "zone-c"}

// scenario is what one run rolls.
type scenario struct {
	members        int
	replicas       int32
	maxUnavailable int32
}

func (s scenario) pods() int { return s.members * int(s.replicas) }

// batches is how many batches of maxUnavailable pods the rollout needs at least.
func (s scenario) batches() int {
	perMember := (int(s.replicas) + int(s.maxUnavailable) - 1) / int(s.maxUnavailable)
	return s.members * perMember
}

// runConfig configures one run: one control plane with one pod start time.
type runConfig struct {
	scenario
	podStart        time.Duration
	floorRepeats    int
	binary          string // the echelon binary, alone in its directory
	workDir         string // kubeconfig of the operator
	operatorLogDir  string
	operatorLogArgs []string
	timeout         time.Duration
	progress        io.Writer
}

// result is what one run measured. Durations are in seconds.
type result struct {
	PodStartSeconds    float64            `json:"podStartSeconds"`
	Pods               int                `json:"pods"`
	Batches            int                `json:"batches"`
	WallSeconds        float64            `json:"wallSeconds"`
	BatchSeconds       []float64          `json:"floorBatchSeconds"`
	BatchMedianSeconds float64            `json:"floorBatchMedianSeconds"`
	FloorSeconds       float64            `json:"floorSeconds"`
	Ratio              float64            `json:"wallOverFloor"`
	RequestsByMethod   map[string]float64 `json:"operatorRequestsByMethod"`
	ReadsPerPod        float64            `json:"readsPerPod"`
	WritesPerPod       float64            `json:"writesPerPod"`
	// RequestsByVerb are counted by the proxy in front of the operator, with
	// the verbs of RBAC ("list pods", "patch rolloutgroups/status").
	RequestsByVerb map[string]int `json:"operatorRequestsByVerb"`
	// ListsAfterStart counts LIST requests from the operator being ready to the
	// end of the rollout.
	ListsAfterStart int     `json:"listsAfterStart"`
	CPUSeconds      float64 `json:"operatorCPUSecondsDuringRollout"`
	CPUSecondsTotal float64 `json:"operatorCPUSecondsTotal"`
	PeakRSSBytes    int64   `json:"operatorPeakRSSBytes"`
	OperatorLog     string  `json:"operatorLog"`
}

// run measures one rollout on a fresh control plane whose pods take podStart
// from creation to Ready.
func run(ctx context.Context, cfg runConfig) (_ *result, retErr error) {
	say := func(format string, args ...any) {
		fmt.Fprintf(cfg.progress, "  [pod start %s] %s\n", cfg.podStart, fmt.Sprintf(format, args...))
	}
	began := time.Now()
	// kwok takes PodStartDelay from scheduling to the pod's IP and
	// PodReadyDelay from there to Ready; the bench puts all of it in the second,
	// so the pod start is one fixed delay with no jitter.
	cp, err := controlplane.Start(ctx, controlplane.Options{
		Nodes:         nodes,
		PodReadyDelay: cfg.podStart,
		CRDDirs:       []string{controlplane.CRDBasesDir},
		Scheme:        operator.NewScheme(),
	})
	if err != nil {
		return nil, err
	}
	defer func() {
		if retErr != nil {
			retErr = fmt.Errorf("%w\n%s", retErr, cp.LogTails(20))
		}
		if err := cp.Stop(); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	say("control plane up in %s", since(began))

	c := cp.Client()
	ns, err := cp.CreateNamespace(ctx, "bench")
	if err != nil {
		return nil, err
	}
	podLog, err := os.Create(filepath.Join(cfg.workDir, fmt.Sprintf("pods-pod-start-%s.log", cfg.podStart)))
	if err != nil {
		return nil, err
	}
	defer podLog.Close()
	w, err := startWatch(ctx, cp.Config(), ns, podLog)
	if err != nil {
		return nil, err
	}
	defer w.Close()

	user, err := cp.NewOperatorUser(ctx, "echelon-operator")
	if err != nil {
		return nil, err
	}
	counter, err := startRequestCounter(user.Config, filepath.Join(cfg.workDir, fmt.Sprintf("requests-pod-start-%s.log", cfg.podStart)))
	if err != nil {
		return nil, err
	}
	defer counter.close()
	kubeconfig := filepath.Join(cfg.workDir, fmt.Sprintf("operator-%s.kubeconfig", cfg.podStart))
	if err := counter.writeKubeconfig(kubeconfig); err != nil {
		return nil, err
	}
	opName := fmt.Sprintf("echelon-pod-start-%s", cfg.podStart)
	op, err := framework.StartOperator(cfg.binary, kubeconfig, cfg.operatorLogDir, opName,
		append([]string{"--namespaces=" + ns}, cfg.operatorLogArgs...)...)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err := op.Stop(stopWithin); err != nil {
			retErr = errors.Join(retErr, err)
		}
	}()
	if err := withTimeout(ctx, cfg.timeout, op.WaitReady); err != nil {
		return nil, err
	}
	pid, err := pidOf(cfg.binary)
	if err != nil {
		return nil, err
	}
	afterStart := counter.snapshot()

	began = time.Now()
	for _, name := range memberNames[:cfg.members] {
		if err := c.Create(ctx, statefulSet(ns, name, cfg.replicas, oldImage)); err != nil {
			return nil, fmt.Errorf("create StatefulSet %s: %w", name, err)
		}
	}
	if err := c.Create(ctx, statefulSet(ns, floorName, cfg.replicas, oldImage)); err != nil {
		return nil, fmt.Errorf("create StatefulSet %s: %w", floorName, err)
	}
	if err := c.Create(ctx, rolloutGroup(ns, groupName, memberNames[:cfg.members], cfg.maxUnavailable)); err != nil {
		return nil, fmt.Errorf("create RolloutGroup: %w", err)
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		if err := w.waitUntil(ctx, "every pod Ready", allReady(w, ns, oldImage, append(memberNames[:cfg.members:cfg.members], floorName)...)); err != nil {
			return err
		}
		return w.waitUntil(ctx, "the group to be Complete", groupRolledOut(w, ns, groupName, oldImage))
	}); err != nil {
		return nil, err
	}
	say("%d pods Ready and the group Complete in %s", cfg.pods()+int(cfg.replicas), since(began))

	res := &result{PodStartSeconds: cfg.podStart.Seconds(), Pods: cfg.pods(), Batches: cfg.batches(), OperatorLog: op.LogFile}
	var batches []time.Duration
	for i := range cfg.floorRepeats {
		var d time.Duration
		err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
			var err error
			d, err = measureBatch(ctx, c, w, ns, floorName, fmt.Sprintf("example.com/floor:%d", i+2), int(cfg.maxUnavailable))
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("floor batch %d: %w", i+1, err)
		}
		batches = append(batches, d)
		res.BatchSeconds = append(res.BatchSeconds, d.Seconds())
	}
	batch := median(batches)
	floor := time.Duration(cfg.batches()) * batch
	say("floor: batches of %d pods took %v, median %s; %d batches: %s", cfg.maxUnavailable, rounded(batches), batch.Round(time.Millisecond), cfg.batches(), floor.Round(10*time.Millisecond))

	metricsBefore, err := scrapeRequests(op)
	if err != nil {
		return nil, err
	}
	countsBefore := counter.snapshot()
	cpuBefore, err := cpuSeconds(pid)
	if err != nil {
		return nil, err
	}

	changed := time.Now()
	for _, name := range memberNames[:cfg.members] {
		if err := setImage(ctx, c, ns, name, newImage); err != nil {
			return nil, err
		}
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "the group to roll out", groupRolledOut(w, ns, groupName, newImage))
	}); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, op.LogTail(30))
	}
	wall := time.Since(changed)
	say("rollout: template change to Complete in %s", wall.Round(10*time.Millisecond))
	// The operator records Events asynchronously; let the last ones of the
	// rollout land before counting.
	time.Sleep(settle)

	cpuAfter, err := cpuSeconds(pid)
	if err != nil {
		return nil, err
	}
	if res.PeakRSSBytes, err = peakRSSBytes(pid); err != nil {
		return nil, err
	}
	metricsAfter, err := scrapeRequests(op)
	if err != nil {
		return nil, err
	}
	countsAfter := counter.snapshot()

	res.WallSeconds = wall.Seconds()
	res.BatchMedianSeconds = batch.Seconds()
	res.FloorSeconds = floor.Seconds()
	res.Ratio = wall.Seconds() / floor.Seconds()
	res.RequestsByMethod = map[string]float64{}
	var reads, writes float64
	for method, after := range metricsAfter {
		n := after - metricsBefore[method]
		if n == 0 {
			continue
		}
		res.RequestsByMethod[method] = n
		if isRead(method) {
			reads += n
		} else {
			writes += n
		}
	}
	res.ReadsPerPod = reads / float64(cfg.pods())
	res.WritesPerPod = writes / float64(cfg.pods())
	res.RequestsByVerb = diffCounts(countsAfter, countsBefore)
	for key, n := range diffCounts(countsAfter, afterStart) {
		if len(key) > 5 && key[:5] == "LIST " {
			res.ListsAfterStart += n
		}
	}
	res.CPUSeconds = cpuAfter - cpuBefore
	res.CPUSecondsTotal = cpuAfter
	return res, nil
}

// scrapeRequests reads the operator's request counters from its /metrics.
func scrapeRequests(op *framework.Operator) (map[string]float64, error) {
	code, body, err := op.Get("/metrics")
	if err != nil {
		return nil, fmt.Errorf("scrape operator metrics: %w", err)
	}
	if code != 200 {
		return nil, fmt.Errorf("scrape operator metrics: HTTP %d", code)
	}
	return requestsByMethod(body)
}

func diffCounts(after, before map[string]int) map[string]int {
	out := maps.Clone(after)
	for k, n := range before {
		out[k] -= n
	}
	maps.DeleteFunc(out, func(_ string, n int) bool { return n == 0 })
	return out
}

func withTimeout(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return f(ctx)
}

func since(t time.Time) time.Duration {
	return time.Since(t).Round(100 * time.Millisecond)
}

func rounded(ds []time.Duration) []time.Duration {
	out := make([]time.Duration, len(ds))
	for i, d := range ds {
		out[i] = d.Round(time.Millisecond)
	}
	return out
}
