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
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

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

// runConfig configures one run: one case on a control plane of its own.
type runConfig struct {
	benchCase
	scenario
	floorRepeats    int
	binary          string // the echelon binary, alone in its directory
	workDir         string // kubeconfigs, request and pod logs
	operatorLogDir  string
	operatorLogArgs []string
	timeout         time.Duration
	progress        io.Writer
	// variant tells apart the operators of a second start on the same
	// control plane in their file names.
	variant string
	scale   scaleOptions
	// cpuProfile serves the operators' pprof and saves the leader's CPU
	// profile over the rollout in workDir (cpu-<operator>.pprof).
	cpuProfile bool
}

// say prints one line of the run's progress, prefixed with its name.
func (cfg runConfig) say(format string, args ...any) {
	fmt.Fprintf(cfg.progress, "  [%s] %s\n", cfg.slug(), fmt.Sprintf(format, args...))
}

// result is what one run measured. Durations are in seconds.
type result struct {
	// Breaches are the pod monitor's findings while the group rolled
	// (must be none: the bench fails on one).
	Breaches        []string `json:"breaches,omitempty"`
	Scenario        string   `json:"scenario"`
	Title           string   `json:"title"`
	PodStartSeconds float64  `json:"podStartSeconds"`
	Operators       int      `json:"operators"`
	Groups          int      `json:"groups"`
	// PodsInNamespace are the pods of every group and of the floor.
	PodsInNamespace int `json:"podsInNamespace"`
	// Pods and Batches are those of the rolling group.
	Pods    int `json:"pods"`
	Batches int `json:"batches"`
	// SetupSeconds runs from the first create to every pod Ready.
	SetupSeconds float64 `json:"setupSeconds"`
	// The operators' start: from starting the processes to every group
	// Complete, which takes the initial sync of the caches.
	StartupSeconds      float64 `json:"operatorStartupSeconds"`
	StartupCPUSeconds   float64 `json:"operatorStartupCPUSeconds"`
	StartupPeakRSSBytes int64   `json:"operatorStartupPeakRSSBytes"`

	WallSeconds        float64   `json:"wallSeconds"`
	BatchSeconds       []float64 `json:"floorBatchSeconds"`
	BatchMedianSeconds float64   `json:"floorBatchMedianSeconds"`
	FloorSeconds       float64   `json:"floorSeconds"`
	Ratio              float64   `json:"wallOverFloor"`
	// KubernetesRollSeconds is the partition scenario's own floor: the
	// StatefulSet controller rolling the same members itself, one after the
	// other (measureKubernetesRoll); KubernetesRatio is the wall over it.
	KubernetesRollSeconds float64         `json:"kubernetesRollSeconds,omitempty"`
	KubernetesRatio       float64         `json:"wallOverKubernetesRoll,omitempty"`
	Handover              *handoverResult `json:"handover,omitempty"`

	// Requests of every operator process during the rollout, counted by the
	// proxies in front of them.
	RequestsByMethod map[string]float64 `json:"operatorRequestsByMethod"`
	ReadsPerPod      float64            `json:"readsPerPod"`
	// WritesPerPod leaves out leader election's Lease writes, which come with
	// time rather than with pods; LeaseWritesPerPod counts them.
	WritesPerPod      float64 `json:"writesPerPod"`
	LeaseWritesPerPod float64 `json:"leaseWritesPerPod"`
	// RequestsByVerb are keyed with the verbs of RBAC ("list pods", "patch
	// rolloutgroups/status").
	RequestsByVerb map[string]int `json:"operatorRequestsByVerb"`
	// ListsAfterStart counts LIST requests from the operators being ready to the
	// end of the rollout.
	ListsAfterStart int `json:"listsAfterStart"`
	// FailedPodDeletions are pod deletions or evictions the API server refused
	// during the rollout (a Conflict or NotFound is a stale view).
	FailedPodDeletions int      `json:"failedPodDeletions"`
	CPUSeconds         float64  `json:"operatorCPUSecondsDuringRollout"`
	CPUSecondsTotal    float64  `json:"operatorCPUSecondsTotal"`
	PeakRSSBytes       int64    `json:"operatorPeakRSSBytes"`
	OperatorLogs       []string `json:"operatorLogs"`
	// Scale holds the scale scenario's own figures (scale.go).
	Scale *scaleResult `json:"scale,omitempty"`
	// ReplicasPerStatefulSet are the pods of each StatefulSet of the run.
	ReplicasPerStatefulSet int `json:"replicasPerStatefulSet"`
}

