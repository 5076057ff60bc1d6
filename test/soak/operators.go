package soak

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/echelon-operator/echelon/e2e/framework"
)

// leaderElection keeps a take-over after a SIGKILL to a few seconds, as the
// e2e handover specs do.
var leaderElection = []string{
	"--leader-elect=true",
	"--leader-elect-lease-duration=4s",
	"--leader-elect-renew-deadline=3s",
	"--leader-elect-retry-period=500ms",
}

// operators keeps two leader-elected echelon processes running over the soak's
// namespaces, hands over between them, and adds up their counters.
type operators struct {
	binary, kubeconfig, logDir string
	flags                      []string

	// webhooks, when set, makes every instance serve the webhooks on a
	// port of its own, which the balancer forwards to.
	webhooks *balancer

	mu      sync.Mutex
	running []*framework.Operator
	// webhookPorts holds each running instance's webhook port.
	webhookPorts map[*framework.Operator]int
	started      int
	// counters holds each process's last scraped counters, by process name.
	counters map[string]opCounters
	// restarts counts the instances that exited on their own (a leader that
	// could not renew its Lease while the API server restarted exits, as it
	// must) and were replaced, as a Deployment replaces them.
	restarts int
}

// opCounters are the counters of one operator process.
type opCounters struct {
	// throttled counts the API requests answered 429 (client-go retries
	// them after the Retry-After the API server gives).
	throttled float64
	// reconcileErrors counts the passes that failed and were retried with
	// backoff.
	reconcileErrors float64
}

func newOperators(binary, kubeconfig, logDir string, flags []string, webhooks *balancer) *operators {
	return &operators{binary: binary, kubeconfig: kubeconfig, logDir: logDir, flags: flags, webhooks: webhooks,
		counters: map[string]opCounters{}, webhookPorts: map[*framework.Operator]int{}}
}

// start starts a fresh instance; it warms its caches, and joins the leader
// election, on its own.
func (o *operators) start() error {
	o.started++
	name := fmt.Sprintf("soak-operator-%d", o.started)
	flags := append(append([]string{}, leaderElection...), o.flags...)
	port := 0
	if o.webhooks != nil {
		var err error
		if port, err = framework.FreePort(); err != nil {
			return err
		}
		flags = append(flags, webhookFlags(port)...)
	}
	op, err := framework.StartOperator(o.binary, o.kubeconfig, o.logDir, name, flags...)
	if err != nil {
		return err
	}
	o.running = append(o.running, op)
	o.webhookPorts[op] = port
	o.updateBackends()
	return nil
}

// remove forgets a running instance that stopped. The caller holds o.mu.
func (o *operators) remove(i int) {
	delete(o.webhookPorts, o.running[i])
	o.running = append(o.running[:i], o.running[i+1:]...)
	o.updateBackends()
}

// updateBackends points the balancer at the running instances' webhook
// ports. The caller holds o.mu.
func (o *operators) updateBackends() {
	if o.webhooks == nil {
		return
	}
	ports := make([]int, 0, len(o.running))
	for _, op := range o.running {
		ports = append(ports, o.webhookPorts[op])
	}
	o.webhooks.setBackends(ports)
}

// replaceExited replaces every running instance that exited without being
// told to, as a Deployment's controller and kubelet would. The caller holds
// o.mu.
func (o *operators) replaceExited() error {
	for i := 0; i < len(o.running); {
		select {
		case <-o.running[i].Exited():
			o.remove(i)
			o.restarts++
			if err := o.start(); err != nil {
				return err
			}
		default:
			i++
		}
	}
	return nil
}

// supervise replaces exited instances every second until ctx ends.
func (o *operators) supervise(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		o.mu.Lock()
		_ = o.replaceExited()
		o.mu.Unlock()
	}
}

