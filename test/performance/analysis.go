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
	"path/filepath"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/builders"
)

// The analysis scenario measures metric-gated rollouts against a real
// Prometheus (the one the e2e tests use), scraping an exporter the bench
// sets, behind a proxy that records every query:
//
//   - latency (analysis_latency.go): per check interval, a group whose zone-a
//     gate is open has its metric turned bad at a random point of the check's
//     cycle; the bench times the scrape, the query that fails the gate and
//     the first pod deletion of the rollback that follows;
//   - queries (analysis_queries.go): --analysis-groups groups wait on a
//     pending gate of two checks; the bench counts their queries per check
//     interval, at the proxy and in Prometheus's own request counter, and
//     checks that groups without a pending gate send none.
const (
	// errorMetric is the exporter's gauge the checks compare: 0 is healthy,
	// 1 bad. Its labels are the group and the member (zone).
	errorMetric = "bench_errors"
	// errorThreshold is the compare check's threshold: the value must be below.
	errorThreshold = "0.5"
	// alertMetric is never exported: the hasData:false check on it passes, as
	// a "no alert firing" check does.
	alertMetric = "bench_alerts"
	// analysisScrapeInterval is Prometheus's scrape interval: how long a new
	// value can take to be seen at most.
	analysisScrapeInterval = time.Second
	// analysisSoak keeps a passed AfterMember gate pending for the whole
	// measurement: its checks keep being queried until it ends.
	analysisSoak = time.Hour
	// latencyReplicas and queryReplicas are the pods of each member of the
	// latency groups and of the other groups.
	latencyReplicas = 2
	queryReplicas   = 1
	// scrapePoll paces the wait for the exporter's next scrape: the error on
	// the scrape time it measures.
	scrapePoll = 2 * time.Millisecond
)

// analysisOptions are the flags of the analysis scenario.
type analysisOptions struct {
	intervals  []time.Duration
	repeats    int
	groups     int
	idleGroups int
	window     time.Duration
}

func bindAnalysisFlags(fs *flag.FlagSet, o *analysisOptions) {
	*o = analysisOptions{
		intervals: []time.Duration{time.Second, 5 * time.Second},
		repeats:   10, groups: 50, idleGroups: 10, window: 30 * time.Second,
	}
	fs.Var((*durationList)(&o.intervals), "analysis-intervals", "Comma-separated check intervals the analysis scenario measures.")
	fs.IntVar(&o.repeats, "analysis-repeats", o.repeats, "Times, per check interval, the analysis scenario turns a gate's metric bad and times the rollback.")
	fs.IntVar(&o.groups, "analysis-groups", o.groups, "Groups with a pending gate whose Prometheus queries the analysis scenario counts.")
	fs.IntVar(&o.idleGroups, "analysis-idle-groups", o.idleGroups, "Groups with analysis but no rollout in the analysis scenario; they must send no query.")
	fs.DurationVar(&o.window, "analysis-window", o.window, "How long, at least, the analysis scenario counts queries at each interval (6 intervals at least).")
}

func (o analysisOptions) validate() error {
	switch {
	case len(o.intervals) == 0:
		return errors.New("--analysis-intervals needs at least one interval")
	case o.repeats < 1 || o.groups < 1 || o.idleGroups < 0:
		return errors.New("--analysis-repeats and --analysis-groups must be at least 1, --analysis-idle-groups at least 0")
	case o.window <= 0:
		return errors.New("--analysis-window must be positive")
	}
	for _, d := range o.intervals {
		if d < time.Second {
			return fmt.Errorf("--analysis-intervals: %s is below the API's minimum of 1s", d)
		}
	}
	return nil
}

// analysisResult is what the analysis scenario measured.
type analysisResult struct {
	ScrapeIntervalSeconds float64         `json:"scrapeIntervalSeconds"`
	Latency               []latencySeries `json:"latency"`
	Queries               []querySeries   `json:"queries"`
	// QueriesOfIdleGroups counts, over the whole run, the queries of groups
	// that had analysis but never a rollout: there must be none.
	QueriesOfIdleGroups int      `json:"queriesOfIdleGroups"`
	IdleGroups          int      `json:"idleGroups"`
	OperatorLogs        []string `json:"operatorLogs"`
	PrometheusLog       string   `json:"prometheusLog"`
}