// run measures one case on a fresh control plane: it creates every group and
// waits for its pods, starts the operators and waits for every group to be
// Complete, measures the floor, then rolls the one rolling group.
func run(ctx context.Context, cfg runConfig) (_ *result, retErr error) {
	say := cfg.say
	began := time.Now()
	cp, ns, stop, err := startControlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer stop(&retErr)
	say("control plane up in %s", since(began))

	c := cp.Client()
	w, stopPodWatch, err := startLoggedWatch(ctx, cfg, cp.Config(), ns)
	if err != nil {
		return nil, err
	}
	defer stopPodWatch()

	groups := benchGroups(cfg.scenario, cfg.idleGroups)
	res := &result{
		Scenario: cfg.kind, Title: cfg.title(cfg.scenario), PodStartSeconds: cfg.podStart.Seconds(),
		Operators: cfg.operators, Groups: len(groups), PodsInNamespace: len(statefulSetNames(groups)) * int(cfg.replicas),
		Pods: cfg.pods(), Batches: cfg.batches(), ReplicasPerStatefulSet: int(cfg.replicas),
	}
	began = time.Now()
	if err := createWorkload(ctx, c, ns, cfg.scenario, groups, oldImage, cfg.rollingUpdate); err != nil {
		return nil, err
	}
	say("created %d StatefulSets and %d groups in %s", len(statefulSetNames(groups)), len(groups), since(began))
	if cfg.followers {
		res.Scale = &scaleResult{}
		if res.Scale.ScalingPolicies, res.Scale.DelayedDownscales, err = createFollowers(ctx, c, ns, groups); err != nil {
			return nil, err
		}
		say("created %d ScalingPolicies and %d DelayedDownscales", res.Scale.ScalingPolicies, res.Scale.DelayedDownscales)
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "every pod Ready", allReady(w, ns, oldImage, statefulSetNames(groups)...))
	}); err != nil {
		return nil, err
	}
	res.SetupSeconds = time.Since(began).Seconds()
	say("%d pods Ready in %s", res.PodsInNamespace, since(began))

	user, err := cp.NewOperatorUser(ctx, "echelon-operator")
	if err != nil {
		return nil, err
	}
	// Lease rights only where the Lease lives, as the chart grants them.
	if err := cp.GrantLeaderElection(ctx, user.Name, ns); err != nil {
		return nil, err
	}
	began = time.Now()
	ops, err := startOperators(ctx, cfg, user, ns)
	defer func() { retErr = errors.Join(retErr, ops.stop()) }()
	if err != nil {
		return nil, err
	}
	for _, in := range ops {
		res.OperatorLogs = append(res.OperatorLogs, in.LogFile)
	}
	leader, err := startUp(ctx, cfg, w, ns, groups, ops, res, began)
	if err != nil {
		return nil, err
	}
	say("%d operator(s) started; every group Complete %s after the start, with %.2fs of CPU", len(ops), seconds(res.StartupSeconds), res.StartupCPUSeconds)
	if cfg.profile {
		if err := profileIdle(ctx, cfg, ops[0], res); err != nil {
			return nil, err
		}
	}
	afterStart := ops.counts()

	batch, err := measureFloor(ctx, cfg, c, w, ns, res)
	if err != nil {
		return nil, err
	}
	say("floor: batches of %d pods took %v, median %s; %d batches: %s", cfg.maxUnavailable, secondsList(res.BatchSeconds), batch.Round(time.Millisecond), cfg.batches(), seconds(res.FloorSeconds))

	cs, err := kubernetes.NewForConfig(cp.Config())
	if err != nil {
		return nil, err
	}
	if err := roll(ctx, cfg, c, cs, w, ns, groups[0], ops, leader, res); err != nil {
		return nil, err
	}
	say("rollout: template change to Complete in %s", seconds(res.WallSeconds))
	if h := res.Handover; h != nil {
		say("%s after %d pods deleted: the new leader took the Lease after %s and deleted a pod after %s",
			h.Signal, h.AfterPodsDeleted, seconds(h.TakeoverSeconds), seconds(h.GapSeconds))
	}
	for key, n := range diffCounts(ops.counts(), afterStart) {
		if strings.HasPrefix(key, "LIST ") {
			res.ListsAfterStart += n
		}
	}
	if cfg.rollingUpdate && cfg.handover == 0 {
		d, err := measureKubernetesRoll(ctx, cfg, c, w, ns, groups[0])
		if err != nil {
			return nil, err
		}
		res.KubernetesRollSeconds, res.KubernetesRatio = d.Seconds(), res.WallSeconds/d.Seconds()
		say("Kubernetes rolling the same StatefulSets itself, one after the other: %s (the operator's wall over it: %.3f)", seconds(res.KubernetesRollSeconds), res.KubernetesRatio)
	}
	if cfg.profile {
		if res.Scale.LoadAfterRollout, err = loadAverage(); err != nil {
			return nil, err
		}
		if cfg.scale.compare {
			if res.Scale.Untransformed, err = compareUntransformed(ctx, cfg, user, ns, ops); err != nil {
				return nil, err
			}
		}
	}
	return res, nil
}

