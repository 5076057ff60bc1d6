/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// The drain-zones scenario is the drain of issue 29: one node in each of
// two zones (a node's pods, replicas / drainNodesPerZone of them), first
// with Kubernetes alone, one zone after the other, each StatefulSet under a
// plain PodDisruptionBudget of maxUnavailable (the way to drain two zones
// safely without Echelon: the second drain starts once the first zone is
// whole again); then two other nodes of the same zones at once, under the
// group's disruptionBudget alone (the PodDisruptionBudgets deleted). The
// bench fails on a breach (two zones short at once, or an eviction of a
// zone while another was short) or on an eviction answered 429 because the
// record stayed contended.

// reasonHoldContended is the eviction webhook's reason for a 429 answered
// after the record stayed contended (webhooks.holdContended).
const reasonHoldContended = "hold-contended"

// drainedZones are the members whose nodes the scenario drains.
var drainedZones = memberNames[:2]

// drainZonesResult is what the drain-zones scenario measured. Durations
// are in seconds.
type drainZonesResult struct {
	PodStartSeconds float64 `json:"podStartSeconds"`
	PodsPerZone     int     `json:"podsPerZone"`
	MaxUnavailable  int     `json:"maxUnavailable"`
	// PodsPerNode are the pods on each node drained, before its drain.
	PodsPerNode map[string]int `json:"podsPerNode"`

	// Sequential is Kubernetes alone with a PodDisruptionBudget per
	// StatefulSet: each zone's node drained and the zone whole again, one
	// after the other; ZoneSeconds is each zone's part.
	Sequential drainPhase `json:"sequentialWithPodDisruptionBudgets"`
	// AtOnce is both zones' nodes drained at once under the group's budget.
	AtOnce drainPhase `json:"atOnceWithEchelon"`
	// Ratio is AtOnce over Sequential, wall to wall.
	Ratio float64 `json:"ratio"`

	// Decisions are the eviction webhook's counters over the drain at once,
	// decision/reason; Contended the 429s answered because the record
	// stayed contended (must be 0); HoldConflicts the writes that met
	// another and were decided again.
	Decisions     map[string]float64 `json:"decisions"`
	Admitted      int                `json:"admitted"`
	Refused       int                `json:"refused"`
	Errors        int                `json:"errors"`
	Contended     int                `json:"contended429"`
	HoldConflicts float64            `json:"holdConflicts"`

	OperatorLogs []string `json:"operatorLogs"`
	KubectlLogs  []string `json:"kubectlLogs"`
}

// drainPhase is one way of draining the two zones.
type drainPhase struct {
	Nodes       []string  `json:"nodes"`
	WallSeconds float64   `json:"wallSeconds"`
	ZoneSeconds []float64 `json:"zoneSeconds,omitempty"`
	// Evicted and Retries are what the kubectl drains printed: pods
	// evicted, refusals (429) retried 5 s later; EvictionErrors other
	// errors, on which kubectl gives up.
	Evicted        int `json:"kubectlEvicted"`
	Retries        int `json:"kubectlRetries"`
	EvictionErrors int `json:"kubectlEvictionErrors"`
	Restarts       int `json:"drainRestarts"`
	// From the pod monitor (framework.Monitor) judging every moment.
	ZoneOrder       []string       `json:"zoneOrder"`
	PeakUnavailable map[string]int `json:"peakUnavailable"`
	Breaches        []string       `json:"breaches"`
}