// analysisRun is the state of one run of the scenario.
type analysisRun struct {
	cfg      runConfig
	o        analysisOptions
	c        client.Client
	ns       string
	w        *watcher
	exporter *framework.Exporter
	prom     *framework.Prometheus
	proxy    *promQueryCounter
	ops      operators
	deleted  *deletionsSeen
	res      *analysisResult
	say      func(format string, args ...any)
}

// runAnalysis measures the analysis scenario on a fresh control plane whose
// pods are Ready as soon as they are scheduled: what it times is the
// analysis, not pod start-up.
func runAnalysis(ctx context.Context, cfg runConfig, o analysisOptions) (_ *analysisResult, retErr error) {
	say := cfg.say
	promBinary, err := framework.PrometheusBinary()
	if err != nil {
		return nil, err
	}
	began := time.Now()
	cp, ns, stop, err := startControlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer stop(&retErr)
	say("control plane up in %s", since(began))

	r := &analysisRun{cfg: cfg, o: o, c: cp.Client(), ns: ns, say: say, deleted: &deletionsSeen{},
		res: &analysisResult{ScrapeIntervalSeconds: analysisScrapeInterval.Seconds(), IdleGroups: o.idleGroups}}
	var stopPodWatch func()
	if r.w, stopPodWatch, err = startLoggedWatch(ctx, cfg, cp.Config(), ns); err != nil {
		return nil, err
	}
	defer stopPodWatch()
	if err := r.w.AddHandler(ctx, &corev1.Pod{}, r.deleted.handler()); err != nil {
		return nil, err
	}

	if r.exporter, err = framework.NewExporter(); err != nil {
		return nil, err
	}
	defer r.exporter.Close()
	promDir := filepath.Join(cfg.workDir, "prometheus-"+cfg.slug())
	if err := os.MkdirAll(promDir, 0o755); err != nil {
		return nil, err
	}
	began = time.Now()
	if r.prom, err = framework.StartPrometheus(ctx, promBinary, promDir, []string{r.exporter.Address()}, analysisScrapeInterval); err != nil {
		return nil, err
	}
	defer func() { retErr = errors.Join(retErr, r.prom.Stop()) }()
	r.res.PrometheusLog = filepath.Join(promDir, "prometheus.log")
	if r.proxy, err = startPromQueryCounter(r.prom.Address()); err != nil {
		return nil, err
	}
	defer r.proxy.close()

	latency, pending, idle := r.groups()
	all := append(append(append([]analysisGroup(nil), latency...), pending...), idle...)
	if err := r.createWorkload(ctx, all); err != nil {
		return nil, err
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return r.prom.WaitTargetsUp(ctx, []string{r.exporter.Address()})
	}); err != nil {
		return nil, err
	}
	say("Prometheus %s scraping the exporter every %s, %d groups created, in %s", promVersion(promBinary), analysisScrapeInterval, len(all), since(began))

	user, err := cp.NewOperatorUser(ctx, "echelon-operator")
	if err != nil {
		return nil, err
	}
	if err := cp.GrantLeaderElection(ctx, user.Name, ns); err != nil {
		return nil, err
	}
	began = time.Now()
	r.ops, err = startOperators(ctx, cfg, user, ns)
	defer func() { retErr = errors.Join(retErr, r.ops.stop()) }()
	if err != nil {
		return nil, err
	}
	for _, in := range r.ops {
		r.res.OperatorLogs = append(r.res.OperatorLogs, in.LogFile)
	}
	names := make([]string, len(all))
	for i, g := range all {
		names[i] = g.name
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return r.w.waitUntil(ctx, "every group Complete", groupsRolledOut(r.w, ns, oldImage, names...))
	}); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, operatorLogs(r.ops))
	}
	say("operator started; every group Complete %s after its start", since(began))

	for i, g := range latency {
		s, err := r.measureLatency(ctx, g, o.intervals[i])
		if err != nil {
			return nil, fmt.Errorf("latency at interval %s: %w\n%s", o.intervals[i], err, operatorLogs(r.ops))
		}
		r.res.Latency = append(r.res.Latency, s)
	}
	if r.res.Queries, err = r.measureQueries(ctx, pending); err != nil {
		return nil, fmt.Errorf("queries: %w\n%s", err, operatorLogs(r.ops))
	}
	for _, q := range r.proxy.all() {
		if strings.HasPrefix(q.group, "idle-") {
			r.res.QueriesOfIdleGroups++
		}
	}
	return r.res, nil
}

