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
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/echelon-operator/echelon/internal/metrics"
)

// The eviction scenario measures the eviction webhook's admission latency
// at a sustained rate, the way drains reach it: through the API server. A
// three-zone RolloutGroup with pods, and StatefulSets guarded by a
// ScalingPolicy with downscale.allowed=false; one operator serves both
// webhooks, registered with the API server. Open loop at one offered rate,
// alternating in rounds so that both meet the same noise of a shared
// machine:
//
//   - dry-run evictions of every pod of the group in turn: each is judged in
//     full, the live reads of the group, its StatefulSets and their pods
//     included, and records no hold, so the pods stay;
//   - dry-run scales of the guarded StatefulSets (the no-downscale webhook,
//     which answers from the cache), at the same rate, for comparison.
//
// Then every pod of one zone is evicted for real, once, at the same rate:
// the zone's budget admits maxUnavailable, the webhook refuses the rest
// with 429. The latency of each side is measured end to end by the client,
// and by the webhook itself (echelon_webhook_request_duration_seconds).

// evictionOptions are the flags of the eviction scenario.
type evictionOptions struct {
	// rates are the offered rates the dry-run loads run at, one after the
	// other; the real evictions run at the first.
	rates   []float64
	round   time.Duration
	rounds  int
	clients int
	guarded int
	// kubeAPIQPS is the operator's --kube-api-qps; 0 leaves its default.
	kubeAPIQPS float64
}

func bindEvictionFlags(fs *flag.FlagSet, o *evictionOptions) {
	// The rates of issue 29's figures: p99 < 10 ms at 20/s, < 50 ms at 100/s.
	*o = evictionOptions{rates: []float64{20, 100}, round: 20 * time.Second, rounds: 3, clients: 16, guarded: 10}
	fs.Var((*rateList)(&o.rates), "eviction-rate", "Comma-separated requests per second, through the API server, of the eviction scenario's loads, each measured in turn and printed side by side: dry-run evictions and dry-run scales of guarded StatefulSets; the real evictions of one zone run at the first.")
	fs.DurationVar(&o.round, "eviction-round", o.round, "How long each load of a round of the eviction scenario lasts.")
	fs.IntVar(&o.rounds, "eviction-rounds", o.rounds, "Rounds of the eviction scenario; each runs both loads, in turn first.")
	fs.IntVar(&o.clients, "eviction-clients", o.clients, "Concurrent clients of the eviction scenario's loads.")
	fs.IntVar(&o.guarded, "eviction-guarded", o.guarded, "StatefulSets guarded by a ScalingPolicy in the eviction scenario, scaled by its no-downscale load.")
	fs.Float64Var(&o.kubeAPIQPS, "eviction-kube-api-qps", 0, "The operator's --kube-api-qps in the eviction scenario (its burst twice that); 0 leaves the operator's default.")
}

func (o evictionOptions) validate() error {
	switch {
	case len(o.rates) == 0 || slices.Min(o.rates) <= 0 || o.round <= 0:
		return errors.New("--eviction-rate and --eviction-round must be positive")
	case o.rounds < 1 || o.clients < 1 || o.guarded < 1:
		return errors.New("--eviction-rounds, --eviction-clients and --eviction-guarded must be at least 1")
	case o.kubeAPIQPS < 0:
		return errors.New("--eviction-kube-api-qps must not be negative")
	}
	return nil
}

// evictionResult is what the eviction scenario measured.
type evictionResult struct {
	PodStartSeconds float64 `json:"podStartSeconds"`
	Zones           int     `json:"zones"`
	PodsPerZone     int     `json:"podsPerZone"`
	MaxUnavailable  int     `json:"maxUnavailable"`
	Guarded         int     `json:"guardedStatefulSets"`
	Clients         int     `json:"clients"`
	Rounds          int     `json:"rounds"`
	RoundSeconds    float64 `json:"roundSeconds"`
	// OperatorKubeAPIQPS is the operator's client-side limit on its API
	// requests; the webhooks have their own (--webhook-kube-api-qps).
	OperatorKubeAPIQPS float64 `json:"operatorKubeAPIQPS"`
	// APIServerDenial is what the API server answered a dry-run scale down
	// of a guarded StatefulSet: the no-downscale webhook works end to end.
	APIServerDenial string `json:"apiServerDenial"`
	// Loads are the two dry-run loads over every round, at each rate.
	Loads []evictionLoad `json:"loads"`
	// Real are the real evictions of one zone, at RealPerSec.
	Real       realEvictions `json:"realEvictions"`
	RealPerSec float64       `json:"realPerSecond"`
	// FirstErrors hold the first message of each kind of failure of any load.
	FirstErrors  map[string]string `json:"firstErrors,omitempty"`
	OperatorLogs []string          `json:"operatorLogs"`
}

