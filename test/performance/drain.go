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
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// The drain scenario drains every node of a three-zone group at once, as a
// node pool upgrade would, and times it against its floor. Each zone's pods
// run on drainNodesPerZone fake nodes of their own; each zone also has as
// many spare nodes, cordoned until the drain, where the StatefulSet
// controller puts the replacements. One `kubectl drain` process per node,
// all started at once: the eviction webhook must let one zone go at a time,
// maxUnavailable pods at a time, while the others retry on 429.
const (
	drainNodesPerZone = 3
	// drainNodes are the fake nodes of the drain scenario: per zone (3),
	// drainNodesPerZone drained and as many spare.
	drainNodes = 2 * drainNodesPerZone * 3
	// nodeRoleLabel tells the nodes the bench drains from the spare ones.
	nodeRoleLabel = "bench.echelon.dev/node-role"
	roleDrained   = "drained"
	roleSpare     = "spare"
)

// drainOptions are the flags of the drain scenario.
type drainOptions struct {
	timeout time.Duration
	// kubeAPIQPS is the operator's --kube-api-qps; 0 leaves its default.
	kubeAPIQPS float64
}

func bindDrainFlags(fs *flag.FlagSet, o *drainOptions) {
	*o = drainOptions{timeout: 30 * time.Minute}
	fs.DurationVar(&o.timeout, "drain-timeout", o.timeout, "Bound on the drain scenario's drain: each kubectl drain's --timeout, and the wait for every pod Ready again.")
	fs.Float64Var(&o.kubeAPIQPS, "drain-kube-api-qps", 0, "The operator's --kube-api-qps in the drain scenario (its burst twice that); 0 leaves the operator's default.")
}

func (o drainOptions) validate() error {
	switch {
	case o.timeout <= 0:
		return errors.New("--drain-timeout must be positive")
	case o.kubeAPIQPS < 0:
		return errors.New("--drain-kube-api-qps must not be negative")
	}
	return nil
}

// drainResult is what the drain scenario measured. Durations are in seconds.
type drainResult struct {
	PodStartSeconds float64 `json:"podStartSeconds"`
	Zones           int     `json:"zones"`
	PodsPerZone     int     `json:"podsPerZone"`
	MaxUnavailable  int     `json:"maxUnavailable"`
	NodesDrained    int     `json:"nodesDrained"`
	// PodsPerNode are the pods on each drained node before the drain.
	PodsPerNode  map[string]int `json:"podsPerNode"`
	Batches      int            `json:"batches"`
	SetupSeconds float64        `json:"setupSeconds"`

	BatchSeconds       []float64 `json:"floorBatchSeconds"`
	BatchMedianSeconds float64   `json:"floorBatchMedianSeconds"`
	FloorSeconds       float64   `json:"floorSeconds"`

	// DrainsSeconds runs from starting the kubectl drains to the last one's
	// exit; WallSeconds to every pod of the group Ready again, on the spare
	// nodes.
	DrainsSeconds []float64 `json:"drainSeconds"`
	WallSeconds   float64   `json:"wallSeconds"`
	Ratio         float64   `json:"wallOverFloor"`

	// Decisions are the eviction webhook's counters over the drain,
	// decision/reason; Admitted, Refused and Errors sum them by decision.
	Decisions     map[string]float64 `json:"decisions"`
	Admitted      int                `json:"admitted"`
	Refused       int                `json:"refused"`
	Errors        int                `json:"errors"`
	HoldConflicts float64            `json:"holdConflicts"`
	// KubectlEvicted and KubectlRetries are what the kubectl drains printed:
	// pods evicted, and refusals (429) they retried; KubectlEvictionErrors
	// evictions answered with any other error (the webhook's call timed
	// out, or it could not judge), on which kubectl drain gives up.
	KubectlEvicted        int `json:"kubectlEvicted"`
	KubectlRetries        int `json:"kubectlRetries"`
	KubectlEvictionErrors int `json:"kubectlEvictionErrors"`
	// DrainRestarts counts the kubectl drains that failed and were run
	// again; DrainFailure is the first failure.
	DrainRestarts int    `json:"drainRestarts"`
	DrainFailure  string `json:"drainFailure,omitempty"`

	// From the pod monitor of the e2e tests (framework.Monitor), judging
	// every moment: the evictions it saw, in which order the zones went, the
	// most pods each zone had unavailable, and every eviction of a zone while
	// another zone was short and every moment two zones were short at once
	// (Breaches, which must be none).
	Evictions       int            `json:"evictionsSeen"`
	ZoneOrder       []string       `json:"zoneOrder"`
	PeakUnavailable map[string]int `json:"peakUnavailable"`
	Breaches        []string       `json:"breaches"`
	ForcedDeletions []string       `json:"forcedDeletions,omitempty"`

	OperatorCPUSeconds float64 `json:"operatorCPUSeconds"`
	// OperatorKubeAPIQPS is the operator's client-side limit on its API
	// requests; the webhooks have their own (--webhook-kube-api-qps).
	OperatorKubeAPIQPS float64  `json:"operatorKubeAPIQPS"`
	OperatorLogs       []string `json:"operatorLogs"`
	KubectlLogs        []string `json:"kubectlLogs"`
}