// analysisGroup is one RolloutGroup of the scenario.
type analysisGroup struct {
	group
	replicas  int32
	onFailure v1alpha1.FailurePolicy
	// noAlerts adds the hasData:false check to the compare check.
	noAlerts bool
	interval time.Duration
}

// groups are the latency groups (one per interval, three members of
// latencyReplicas, onFailure Rollback, the compare check alone), the groups
// whose queries are counted and the idle ones (three members of one pod,
// onFailure Pause, both checks at the first interval).
func (r *analysisRun) groups() (latency, pending, idle []analysisGroup) {
	newGroup := func(name string, replicas int32, onFailure v1alpha1.FailurePolicy, noAlerts bool, interval time.Duration) analysisGroup {
		g := analysisGroup{group: group{name: name}, replicas: replicas, onFailure: onFailure, noAlerts: noAlerts, interval: interval}
		for _, m := range memberNames {
			g.members = append(g.members, name+"-"+m)
		}
		return g
	}
	for _, d := range r.o.intervals {
		latency = append(latency, newGroup("gate-"+strings.ToLower(d.String()), latencyReplicas, v1alpha1.FailureRollback, false, d))
	}
	for i := range r.o.groups {
		pending = append(pending, newGroup(fmt.Sprintf("pending-%02d", i+1), queryReplicas, v1alpha1.FailurePause, true, r.o.intervals[0]))
	}
	for i := range r.o.idleGroups {
		idle = append(idle, newGroup(fmt.Sprintf("idle-%02d", i+1), queryReplicas, v1alpha1.FailurePause, true, r.o.intervals[0]))
	}
	return latency, pending, idle
}

// createWorkload sets every member's metric healthy, then creates the
// StatefulSets and the groups, createWorkers at a time.
func (r *analysisRun) createWorkload(ctx context.Context, groups []analysisGroup) error {
	var objs []client.Object
	for _, g := range groups {
		for _, m := range g.members {
			if err := r.exporter.Set(errorMetric, metricLabels(g.name, m), 0); err != nil {
				return err
			}
			objs = append(objs, statefulSet(r.ns, m, g.replicas, oldImage))
		}
	}
	for _, g := range groups {
		rg := builders.MakeRolloutGroup(r.ns, g.name).Members(g.members...).MaxUnavailable(g.replicas).Obj()
		rg.Spec.OnFailure = g.onFailure
		rg.Spec.Analysis = analysisSpec(r.proxy.Address(), g.interval, g.noAlerts)
		objs = append(objs, rg)
	}
	return forEach(ctx, len(objs), createWorkers, func(ctx context.Context, i int) error {
		if err := r.c.Create(ctx, objs[i]); err != nil {
			return fmt.Errorf("create %T %s: %w", objs[i], objs[i].GetName(), err)
		}
		return nil
	})
}