// evictionLoad is both dry-run loads at one offered rate.
type evictionLoad struct {
	OfferedPerSec float64       `json:"offeredPerSecond"`
	Eviction      admissionSide `json:"eviction"`
	NoDownscale   admissionSide `json:"noDownscale"`
}

// admissionSide is one webhook's load, over every round.
type admissionSide struct {
	// Client is the latency through the API server, as the client saw it.
	Client latencySummary `json:"client"`
	// Webhook is what the webhook's own histogram saw of the same requests.
	Webhook histogramSummary `json:"webhook"`
	// Decisions are the webhook's counters over the load, keyed
	// decision/reason.
	Decisions map[string]float64 `json:"decisions"`
	// OperatorRequests are the operator's API requests over the load, by
	// verb and resource: the webhook's live reads.
	OperatorRequests   map[string]int `json:"operatorRequestsByVerb,omitempty"`
	OperatorCPUSeconds float64        `json:"operatorCPUSeconds"`

	hist    histogram
	samples []sample
	elapsed time.Duration
	dropped int
}

// realEvictions is the real evictions of one zone's pods.
type realEvictions struct {
	Zone      string `json:"zone"`
	Requested int    `json:"requested"`
	// Admitted were evicted; Refused were answered 429; Errors anything else.
	Admitted     int                `json:"admitted"`
	Refused      int                `json:"refused"`
	Errors       int                `json:"errors"`
	FirstRefusal string             `json:"firstRefusal"`
	Client       latencySummary     `json:"client"`
	Webhook      histogramSummary   `json:"webhook"`
	Decisions    map[string]float64 `json:"decisions"`
	// ZoneWholeSeconds runs from the first eviction to the zone's pods all
	// Ready again.
	ZoneWholeSeconds float64 `json:"zoneWholeSeconds"`
}

// evictionRun is the state of one run of the scenario.
type evictionRun struct {
	*webhookRun
	o   evictionOptions
	w   *watcher
	cs  kubernetes.Interface
	ops operators
	res *evictionResult
}

// runEviction measures the eviction scenario on a fresh control plane.
func runEviction(ctx context.Context, cfg runConfig, o evictionOptions) (_ *evictionResult, retErr error) {
	say := cfg.say
	began := time.Now()
	cp, ns, stop, err := startControlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer stop(&retErr)
	say("control plane up in %s", since(began))
	c := cp.Client()
	cs, err := kubernetes.NewForConfig(cp.Config())
	if err != nil {
		return nil, err
	}
	w, stopPodWatch, err := startLoggedWatch(ctx, cfg, cp.Config(), ns)
	if err != nil {
		return nil, err
	}
	defer stopPodWatch()

	began = time.Now()
	if err := createZones(ctx, c, ns, cfg.scenario, nil); err != nil {
		return nil, err
	}
	if _, err := createGuarded(ctx, c, ns, o.guarded); err != nil {
		return nil, err
	}
	names := slices.Clone(memberNames[:cfg.members])
	for i := range o.guarded {
		names = append(names, guardedName(i))
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "every pod Ready", allReady(w, ns, oldImage, names...))
	}); err != nil {
		return nil, err
	}
	say("%d zones of %d pods in group %s and %d guarded StatefulSets, every pod Ready in %s", cfg.members, cfg.replicas, groupName, o.guarded, since(began))

	r := &evictionRun{webhookRun: &webhookRun{cfg: cfg, cp: cp, ns: ns, say: say, trust: newTrust(webhookHost)}, o: o, w: w, cs: cs}
	r.res = &evictionResult{
		PodStartSeconds: cfg.podStart.Seconds(), Zones: cfg.members, PodsPerZone: int(cfg.replicas), MaxUnavailable: int(cfg.maxUnavailable),
		Guarded: o.guarded, Clients: o.clients, RealPerSec: o.rates[0], Rounds: o.rounds, RoundSeconds: o.round.Seconds(),
		FirstErrors: map[string]string{},
	}
	stopWatch, err := r.serve(ctx, evictionWebhook, noDownscaleWebhook)
	if err != nil {
		return nil, err
	}
	defer stopWatch()
	var qpsFlags []string
	qpsFlags, r.res.OperatorKubeAPIQPS = kubeAPIFlags(o.kubeAPIQPS)
	r.ops, err = r.startOperator(ctx, cfg.workDir, qpsFlags...)
	defer func() { retErr = errors.Join(retErr, r.ops.stop()) }()
	if err != nil {
		return nil, err
	}
	r.res.OperatorLogs = r.logs
	if err := r.waitGroupComplete(ctx); err != nil {
		return nil, err
	}
	if r.res.APIServerDenial, err = r.checkThroughAPIServer(ctx, r.ops); err != nil {
		return nil, err
	}
	if err := waitEvictionJudged(ctx, cfg, r.ops[0], cs, ns, memberNames[0]+"-0"); err != nil {
		return nil, err
	}

	for _, rate := range o.rates {
		load, err := r.measureDryRuns(ctx, rate)
		if err != nil {
			return nil, err
		}
		r.res.Loads = append(r.res.Loads, load)
	}
	if err := r.measureRealEvictions(ctx, memberNames[0]); err != nil {
		return nil, err
	}
	return r.res, nil
}