// runDrainZones measures the drain-zones scenario on a fresh control plane.
func runDrainZones(ctx context.Context, cfg runConfig, o drainOptions) (_ *drainZonesResult, retErr error) {
	say := cfg.say
	began := time.Now()
	cp, ns, stop, err := startControlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer stop(&retErr)
	say("control plane with %d nodes up in %s", len(cp.Nodes()), since(began))
	c := cp.Client()
	cs, err := kubernetes.NewForConfig(cp.Config())
	if err != nil {
		return nil, err
	}
	res := &drainZonesResult{PodStartSeconds: cfg.podStart.Seconds(), PodsPerZone: int(cfg.replicas), MaxUnavailable: int(cfg.maxUnavailable)}
	drained, spare, zoneOf, err := assignNodes(ctx, c, cp.Nodes())
	if err != nil {
		return nil, err
	}
	w, stopPodWatch, err := startLoggedWatch(ctx, cfg, cp.Config(), ns)
	if err != nil {
		return nil, err
	}
	defer stopPodWatch()
	if err := createZones(ctx, c, ns, cfg.scenario, placeInZone); err != nil {
		return nil, err
	}
	members := memberNames[:cfg.members]
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "every pod Ready", allReady(w, ns, oldImage, members...))
	}); err != nil {
		return nil, err
	}
	where, err := podNodes(ctx, w, ns, cfg.scenario)
	if err != nil {
		return nil, err
	}
	perNode, err := checkPlacement(where, onNodes(zoneOf, drained), cfg.scenario)
	if err != nil {
		return nil, err
	}
	// The first two drained nodes of each drained zone: one for each way.
	nodesOf := map[string][]string{}
	for _, n := range drained {
		nodesOf[zoneOf[n]] = append(nodesOf[zoneOf[n]], n)
	}
	res.PodsPerNode = map[string]int{}
	for _, z := range drainedZones {
		if len(nodesOf[z]) < 2 {
			return nil, fmt.Errorf("zone %s has %d nodes to drain, want 2", z, len(nodesOf[z]))
		}
		res.Sequential.Nodes = append(res.Sequential.Nodes, nodesOf[z][0])
		res.AtOnce.Nodes = append(res.AtOnce.Nodes, nodesOf[z][1])
		res.PodsPerNode[nodesOf[z][0]], res.PodsPerNode[nodesOf[z][1]] = perNode[nodesOf[z][0]], perNode[nodesOf[z][1]]
	}
	if err := setUnschedulable(ctx, c, spare, false); err != nil {
		return nil, err
	}

	if err := drainSequentially(ctx, cfg, o, cp, cs, w, ns, res); err != nil {
		return nil, err
	}
	say("one zone after the other with PodDisruptionBudgets: %s (%v per zone), breaches %d",
		seconds(res.Sequential.WallSeconds), secondsList(res.Sequential.ZoneSeconds), len(res.Sequential.Breaches))

	r := &webhookRun{cfg: cfg, cp: cp, ns: ns, say: say, trust: newTrust(webhookHost)}
	stopWatch, err := r.serve(ctx, evictionWebhook)
	if err != nil {
		return nil, err
	}
	defer stopWatch()
	qpsFlags, _ := kubeAPIFlags(o.kubeAPIQPS)
	ops, err := r.startOperator(ctx, cfg.workDir, qpsFlags...)
	defer func() { retErr = errors.Join(retErr, ops.stop()) }()
	if err != nil {
		return nil, err
	}
	res.OperatorLogs = r.logs
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "the group to be Complete", groupsRolledOut(w, ns, oldImage, groupName))
	}); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, operatorLogs(ops))
	}
	if err := waitEvictionJudged(ctx, cfg, ops[0], cs, ns, drainedZones[0]+"-0"); err != nil {
		return nil, err
	}
	if err := drainAtOnce(ctx, cfg, o, cp, cs, w, ns, ops, res); err != nil {
		return nil, err
	}
	res.Ratio = res.AtOnce.WallSeconds / res.Sequential.WallSeconds
	say("both zones at once with Echelon: %s, %.2f x one after the other; evictions %d admitted, %d refused, %d errors (%s); breaches %d",
		seconds(res.AtOnce.WallSeconds), res.Ratio, res.Admitted, res.Refused, res.Errors, decisionsCell(res.Decisions), len(res.AtOnce.Breaches))
	return res, nil
}

// drainSequentially drains the first node of each drained zone with
// Kubernetes alone, under a PodDisruptionBudget per StatefulSet, one zone
// after the other: the next drain starts once the zone drained before is
// whole again. The budgets are deleted at the end.
func drainSequentially(ctx context.Context, cfg runConfig, o drainOptions, cp *controlplane.ControlPlane, cs kubernetes.Interface,
	w *watcher, ns string, res *drainZonesResult) (retErr error) {
	c := cp.Client()
	var pdbs []*policyv1.PodDisruptionBudget
	for _, m := range memberNames[:cfg.members] {
		sts := statefulSet(ns, m, cfg.replicas, oldImage)
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: m},
			Spec:       policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(cfg.maxUnavailable)), Selector: sts.Spec.Selector},
		}
		if err := c.Create(ctx, pdb); err != nil {
			return fmt.Errorf("create PodDisruptionBudget %s: %w", m, err)
		}
		pdbs = append(pdbs, pdb)
	}
	defer func() {
		for _, pdb := range pdbs {
			retErr = errors.Join(retErr, client.IgnoreNotFound(c.Delete(context.WithoutCancel(ctx), pdb)))
		}
	}()
	// The disruption controller must have counted the pods, or it refuses
	// every eviction.
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
			for _, pdb := range pdbs {
				got := &policyv1.PodDisruptionBudget{}
				if err := c.Get(ctx, client.ObjectKeyFromObject(pdb), got); err != nil {
					return false, err
				}
				if got.Status.ObservedGeneration < got.Generation || got.Status.DisruptionsAllowed != cfg.maxUnavailable {
					return false, nil
				}
			}
			return true, nil
		})
	}); err != nil {
		return fmt.Errorf("wait for the PodDisruptionBudgets to allow %d disruptions: %w", cfg.maxUnavailable, err)
	}
	mon, err := startPodMonitor(ctx, cfg, cs, ns, memberNames[:cfg.members])
	if err != nil {
		return err
	}
	defer mon.Stop()
	phase := &res.Sequential
	began := time.Now()
	for i, node := range phase.Nodes {
		zoneBegan := time.Now()
		if err := drainLogged(ctx, cfg, o, cp, node, phase, res); err != nil {
			return err
		}
		if err := withTimeout(ctx, o.timeout, func(ctx context.Context) error {
			return w.waitUntil(ctx, drainedZones[i]+" whole again", allReady(w, ns, oldImage, drainedZones[i]))
		}); err != nil {
			return err
		}
		phase.ZoneSeconds = append(phase.ZoneSeconds, time.Since(zoneBegan).Seconds())
	}
	phase.WallSeconds = time.Since(began).Seconds()
	monitored(phase, mon)
	return nil
}