// runDrain measures the drain scenario on a fresh control plane.
func runDrain(ctx context.Context, cfg runConfig, o drainOptions) (_ *drainResult, retErr error) {
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
	res := &drainResult{
		PodStartSeconds: cfg.podStart.Seconds(), Zones: cfg.members, PodsPerZone: int(cfg.replicas), MaxUnavailable: int(cfg.maxUnavailable),
		Batches: cfg.batches(),
	}
	drained, spare, zoneOf, err := assignNodes(ctx, c, cp.Nodes())
	if err != nil {
		return nil, err
	}
	res.NodesDrained = len(drained)
	w, stopPodWatch, err := startLoggedWatch(ctx, cfg, cp.Config(), ns)
	if err != nil {
		return nil, err
	}
	defer stopPodWatch()

	began = time.Now()
	if err := createZones(ctx, c, ns, cfg.scenario, placeInZone); err != nil {
		return nil, err
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "every pod Ready", allReady(w, ns, oldImage, memberNames[:cfg.members]...))
	}); err != nil {
		return nil, err
	}
	res.SetupSeconds = time.Since(began).Seconds()
	where, err := podNodes(ctx, w, ns, cfg.scenario)
	if err != nil {
		return nil, err
	}
	if res.PodsPerNode, err = checkPlacement(where, onNodes(zoneOf, drained), cfg.scenario); err != nil {
		return nil, err
	}
	say("%d pods Ready in %s, on %d nodes: %s", cfg.pods(), since(began), len(drained), perNode(res.PodsPerNode))

	r := &webhookRun{cfg: cfg, cp: cp, ns: ns, say: say, trust: newTrust(webhookHost)}
	stopWatch, err := r.serve(ctx, evictionWebhook)
	if err != nil {
		return nil, err
	}
	defer stopWatch()
	var qpsFlags []string
	qpsFlags, res.OperatorKubeAPIQPS = kubeAPIFlags(o.kubeAPIQPS)
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
	if err := waitEvictionJudged(ctx, cfg, ops[0], cs, ns, memberNames[0]+"-0"); err != nil {
		return nil, err
	}

	if err := setUnschedulable(ctx, c, spare, false); err != nil {
		return nil, err
	}
	batch, err := measureDrainFloor(ctx, cfg, c, w, ns, res)
	if err != nil {
		return nil, err
	}
	say("floor: batches of %d pods took %v, median %s; %d batches: %s", cfg.maxUnavailable, secondsList(res.BatchSeconds), batch.Round(time.Millisecond), res.Batches, seconds(res.FloorSeconds))

	if err := drainAll(ctx, cfg, o, cp, cs, w, ns, drained, onNodes(zoneOf, spare), ops, res); err != nil {
		return nil, err
	}
	say("drain: %s to every pod Ready again (%.2f x the floor); kubectl drains exited after %v", seconds(res.WallSeconds), res.Ratio, secondsList(res.DrainsSeconds))
	say("evictions: %d admitted, %d refused, %d errors (%s); zones in order %s; breaches %d",
		res.Admitted, res.Refused, res.Errors, decisionsCell(res.Decisions), strings.Join(res.ZoneOrder, " "), len(res.Breaches))
	return res, nil
}