// startControlPlane starts the run's control plane and creates the namespace
// of the run. stop stops the control plane, adding the tails of its logs to
// *runErr when that is a failure, and any failure to stop.
func startControlPlane(ctx context.Context, cfg runConfig) (_ *controlplane.ControlPlane, ns string, stop func(runErr *error), _ error) {
	// kwok takes PodStartDelay from scheduling to the pod's IP and
	// PodReadyDelay from there to Ready; the bench puts all of it in the second,
	// so the pod start is one fixed delay with no jitter. No pod start means
	// Ready as soon as scheduled.
	n := nodes
	if cfg.nodes > 0 {
		n = cfg.nodes
	}
	cp, err := controlplane.Start(ctx, controlplane.Options{
		Nodes:         n,
		PodReadyDelay: cfg.podStart,
		CRDDirs:       []string{controlplane.CRDBasesDir},
		Scheme:        operator.NewScheme(),
		APIServerOnly: cfg.apiServerOnly,
	})
	if err != nil {
		return nil, "", nil, err
	}
	stop = func(runErr *error) {
		if *runErr != nil {
			*runErr = fmt.Errorf("%w\n%s", *runErr, cp.LogTails(20))
		}
		if err := cp.Stop(); err != nil {
			*runErr = errors.Join(*runErr, err)
		}
	}
	if ns, err = cp.CreateNamespace(ctx, "bench"); err != nil {
		stop(&err)
		return nil, "", nil, err
	}
	return cp, ns, stop, nil
}

// startUp waits for one leader and every group Complete, and records what the
// operators used to get there since began.
func startUp(ctx context.Context, cfg runConfig, w *watcher, ns string, groups []group, ops operators, res *result, began time.Time) (*instance, error) {
	var leader *instance
	err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		var err error
		if leader, err = ops.waitLeader(ctx); err != nil {
			return err
		}
		names := make([]string, len(groups))
		for i, g := range groups {
			names[i] = g.name
		}
		return w.waitUntil(ctx, "every group to be Complete", groupsRolledOut(w, ns, oldImage, names...))
	})
	if err != nil {
		return nil, fmt.Errorf("%w\n%s", err, leaderLog(leader))
	}
	res.StartupSeconds = time.Since(began).Seconds()
	u, err := ops.usage()
	if err != nil {
		return nil, err
	}
	res.StartupCPUSeconds, res.StartupPeakRSSBytes = u.cpuSeconds, u.peakRSSBytes
	return leader, nil
}

// measureFloor times cfg.floorRepeats batches with no operator, records
// them and the floor in res, and returns their median.
func measureFloor(ctx context.Context, cfg runConfig, c client.Client, w *watcher, ns string, res *result) (time.Duration, error) {
	batches, err := measureBatches(ctx, cfg, c, w, ns)
	if err != nil {
		return 0, err
	}
	for _, d := range batches {
		res.BatchSeconds = append(res.BatchSeconds, d.Seconds())
	}
	batch := median(batches)
	res.BatchMedianSeconds = batch.Seconds()
	res.FloorSeconds = cfg.floor(batch).Seconds()
	return batch, nil
}

// measureBatches times cfg.floorRepeats batches of cfg.maxUnavailable pods
// of the StatefulSet floorName replaced with no operator (measureBatch).
func measureBatches(ctx context.Context, cfg runConfig, c client.Client, w *watcher, ns string) ([]time.Duration, error) {
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
	}
	return batches, nil
}