func (r *evictionRun) waitGroupComplete(ctx context.Context) error {
	err := withTimeout(ctx, r.cfg.timeout, func(ctx context.Context) error {
		return r.w.waitUntil(ctx, "the group to be Complete", groupsRolledOut(r.w, r.ns, oldImage, groupName))
	})
	if err != nil {
		return fmt.Errorf("%w\n%s", err, operatorLogs(r.ops))
	}
	return nil
}

// measureDryRuns warms both loads up at rate, then runs them in rounds,
// in turn first, so that a burst of a neighbour's CPU falls on both alike.
func (r *evictionRun) measureDryRuns(ctx context.Context, rate float64) (evictionLoad, error) {
	var pods []string
	for _, m := range memberNames[:r.cfg.members] {
		for i := range int(r.cfg.replicas) {
			pods = append(pods, fmt.Sprintf("%s-%d", m, i))
		}
	}
	evictions := &apiLoad{clients: r.o.clients, send: evictionSender(r.cs, r.ns, pods, true)}
	scales := &apiLoad{clients: r.o.clients, send: scaleSender(r.cs, r.ns, r.o.guarded)}
	r.say("warm-up: %s of each load at %.0f/s", webhookWarmup, rate)
	for _, l := range []*apiLoad{evictions, scales} {
		r.noteErrors(l.run(ctx, loadPlan{rate: rate, duration: webhookWarmup}))
	}
	load := evictionLoad{OfferedPerSec: rate}
	ev, nd := &load.Eviction, &load.NoDownscale
	for round := range r.o.rounds {
		order := []func() error{
			func() error {
				return r.measureSide(ctx, evictions, ev, rate, metrics.WebhookEviction, evictionDecisions)
			},
			func() error {
				return r.measureSide(ctx, scales, nd, rate, metrics.WebhookNoDownscale, noDownscaleDecisions)
			},
		}
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, measure := range order {
			if err := measure(); err != nil {
				return load, err
			}
		}
		r.say("round %d of %d at %.0f/s: eviction p99 so far %s, no-downscale %s (through the API server)", round+1, r.o.rounds, rate,
			ms(summarize(ev.samples, rate, ev.elapsed, ev.dropped).P99Seconds), ms(summarize(nd.samples, rate, nd.elapsed, nd.dropped).P99Seconds))
	}
	for _, side := range []*admissionSide{ev, nd} {
		side.Client = summarize(side.samples, rate, side.elapsed, side.dropped)
		side.Webhook = side.hist.summary()
	}
	r.say("dry-run evictions at %.0f/s: %s; the webhook's own p50 %s, p99 %s", rate, describe(ev.Client), ms(ev.Webhook.P50Seconds), ms(ev.Webhook.P99Seconds))
	r.say("dry-run scales at %.0f/s: %s", rate, describe(nd.Client))
	return load, nil
}

// evictionDecisions are the eviction webhook's decisions, decision/reason.
func evictionDecisions(m metricsSnapshot) map[string]float64 {
	return m.counters(evictionsMetric, nil, "decision", "reason")
}

// noDownscaleDecisions are the no-downscale webhook's decisions, decision/reason.
func noDownscaleDecisions(m metricsSnapshot) map[string]float64 {
	return m.counters(webhookRequestsMetric, map[string]string{"webhook": metrics.WebhookNoDownscale}, "decision", "reason")
}

// measureSide runs one round's load and adds to side what the client, the
// webhook's histogram and counters, and the operator's proxy and CPU saw.
func (r *evictionRun) measureSide(ctx context.Context, l *apiLoad, side *admissionSide, rate float64, webhook string, decisions func(metricsSnapshot) map[string]float64) error {
	s, err := r.stretch(ctx, func() loadRun { return l.run(ctx, loadPlan{rate: rate, duration: r.o.round}) }, webhook, decisions)
	if err != nil {
		return err
	}
	r.noteErrors(s.run)
	side.samples = append(side.samples, s.run.samples...)
	side.elapsed += s.run.elapsed
	side.dropped += s.run.dropped
	side.hist = side.hist.plus(s.hist)
	side.Decisions = addCounts(side.Decisions, s.decisions)
	side.OperatorRequests = sumCounts(side.OperatorRequests, s.requests)
	side.OperatorCPUSeconds += s.cpuSeconds
	return nil
}