// waitReady waits until every running instance serves /ready: a standby
// with a warm cache, ready to take over.
func (o *operators) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	for {
		if err := o.replaceExited(); err != nil {
			return err
		}
		ready := 0
		for _, op := range o.running {
			if code, _, err := op.Get("/ready"); err == nil && code == 200 {
				ready++
			}
		}
		if ready == len(o.running) {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d instances ready: %w", ready, len(o.running), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// startPair starts the two instances.
func (o *operators) startPair(ctx context.Context) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	for range 2 {
		if err := o.start(); err != nil {
			return err
		}
	}
	if err := o.waitReady(ctx); err != nil {
		return err
	}
	_, err := o.leader(ctx)
	return err
}

// leader waits until exactly one running instance leads and returns it.
func (o *operators) leader(ctx context.Context) (*framework.Operator, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		var leaders []*framework.Operator
		for _, op := range o.running {
			if op.IsLeader() {
				leaders = append(leaders, op)
			}
		}
		if len(leaders) == 1 {
			return leaders[0], nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("no single leader among %d instances (%d lead): %w", len(o.running), len(leaders), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// handover waits until both instances are ready (the one started by the
// last handover may still be warming its cache), stops the leader by SIGKILL
// or SIGTERM, waits until the standby takes over, and starts a fresh
// instance, so that two run again, as a Deployment would; the fresh one
// warms up while the rollouts go on.
func (o *operators) handover(ctx context.Context, kind Kind) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if err := o.waitReady(ctx); err != nil {
		return err
	}
	leader, err := o.leader(ctx)
	if err != nil {
		return err
	}
	o.scrape(leader)
	if kind == Kill {
		leader.Kill()
		<-leader.Exited()
	} else if err := leader.Stop(15 * time.Second); err != nil {
		return fmt.Errorf("SIGTERM %s: %w", leader.Name, err)
	}
	for i, op := range o.running {
		if op == leader {
			o.remove(i)
			break
		}
	}
	if _, err := o.leader(ctx); err != nil {
		return fmt.Errorf("after the %s of %s: %w", kind, leader.Name, err)
	}
	return o.start()
}

// scrapeAll records the counters of every running instance.
func (o *operators) scrapeAll() {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, op := range o.running {
		o.scrape(op)
	}
}

// scrape records op's counters; a failed scrape keeps the last ones.
func (o *operators) scrape(op *framework.Operator) {
	code, body, err := op.Get("/metrics")
	if err != nil || code != 200 {
		return
	}
	o.counters[op.Name] = opCounters{
		throttled:       sumMetric(body, "rest_client_requests_total", `code="429"`),
		reconcileErrors: sumMetric(body, "controller_runtime_reconcile_errors_total", ""),
	}
}

// totals adds up the counters of every instance that ran.
func (o *operators) totals() opCounters {
	o.mu.Lock()
	defer o.mu.Unlock()
	var t opCounters
	for _, c := range o.counters {
		t.throttled += c.throttled
		t.reconcileErrors += c.reconcileErrors
	}
	return t
}

// stopAll stops every running instance.
func (o *operators) stopAll() {
	o.scrapeAll()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, op := range o.running {
		_ = op.Stop(15 * time.Second)
	}
	o.running = nil
}

// logTails returns the end of every running instance's log.
func (o *operators) logTails(lines int) string {
	o.mu.Lock()
	defer o.mu.Unlock()
	var b strings.Builder
	for _, op := range o.running {
		b.WriteString(op.LogTail(lines))
	}
	return b.String()
}

var sampleLine = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})?\s+(\S+)`)

// sumMetric adds up the samples of a metric in the Prometheus text format
// whose labels contain label ("" for all).
func sumMetric(text, name, label string) float64 {
	var sum float64
	for _, line := range strings.Split(text, "\n") {
		m := sampleLine.FindStringSubmatch(line)
		if m == nil || m[1] != name || (label != "" && !strings.Contains(m[2], label)) {
			continue
		}
		if v, err := strconv.ParseFloat(m[3], 64); err == nil {
			sum += v
		}
	}
	return sum
}