// assignNodes labels the first drainNodesPerZone nodes of each zone to be
// drained and the others spare, and cordons the spare ones, so that the
// group's pods start on the drained ones. zoneOf maps every node to the
// member whose zone it is in.
func assignNodes(ctx context.Context, c client.Client, nodes []string) (drained, spare []string, zoneOf map[string]string, _ error) {
	zoneOf = map[string]string{}
	for i, name := range nodes {
		// controlplane.Start puts node i in zone i mod the zones.
		zoneOf[name] = memberNames[i%len(controlplane.DefaultZones)]
		role, unschedulable := roleDrained, false
		if i >= drainNodesPerZone*len(controlplane.DefaultZones) {
			role, unschedulable = roleSpare, true
		}
		patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}},"spec":{"unschedulable":%t}}`, nodeRoleLabel, role, unschedulable)
		if err := c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			return nil, nil, nil, fmt.Errorf("label node %s %s: %w", name, role, err)
		}
		if role == roleDrained {
			drained = append(drained, name)
		} else {
			spare = append(spare, name)
		}
	}
	return drained, spare, zoneOf, nil
}

// setUnschedulable cordons or uncordons the nodes, as kubectl does.
func setUnschedulable(ctx context.Context, c client.Client, nodes []string, unschedulable bool) error {
	var errs []error
	for _, name := range nodes {
		patch := fmt.Sprintf(`{"spec":{"unschedulable":%t}}`, unschedulable)
		if err := c.Patch(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
			errs = append(errs, fmt.Errorf("set node %s unschedulable=%t: %w", name, unschedulable, err))
		}
	}
	return errors.Join(errs...)
}

// placeInZone keeps a member's pods on the nodes of its zone (the fake
// nodes' zones are controlplane.DefaultZones, in the members' order), spread
// evenly over those that take pods.
func placeInZone(sts *appsv1.StatefulSet) {
	i := slices.Index(memberNames, sts.Name)
	spec := &sts.Spec.Template.Spec
	spec.NodeSelector = map[string]string{corev1.LabelTopologyZone: controlplane.DefaultZones[i]}
	spec.TopologySpreadConstraints = []corev1.TopologySpreadConstraint{{
		MaxSkew: 1, TopologyKey: corev1.LabelHostname, WhenUnsatisfiable: corev1.DoNotSchedule,
		LabelSelector: sts.Spec.Selector,
		// A cordoned node takes no pod; leaving it out of the skew lets the
		// pods spread over the nodes that do.
		NodeTaintsPolicy: ptr.To(corev1.NodeInclusionPolicyHonor),
	}}
}

// podNodes maps each pod of the group to its node.
func podNodes(ctx context.Context, c client.Reader, ns string, s scenario) (map[string]string, error) {
	var pods corev1.PodList
	if err := c.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range pods.Items {
		if owner, _ := ownerOf(p.Name, s); owner != "" {
			out[p.Name] = p.Spec.NodeName
		}
	}
	return out, nil
}

// measureDrainFloor times the replacement of batches of maxUnavailable pods
// of a StatefulSet on the spare nodes with no operator, and sets the floor:
// every batch of every zone one after the other.
func measureDrainFloor(ctx context.Context, cfg runConfig, c client.Client, w *watcher, ns string, res *drainResult) (time.Duration, error) {
	sts := statefulSet(ns, floorName, cfg.maxUnavailable, oldImage)
	sts.Spec.Template.Spec.NodeSelector = map[string]string{nodeRoleLabel: roleSpare}
	if err := c.Create(ctx, sts); err != nil {
		return 0, fmt.Errorf("create StatefulSet %s: %w", sts.Name, err)
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "the floor's pods Ready", allReady(w, ns, oldImage, floorName))
	}); err != nil {
		return 0, err
	}
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

// drainAll drains every node at once with one `kubectl drain` each, waits
// for every drain to end and every pod of the group to be Ready again, and
// records what the webhook decided, what the kubectl drains printed and what
// the pod watches saw. It uncordons the nodes at the end.
func drainAll(ctx context.Context, cfg runConfig, o drainOptions, cp *controlplane.ControlPlane, cs kubernetes.Interface, w *watcher, ns string,
	nodes []string, spare map[string]string, ops operators, res *drainResult) (retErr error) {
	mon, err := startPodMonitor(ctx, cfg, cs, ns, memberNames[:cfg.members])
	if err != nil {
		return err
	}
	defer mon.Stop()
	in := ops[0]
	before, err := scrapeMetrics(in)
	if err != nil {
		return err
	}
	cpu, err := cpuSeconds(in.pid)
	if err != nil {
		return err
	}

	// Deferred in this order, on any return the drains are killed, then
	// waited for, then their nodes uncordoned.
	defer func() {
		retErr = errors.Join(retErr, setUnschedulable(context.WithoutCancel(ctx), cp.Client(), nodes, false))
	}()
	var wg sync.WaitGroup
	defer wg.Wait()
	drainCtx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	began := time.Now()
	exits := make([]time.Duration, len(nodes))
	errs := make([]error, len(nodes))
	restarts := make([]int, len(nodes))
	for i, node := range nodes {
		logFile := filepath.Join(cfg.workDir, "kubectl-drain-"+node+".log")
		res.KubectlLogs = append(res.KubectlLogs, logFile)
		out, err := os.Create(logFile)
		if err != nil {
			return err
		}
		wg.Go(func() {
			defer out.Close()
			errs[i] = drainNode(drainCtx, cp, node, o.timeout, out, &restarts[i])
			exits[i] = time.Since(began)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("%w\n%s", errs[i], tail(logFile, 10))
			}
		})
	}
	cfg.say("started %d kubectl drains at once: %s", len(nodes), strings.Join(nodes, " "))
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%w\n%s", err, operatorLogs(ops))
	}
	err = withTimeout(ctx, o.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "every pod of the group Ready again", allReady(w, ns, oldImage, memberNames[:cfg.members]...))
	})
	if err != nil {
		return err
	}
	res.WallSeconds = time.Since(began).Seconds()
	res.Ratio = res.WallSeconds / res.FloorSeconds
	for i, d := range exits {
		res.DrainsSeconds = append(res.DrainsSeconds, d.Seconds())
		res.DrainRestarts += restarts[i]
	}
	where, err := podNodes(ctx, w, ns, cfg.scenario)
	if err != nil {
		return err
	}
	if _, err := checkPlacement(where, spare, cfg.scenario); err != nil {
		return fmt.Errorf("after the drain: %w", err)
	}

	after, err := scrapeMetrics(in)
	if err != nil {
		return err
	}
	cpuAfter, err := cpuSeconds(in.pid)
	if err != nil {
		return err
	}
	res.OperatorCPUSeconds = cpuAfter - cpu
	res.Decisions = counterDelta(evictionDecisions(after), evictionDecisions(before))
	res.Admitted, res.Refused, res.Errors = byDecision(res.Decisions)
	conflicts := map[string]string{"requester": metrics.RequesterEviction}
	res.HoldConflicts = counterDelta(after.counters(holdConflictsMetric, conflicts), before.counters(holdConflictsMetric, conflicts))[""]
	for _, f := range res.KubectlLogs {
		b, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		out := drainOutput(string(b))
		res.KubectlEvicted += out.evicted
		res.KubectlRetries += out.retries
		res.KubectlEvictionErrors += out.evictionErrors
		if res.DrainFailure == "" {
			res.DrainFailure = out.firstFailure
		}
	}
	res.Evictions = len(mon.Rolls())
	res.ZoneOrder = mon.MemberOrder()
	res.PeakUnavailable = mon.PeakNotReady()
	for _, b := range mon.Breaches() {
		res.Breaches = append(res.Breaches, b.At.Format(time.StampMilli)+" "+b.Detail)
	}
	res.ForcedDeletions = mon.ForcedDeletions()
	return nil
}

// drainRestartsAtMost bounds how often one node's drain is run again.
const drainRestartsAtMost = 20

// drainNode runs `kubectl drain` of node until it succeeds, as a node pool
// upgrade or an autoscaler asks again after a failed drain: kubectl retries
// a refusal (429) by itself, but gives up on any other error, e.g. a
// webhook call that timed out. restarts counts the runs after the first.
func drainNode(ctx context.Context, cp *controlplane.ControlPlane, node string, timeout time.Duration, out io.Writer, restarts *int) error {
	for {
		cmd := exec.CommandContext(ctx, cp.Assets().Kubectl, "--kubeconfig", cp.Kubeconfig(), "drain", node,
			"--ignore-daemonsets", "--delete-emptydir-data", "--timeout", timeout.String())
		cmd.Stdout, cmd.Stderr = out, out
		err := cmd.Run()
		switch {
		case err == nil:
			return nil
		case ctx.Err() != nil:
			return fmt.Errorf("kubectl drain %s: %w (%w)", node, err, context.Cause(ctx))
		case *restarts == drainRestartsAtMost:
			return fmt.Errorf("kubectl drain %s failed %d times, the last: %w", node, *restarts+1, err)
		}
		*restarts++
		fmt.Fprintf(out, "%s %v; running kubectl drain again\n", drainRestartMarker, err)
	}
}

// tail is the last n lines of a file, for an error.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