// drainAtOnce drains the second node of each drained zone at once, judged
// by the operator's eviction webhook alone, until every pod of the group is
// Ready again, and records what the webhook decided.
func drainAtOnce(ctx context.Context, cfg runConfig, o drainOptions, cp *controlplane.ControlPlane, cs kubernetes.Interface,
	w *watcher, ns string, ops operators, res *drainZonesResult) error {
	mon, err := startPodMonitor(ctx, cfg, cs, ns, memberNames[:cfg.members])
	if err != nil {
		return err
	}
	defer mon.Stop()
	before, err := scrapeMetrics(ops[0])
	if err != nil {
		return err
	}
	phase := &res.AtOnce
	began := time.Now()
	errs := make([]error, len(phase.Nodes))
	var wg sync.WaitGroup
	for i, node := range phase.Nodes {
		wg.Go(func() { errs[i] = drainLogged(ctx, cfg, o, cp, node, phase, res) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w\n%s", err, operatorLogs(ops))
	}
	if err := withTimeout(ctx, o.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "every pod of the group Ready again", allReady(w, ns, oldImage, memberNames[:cfg.members]...))
	}); err != nil {
		return err
	}
	phase.WallSeconds = time.Since(began).Seconds()
	monitored(phase, mon)
	after, err := scrapeMetrics(ops[0])
	if err != nil {
		return err
	}
	res.Decisions = counterDelta(evictionDecisions(after), evictionDecisions(before))
	res.Admitted, res.Refused, res.Errors = byDecision(res.Decisions)
	res.Contended = int(res.Decisions[metrics.DecisionError+"/"+reasonHoldContended])
	conflicts := map[string]string{"requester": metrics.RequesterEviction}
	res.HoldConflicts = counterDelta(after.counters(holdConflictsMetric, conflicts), before.counters(holdConflictsMetric, conflicts))[""]
	return nil
}

// drainMu guards the counts drainLogged adds to a phase.
var drainMu sync.Mutex

// drainLogged runs `kubectl drain` of node (again after a failure, as
// drainNode does) into its own log, and adds what it printed to phase.
func drainLogged(ctx context.Context, cfg runConfig, o drainOptions, cp *controlplane.ControlPlane, node string, phase *drainPhase, res *drainZonesResult) error {
	logFile := filepath.Join(cfg.workDir, "kubectl-drain-"+node+".log")
	out, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer out.Close()
	restarts := 0
	drainCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	err = drainNode(drainCtx, cp, node, o.timeout, out, &restarts)
	b, readErr := os.ReadFile(logFile)
	drainMu.Lock()
	defer drainMu.Unlock()
	res.KubectlLogs = append(res.KubectlLogs, logFile)
	phase.Restarts += restarts
	if readErr == nil {
		l := drainOutput(string(b))
		phase.Evicted += l.evicted
		phase.Retries += l.retries
		phase.EvictionErrors += l.evictionErrors
	}
	if err != nil {
		return fmt.Errorf("%w\n%s", err, tail(logFile, 10))
	}
	return nil
}

// monitored adds what the pod monitor saw to phase.
func monitored(phase *drainPhase, mon *framework.Monitor) {
	phase.ZoneOrder = mon.MemberOrder()
	phase.PeakUnavailable = mon.PeakNotReady()
	for _, b := range mon.Breaches() {
		phase.Breaches = append(phase.Breaches, b.At.Format(time.StampMilli)+" "+b.Detail)
	}
}
