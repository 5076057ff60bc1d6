package soak

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// Env is where a soak runs: a control plane, the operator binary, and the
// operator's user, bound only to the RBAC the code generates.
type Env struct {
	ControlPlane *controlplane.ControlPlane
	// OperatorBin is the echelon binary; OperatorUser the user it runs as.
	OperatorBin  string
	OperatorUser *controlplane.User
	// LogDir receives the operators' logs.
	LogDir string
	// Log receives a line per rollout as it ends; nil discards them.
	Log io.Writer
}

// Options say how big a soak is.
type Options struct {
	Config
	// Replicas is each zone's pods at the start (three zones per group).
	Replicas int32
	// Throttle puts the operator's requests in a low API priority level.
	Throttle bool
	// RolloutTimeout bounds each rollout, from its release to its outcome.
	RolloutTimeout time.Duration
}

// Run creates the groups, starts two leader-elected operators over them and
// runs the scripts Generate draws, the groups' at the same time, each group's
// one after the other. Every group's pods are watched by the e2e pod monitor
// from start to end. The error is for a soak that could not run; what went
// wrong in one that ran (a breach, a rollout that ended otherwise than its
// script expects) is in the report.
func Run(ctx context.Context, env Env, opts Options) (*Report, error) {
	if env.Log == nil {
		env.Log = io.Discard
	}
	opts.PodsPerRollout = 3 * int(opts.Replicas)
	opts.Config.Replicas = int(opts.Replicas)
	opts.Nodes = len(env.ControlPlane.Nodes())
	scripts := Generate(opts.Config)
	cp := env.ControlPlane
	c := cp.Client()
	cs, err := kubernetes.NewForConfig(cp.Config())
	if err != nil {
		return nil, err
	}
	promAddr, stopProm, err := failingPrometheus()
	if err != nil {
		return nil, err
	}
	defer stopProm()

	groups := make([]*group, opts.Groups)
	var namespaces []string
	for i := range groups {
		g, err := newGroup(ctx, cp, c, i, opts.Replicas)
		if err != nil {
			return nil, err
		}
		g.promAddr = promAddr
		groups[i] = g
		namespaces = append(namespaces, g.ns)
	}
	for _, g := range groups {
		if err := g.waitSettled(ctx, opts.RolloutTimeout); err != nil {
			return nil, err
		}
	}
	leNamespace := namespaces[0]
	if err := cp.GrantLeaderElection(ctx, env.OperatorUser.Name, leNamespace); err != nil {
		return nil, err
	}
	// The operators always serve the webhooks: the partitioned groups rely
	// on hold-partition whether or not the soak evicts.
	webhooks, err := newBalancer()
	if err != nil {
		return nil, err
	}
	defer webhooks.close()
	if err := grantWebhooks(ctx, cp, env.OperatorUser.Name, leNamespace); err != nil {
		return nil, err
	}
	if opts.Throttle {
		if err := throttle(ctx, c, env.OperatorUser.Name); err != nil {
			return nil, err
		}
	}
	ops := newOperators(env.OperatorBin, env.OperatorUser.Kubeconfig, env.LogDir,
		[]string{"--namespaces=" + strings.Join(namespaces, ","), "--leader-election-namespace=" + leNamespace}, webhooks)
	if err := ops.startPair(ctx); err != nil {
		return nil, err
	}
	defer ops.stopAll()
	remove, err := installWebhooks(ctx, cp, leNamespace, namespaces, webhooks.port(), opts.Evictions)
	if err != nil {
		return nil, err
	}
	defer remove()
	var ev *evictions
	if opts.Evictions {
		ev = newEvictions(c, cs, namespaces)
	}
	for _, g := range groups {
		if err := g.createRolloutGroup(ctx); err != nil {
			return nil, err
		}
	}
	for _, g := range groups {
		if err := g.waitComplete(ctx, opts.RolloutTimeout); err != nil {
			return nil, fmt.Errorf("group %s before the soak: %w", g.ns, err)
		}
		members := make([]framework.WatchedMember, 0, len(g.zones))
		for _, z := range g.zones {
			members = append(members, framework.WatchedMember{Name: z, Replicas: int(g.replicas[z]), MaxUnavailable: intstr.FromInt32(1)})
		}
		if g.mon, err = framework.StartMonitor(ctx, cs, g.ns, members); err != nil {
			return nil, err
		}
		defer g.mon.Stop()
	}

	rep := &Report{Seed: opts.Seed, Groups: opts.Groups, Started: time.Now()}
	ch := &chaos{cp: cp, ops: ops, ev: ev}
	for _, g := range groups {
		g.ev = ev
	}
	scrapeCtx, stopScrape := context.WithCancel(ctx)
	defer stopScrape()
	go ops.supervise(scrapeCtx)
	go func() {
		for {
			select {
			case <-scrapeCtx.Done():
				return
			case <-time.After(2 * time.Second):
				ops.scrapeAll()
			}
		}
	}()
	var mu sync.Mutex
	var wg sync.WaitGroup
	for gi, g := range groups {
		wg.Go(func() {
			for _, s := range scripts {
				if s.Group != gi || ctx.Err() != nil {
					continue
				}
				res := g.run(ctx, s, ch, opts.RolloutTimeout)
				fmt.Fprintln(env.Log, res)
				mu.Lock()
				rep.Results = append(rep.Results, res)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	stopScrape()
	ops.scrapeAll()
	rep.Ended = time.Now()
	for _, g := range groups {
		for _, b := range g.mon.Breaches() {
			rep.Breaches = append(rep.Breaches, fmt.Sprintf("%s %s: %s", g.ns, b.At.Format(time.StampMilli), b.Detail))
		}
		for _, f := range g.mon.ForcedDeletions() {
			rep.Breaches = append(rep.Breaches, fmt.Sprintf("%s: pod %s vanished without terminating (force-deleted)", g.ns, f))
		}
	}
	t := ops.totals()
	rep.Handovers, rep.APIServerRestarts = ch.handovers, ch.restarts
	ops.mu.Lock()
	rep.OperatorRestarts = ops.restarts
	ops.mu.Unlock()
	rep.Throttled, rep.ReconcileErrors = int(t.throttled), int(t.reconcileErrors)
	rep.ChaosErrors = ch.errs
	if ev != nil {
		rep.Evictions = ev.totals()
	}
	if rep.Failed() {
		rep.OperatorLogs = ops.logTails(60)
	}
	return rep, ctx.Err()
}

// chaos carries out the steps that touch more than one group: handovers and
// API server restarts, one at a time, and drains, one at a time (beside the
// others: a drain may wait minutes on a group's budget).
type chaos struct {
	cp  *controlplane.ControlPlane
	ops *operators
	ev  *evictions

	mu        sync.Mutex
	handovers int
	restarts  int
	errs      []string
}

func (ch *chaos) do(ctx context.Context, st Step) {
	kind := st.Kind
	if kind == Drain {
		if err := ch.ev.drain(ctx, st.Node); err != nil {
			ch.mu.Lock()
			ch.errs = append(ch.errs, fmt.Sprintf("%s: %v", st, err))
			ch.mu.Unlock()
		}
		return
	}
	ch.mu.Lock()
	defer ch.mu.Unlock()
	var err error
	switch kind {
	case Kill, Term:
		if err = ch.ops.handover(ctx, kind); err == nil {
			ch.handovers++
		}
	case RestartAPIServer:
		// Both operators ready first, so that the restart is the one fault.
		ch.ops.mu.Lock()
		err = ch.ops.waitReady(ctx)
		ch.ops.mu.Unlock()
		if err == nil {
			if err = ch.cp.RestartAPIServer(ctx); err == nil {
				ch.restarts++
			}
		}
	}
	if err != nil {
		ch.errs = append(ch.errs, fmt.Sprintf("%s: %v", kind, err))
	}
}

// podsOn lists the problems of a group's pods against what an ended rollout
// leaves: every wanted pod live, Ready and on version, and no other pod.
func podsOn(pods []corev1.Pod, zone string, replicas int32, version string) error {
	var errs []error
	live := 0
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			errs = append(errs, fmt.Errorf("pod %s terminating", p.Name))
			continue
		}
		live++
		if got := p.Annotations[versionAnnotation]; got != version {
			errs = append(errs, fmt.Errorf("pod %s on %s, want %s", p.Name, got, version))
		}
		if !podReady(&p) {
			errs = append(errs, fmt.Errorf("pod %s not Ready", p.Name))
		}
	}
	if live != int(replicas) {
		errs = append(errs, fmt.Errorf("%s: %d pods, want %d", zone, live, replicas))
	}
	return errors.Join(errs...)
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