// analysisSpec gates each member once complete (AfterMember) on its error
// metric staying below errorThreshold, queried every interval, and with
// noAlerts on no alert series either, then soaks analysisSoak: the gate stays
// pending, and its checks queried, for the whole run.
func analysisSpec(address string, interval time.Duration, noAlerts bool) *v1alpha1.RolloutAnalysis {
	every := &metav1.Duration{Duration: interval}
	a := &v1alpha1.RolloutAnalysis{
		Prometheus: &v1alpha1.PrometheusSource{Address: address},
		SoakTime:   &metav1.Duration{Duration: analysisSoak},
		Checks: []v1alpha1.AnalysisCheck{{
			Name:      "error-rate",
			Query:     fmt.Sprintf(`max(%s{group="{{ .Group }}",zone="{{ .Member }}"})`, errorMetric),
			Condition: v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: v1alpha1.OperatorLess, Threshold: errorThreshold}},
			Interval:  every, Gate: v1alpha1.GateAfterMember,
		}},
	}
	if noAlerts {
		a.Checks = append(a.Checks, v1alpha1.AnalysisCheck{
			Name:      "no-alerts",
			Query:     fmt.Sprintf(`%s{group="{{ .Group }}"}`, alertMetric),
			Condition: v1alpha1.CheckCondition{HasData: ptr.To(false)},
			Interval:  every, Gate: v1alpha1.GateAfterMember,
		})
	}
	return a
}

func metricLabels(group, member string) map[string]string {
	return map[string]string{"group": group, "zone": member}
}

// gateSoaking holds when the group waits on the AfterMember gate of member at
// the StatefulSet's current update revision, every check of it passed: the
// group soaks, and its checks keep being queried.
func gateSoaking(c client.Reader, ns string, g analysisGroup, member, image string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		sts, err := statefulSetAt(ctx, c, ns, member, image)
		if sts == nil || err != nil {
			return false, err
		}
		rg := &v1alpha1.RolloutGroup{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: g.name}, rg); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		a := rg.Status.Analysis
		if rg.Status.Phase != v1alpha1.PhaseAnalyzing || a == nil || a.Gate == nil || a.Gate.Member != member ||
			a.Gate.Revision != sts.Status.UpdateRevision || len(a.Checks) == 0 {
			return false, nil
		}
		for _, st := range a.Checks {
			if st.Phase != v1alpha1.CheckPassed {
				return false, nil
			}
		}
		return true, nil
	}
}

// promVersion is the version directory of the Prometheus binary, e.g.
// "2.42.0+ds-5+deb12u1", or its path when it is not under bin/prometheus-*.
func promVersion(binary string) string {
	if v, ok := strings.CutPrefix(filepath.Base(filepath.Dir(binary)), "prometheus-"); ok {
		return v
	}
	return binary
}

// deletionsSeen records when the bench's pod watch first saw each pod being
// deleted: its deletionTimestamp set, or the pod gone.
type deletionsSeen struct {
	mu     sync.Mutex
	events []podDeletion
}

type podDeletion struct {
	at  time.Time
	pod string
	uid types.UID
}

func (d *deletionsSeen) handler() toolscache.ResourceEventHandler {
	record := func(obj any) {
		at := time.Now()
		pod, ok := podOf(obj)
		if !ok {
			return
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		for _, e := range d.events {
			if e.uid == pod.UID {
				return
			}
		}
		d.events = append(d.events, podDeletion{at: at, pod: pod.Name, uid: pod.UID})
	}
	return toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) {
			if pod, ok := obj.(*corev1.Pod); ok && pod.DeletionTimestamp != nil {
				record(obj)
			}
		},
		DeleteFunc: record,
	}
}

// firstAfter returns the first deletion after t of a pod of one of members.
func (d *deletionsSeen) firstAfter(t time.Time, members []string) (podDeletion, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for _, e := range d.events {
		if e.at.After(t) && ownedByOneOf(e.pod, members) {
			return e, true
		}
	}
	return podDeletion{}, false
}

// ownedByOneOf reports whether pod is <member>-<ordinal> of one of members.
func ownedByOneOf(pod string, members []string) bool {
	for _, m := range members {
		if rest, ok := strings.CutPrefix(pod, m+"-"); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			return true
		}
	}
	return false
}

// wait waits, within the run's timeout, until cond holds.
func (r *analysisRun) wait(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	return withTimeout(ctx, r.cfg.timeout, func(ctx context.Context) error { return r.w.waitUntil(ctx, what, cond) })
}