// roll changes the template of every member of g, fails the leader
// mid-rollout if the case says so, waits for Complete, and records the
// rollout's wall time and what the operators did and used.
func roll(ctx context.Context, cfg runConfig, c client.Client, cs kubernetes.Interface, w *watcher, ns string, g group, ops operators, leader *instance, res *result) error {
	// The pod monitor of the e2e tests watches every pod of the group while
	// it rolls: a breach fails the bench, whatever the figures.
	mon, err := startPodMonitor(ctx, cfg, cs, ns, g.members)
	if err != nil {
		return err
	}
	defer mon.Stop()
	countsBefore := ops.counts()
	usageBefore, err := ops.usage()
	if err != nil {
		return err
	}

	var profiled <-chan error
	if cfg.cpuProfile {
		// As long as the floor and a margin, so that it covers the rollout.
		profiled = saveCPUProfile(ctx, leader, time.Duration(res.FloorSeconds*1.3*float64(time.Second)),
			filepath.Join(cfg.workDir, "cpu-"+leader.Name+".pprof"), cfg.say)
	}
	changed := time.Now()
	for _, name := range g.members {
		if err := setImage(ctx, c, ns, name, newImage); err != nil {
			return err
		}
	}
	var signalled time.Time
	err = withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		if cfg.handover != 0 {
			res.Handover = &handoverResult{Signal: signalName(cfg.handover), AfterPodsDeleted: cfg.deletedAfterBatches(cfg.batches() / 2)}
			var err error
			if signalled, err = failLeader(ctx, leader, cfg.handover, res.Handover.AfterPodsDeleted, changed); err != nil {
				return err
			}
		}
		return w.waitUntil(ctx, "the group to roll out", groupsRolledOut(w, ns, newImage, g.name))
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, operatorLogs(ops))
	}
	wall := time.Since(changed)
	// The operator records Events asynchronously; let the last ones of the
	// rollout land before counting.
	time.Sleep(settle)

	usageAfter, err := ops.usage()
	if err != nil {
		return err
	}
	counts := diffCounts(ops.counts(), countsBefore)
	res.WallSeconds = wall.Seconds()
	res.Ratio = wall.Seconds() / res.FloorSeconds
	res.RequestsByVerb = counts
	res.RequestsByMethod = byMethod(counts)
	reads, writes, leaseWrites := tally(counts)
	res.ReadsPerPod = float64(reads) / float64(res.Pods)
	res.WritesPerPod = float64(writes) / float64(res.Pods)
	res.LeaseWritesPerPod = float64(leaseWrites) / float64(res.Pods)
	for _, in := range ops {
		res.FailedPodDeletions += countSince(in.counter.requests(), changed, func(r request) bool {
			return isPodDeletion(r.key) && !succeeded(r.code)
		})
	}
	res.CPUSeconds = usageAfter.cpuSeconds - usageBefore.cpuSeconds
	res.CPUSecondsTotal = usageAfter.cpuSeconds
	res.PeakRSSBytes = usageAfter.peakRSSBytes
	if profiled != nil {
		if err := <-profiled; err != nil {
			return err
		}
	}

	for _, b := range mon.Breaches() {
		res.Breaches = append(res.Breaches, b.At.Format(time.StampMilli)+" "+b.Detail)
	}
	if len(res.Breaches) > 0 {
		return fmt.Errorf("%d breaches of the guarantees while the group rolled: %v", len(res.Breaches), res.Breaches)
	}
	if res.Handover != nil {
		takeover, gap, err := handoverTimes(ops.other(leader).counter.requests(), signalled)
		if err != nil {
			return err
		}
		res.Handover.TakeoverSeconds, res.Handover.GapSeconds = takeover.Seconds(), gap.Seconds()
	}
	return nil
}

// startPodMonitor starts the e2e tests' pod monitor on members, judging
// every moment (two zones short at once is a breach whoever made it, not
// only when seen at a deletion), and waits until it has seen every zone
// whole.
func startPodMonitor(ctx context.Context, cfg runConfig, cs kubernetes.Interface, ns string, names []string) (*framework.Monitor, error) {
	var members []framework.WatchedMember
	for _, m := range names {
		members = append(members, framework.WatchedMember{Name: m, Replicas: int(cfg.replicas), MaxUnavailable: intstr.FromInt32(cfg.maxUnavailable)})
	}
	mon, err := framework.StartMonitor(ctx, cs, ns, members)
	if err != nil {
		return nil, err
	}
	mon.JudgeEveryMoment()
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(context.Context) (bool, error) { return mon.Armed(), nil })
	}); err != nil {
		mon.Stop()
		return nil, fmt.Errorf("wait for the pod monitor to see every zone whole: %w", err)
	}
	return mon, nil
}

func leaderLog(leader *instance) string {
	if leader == nil {
		return ""
	}
	return leader.LogTail(30)
}

func operatorLogs(ops operators) string {
	var b strings.Builder
	for _, in := range ops {
		b.WriteString(in.LogTail(30))
	}
	return b.String()
}

func withTimeout(ctx context.Context, timeout time.Duration, f func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	return f(ctx)
}

func since(t time.Time) time.Duration {
	return time.Since(t).Round(100 * time.Millisecond)
}