// stretchResult is what one stretch of load saw.
type stretchResult struct {
	run        loadRun
	hist       histogram
	decisions  map[string]float64
	requests   map[string]int
	cpuSeconds float64
}

// stretch runs load and reads the operator's metrics, requests and CPU
// before and after.
func (r *evictionRun) stretch(ctx context.Context, load func() loadRun, webhook string, decisions func(metricsSnapshot) map[string]float64) (stretchResult, error) {
	in := r.ops[0]
	labels := map[string]string{"webhook": webhook}
	before, err := scrapeMetrics(in)
	if err != nil {
		return stretchResult{}, err
	}
	counts := r.ops.counts()
	cpu, err := cpuSeconds(in.pid)
	if err != nil {
		return stretchResult{}, err
	}
	run := load()
	if err := ctx.Err(); err != nil {
		return stretchResult{}, err
	}
	after, err := scrapeMetrics(in)
	if err != nil {
		return stretchResult{}, fmt.Errorf("%w\n%s", err, operatorLogs(r.ops))
	}
	cpuAfter, err := cpuSeconds(in.pid)
	if err != nil {
		return stretchResult{}, err
	}
	return stretchResult{
		run:        run,
		hist:       after.histogram(webhookDurationMetric, labels).minus(before.histogram(webhookDurationMetric, labels)),
		decisions:  counterDelta(decisions(after), decisions(before)),
		requests:   diffCounts(r.ops.counts(), counts),
		cpuSeconds: cpuAfter - cpu,
	}, nil
}

func (r *evictionRun) noteErrors(run loadRun) {
	for kind, detail := range run.details {
		if r.res.FirstErrors[kind] == "" {
			r.res.FirstErrors[kind] = detail
		}
	}
}

// measureRealEvictions evicts every pod of zone once, in order, at the
// offered rate, and waits until the zone is whole again.
func (r *evictionRun) measureRealEvictions(ctx context.Context, zone string) error {
	n := int(r.cfg.replicas)
	pods := make([]string, n)
	for i := range pods {
		pods[i] = fmt.Sprintf("%s-%d", zone, i)
	}
	load := &apiLoad{clients: r.o.clients, send: evictionSender(r.cs, r.ns, pods, false)}
	// Half a request's interval more, so that the plan's last request falls due.
	rate := r.res.RealPerSec
	plan := loadPlan{rate: rate, duration: time.Duration((float64(n) + 0.5) / rate * float64(time.Second))}
	began := time.Now()
	s, err := r.stretch(ctx, func() loadRun { return load.run(ctx, plan) }, metrics.WebhookEviction, evictionDecisions)
	if err != nil {
		return err
	}
	res := &r.res.Real
	res.Zone, res.Requested = zone, len(s.run.samples)
	for _, x := range s.run.samples {
		switch x.fail {
		case "":
			res.Admitted++
		case failRefused:
			res.Refused++
		default:
			res.Errors++
		}
	}
	res.FirstRefusal = s.run.details[failRefused]
	delete(s.run.details, failRefused)
	r.noteErrors(s.run)
	res.Client = summarize(s.run.samples, rate, s.run.elapsed, s.run.dropped)
	res.Webhook = s.hist.summary()
	res.Decisions = s.decisions
	r.say("real evictions of %s's %d pods: %d admitted, %d refused (429), %d other errors; decisions %s", zone, n, res.Admitted, res.Refused, res.Errors, decisionsCell(res.Decisions))
	err = withTimeout(ctx, r.cfg.timeout, func(ctx context.Context) error {
		return r.w.waitUntil(ctx, zone+" whole again", allReady(r.w, r.ns, oldImage, zone))
	})
	if err != nil {
		return err
	}
	res.ZoneWholeSeconds = time.Since(began).Seconds()
	return nil
}

// decisionsCell lists counts keyed decision/reason, the largest first.
func decisionsCell(d map[string]float64) string {
	if len(d) == 0 {
		return "none"
	}
	keys := slices.SortedFunc(maps.Keys(d), func(a, b string) int {
		if d[a] != d[b] {
			if d[a] > d[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.0f", k, d[k])
	}
	return strings.Join(parts, ", ")
}
