package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
)

// The metric-gated specs query a real Prometheus that scrapes an exporter the
// spec controls: one gauge, echelon_e2e_errors{zone=<member>}, per member. The
// checks compare it with 1, so 0 is healthy and anything from 1 up is bad.
const (
	errorsMetric = "echelon_e2e_errors"
	// errorsQuery is the checks' query, templated with the member the gate is
	// about, so one check serves every zone.
	errorsQuery = `echelon_e2e_errors{zone="{{ .Member }}"}`
	// badErrors is the value that fails the checks.
	badErrors = 5
	// checkName is the name of the check errorRateCheck builds.
	checkName = "error-rate"
)

// promSetup is an exporter and a Prometheus server scraping it every second,
// both stopped when the spec ends.
type promSetup struct {
	exporter *framework.Exporter
	prom     *framework.Prometheus
}

// startPrometheus starts the exporter, with every member's gauge at 0
// (healthy), and a Prometheus scraping it. Start it before the StatefulSets:
// Prometheus scrapes first about 5 s after it starts, and waitScraped, which
// waits for that, then costs nothing.
func startPrometheus(ctx context.Context, members []string, options ...framework.PrometheusOption) *promSetup {
	GinkgoHelper()
	binary, err := framework.PrometheusBinary()
	Expect(err).NotTo(HaveOccurred(), "the metric-gated specs need Prometheus; `make test-e2e` installs it")
	exporter, err := framework.NewExporter()
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(exporter.Close)
	p := &promSetup{exporter: exporter}
	for _, m := range members {
		p.setErrors(m, 0)
	}
	p.prom, err = framework.StartPrometheus(ctx, binary, GinkgoT().TempDir(), []string{exporter.Address()}, time.Second, options...)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(func() {
		if CurrentSpecReport().Failed() {
			fmt.Fprintln(GinkgoWriter, p.prom.LogTail(30))
		}
		Expect(p.prom.Stop()).To(Succeed())
	})
	return p
}

// setErrors sets member's gauge.
func (p *promSetup) setErrors(member string, v float64) {
	GinkgoHelper()
	Expect(p.exporter.Set(errorsMetric, map[string]string{"zone": member}, v)).To(Succeed())
}

// waitScraped waits until Prometheus answers each member's query with v: a
// gate queried from now on sees it.
func (p *promSetup) waitScraped(ctx context.Context, v float64, members ...string) {
	GinkgoHelper()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for _, m := range members {
		Expect(p.prom.WaitForValue(ctx, fmt.Sprintf(`%s{zone=%q}`, errorsMetric, m), v)).To(Succeed())
	}
}

// flip sets member's gauge to v and waits until Prometheus has scraped it,
// returning when it did.
func (p *promSetup) flip(ctx context.Context, member string, v float64) time.Time {
	GinkgoHelper()
	p.setErrors(member, v)
	p.waitScraped(ctx, v, member)
	return time.Now()
}

// analysis is a spec.analysis against the server with checks and soak.
func (p *promSetup) analysis(soak time.Duration, checks ...v1alpha1.AnalysisCheck) *v1alpha1.RolloutAnalysis {
	a := &v1alpha1.RolloutAnalysis{Prometheus: &v1alpha1.PrometheusSource{Address: p.prom.Address()}, Checks: checks}
	if soak > 0 {
		a.SoakTime = &metav1.Duration{Duration: soak}
	}
	return a
}

// errorRateCheck is an AfterMember check of the member's gauge (below 1),
// queried every second, edited by mutate when given.
func errorRateCheck(mutate func(*v1alpha1.AnalysisCheck)) v1alpha1.AnalysisCheck {
	c := v1alpha1.AnalysisCheck{
		Name:      checkName,
		Query:     errorsQuery,
		Condition: v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: v1alpha1.OperatorLess, Threshold: "1"}},
		Interval:  &metav1.Duration{Duration: time.Second},
		Gate:      v1alpha1.GateAfterMember,
	}
	if mutate != nil {
		mutate(&c)
	}
	return c
}

// newAnalyzedZones is a group of three zones of replicas pods on v1, gated by
// analysis, with onFailure policy, its operator running and its monitor armed;
// Prometheus has scraped every zone's healthy gauge.
func newAnalyzedZones(ctx context.Context, replicas int32, policy v1alpha1.FailurePolicy,
	analysis func(*promSetup) *v1alpha1.RolloutAnalysis) (*zoneGroup, *promSetup, *framework.Monitor, *framework.Operator) {
	GinkgoHelper()
	g := newZones(ctx, replicas)
	p := startPrometheus(ctx, g.zones)
	g.createStatefulSets(ctx, nil)
	g.waitPodsOn(ctx, "v1")
	g.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) {
		s.Analysis, s.OnFailure = analysis(p), policy
	})
	op := startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
	g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
	mon := g.monitor(ctx)
	p.waitScraped(ctx, 0, g.zones...)
	return g, p, mon, op
}

// waitSoaking waits until the group soaks member at its AfterMember gate.
func (g *zoneGroup) waitSoaking(ctx context.Context, member string) {
	GinkgoHelper()
	Eventually(func(gm Gomega) {
		rg := g.get(ctx)
		gm.Expect(readyReason(rg)).To(Equal(v1alpha1.ReasonSoaking), "message: %s", rg.Status.Message)
		gm.Expect(rg.Status.Analysis).To(HaveField("Gate", HaveField("Member", member)))
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
}

// annotate sets an annotation on the group with kubectl, as a user would.
func (g *zoneGroup) annotate(ctx context.Context, key, value string) {
	GinkgoHelper()
	kubectl(ctx, "--namespace", g.ns, "annotate", "rolloutgroup", g.name, key+"="+value, "--overwrite")
}

// updateSpec edits the group's spec with a read-modify-write, retried on
// conflicts with the operator's status writes.
func (g *zoneGroup) updateSpec(ctx context.Context, edit func(*v1alpha1.RolloutGroupSpec)) {
	GinkgoHelper()
	Eventually(func() error {
		rg := g.get(ctx)
		edit(&rg.Spec)
		return k8s.Update(ctx, rg)
	}).WithContext(ctx).Should(Succeed())
}

// updateRevisions waits until every zone's StatefulSet has observed its
// template and returns each one's update revision.
func (g *zoneGroup) updateRevisions(ctx context.Context) map[string]string {
	GinkgoHelper()
	revs := map[string]string{}
	Eventually(func(gm Gomega) {
		for _, z := range g.zones {
			sts := &appsv1.StatefulSet{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: z}, sts)).To(Succeed())
			gm.Expect(sts.Status.ObservedGeneration).To(Equal(sts.Generation))
			revs[z] = sts.Status.UpdateRevision
		}
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
	return revs
}

// eventsOf lists the group's Events of reason, oldest first, as "Type: message".
func (g *zoneGroup) eventsOf(ctx context.Context, reason string) []string {
	GinkgoHelper()
	events := g.events(ctx)
	slices.SortFunc(events, func(a, b corev1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	var out []string
	for _, e := range events {
		if e.Reason == reason {
			out = append(out, e.Type+": "+e.Message)
		}
	}
	return out
}

// checkOf returns the status of the named check, failing when status has none.
func checkOf(gm Gomega, a *v1alpha1.AnalysisStatus, name string) v1alpha1.CheckStatus {
	gm.Expect(a).NotTo(BeNil(), "status.analysis")
	i := slices.IndexFunc(a.Checks, func(c v1alpha1.CheckStatus) bool { return c.Name == name })
	gm.Expect(i).To(BeNumerically(">=", 0), "status.analysis.checks has no %s: %+v", name, a.Checks)
	return a.Checks[i]
}

// readyReason is the reason of the group's Ready condition, which says why it
// is in its phase.
func readyReason(rg *v1alpha1.RolloutGroup) string {
	if c := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionReady); c != nil {
		return c.Reason
	}
	return ""
}

// operatorMetric reads the value of the operator's series name{labels}, with
// the group's namespace and name added to labels; 0 when it exports none.
func (g *zoneGroup) operatorMetric(op *framework.Operator, name string, labels map[string]string) float64 {
	GinkgoHelper()
	labels = maps.Clone(labels)
	labels["namespace"], labels["rolloutgroup"] = g.ns, g.name
	var pairs []string
	for _, k := range slices.Sorted(maps.Keys(labels)) {
		pairs = append(pairs, fmt.Sprintf("%s=%q", k, labels[k]))
	}
	series := name + "{" + strings.Join(pairs, ",") + "} "
	_, body, err := op.Get("/metrics")
	Expect(err).NotTo(HaveOccurred())
	for line := range strings.Lines(body) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), series); ok {
			v, err := strconv.ParseFloat(rest, 64)
			Expect(err).NotTo(HaveOccurred(), "metric line %q", line)
			return v
		}
	}
	return 0
}

// checkResults reads the operator's count of queries of the group's check
// by result: success, failure or error.
func (g *zoneGroup) checkResults(op *framework.Operator, check string) map[string]float64 {
	GinkgoHelper()
	out := map[string]float64{}
	for _, result := range []string{"success", "failure", "error"} {
		out[result] = g.operatorMetric(op, "echelon_rolloutgroup_analysis_checks_total", map[string]string{"check": check, "result": result})
	}
	return out
}

// groupRecord is the group as one status write left it.
type groupRecord struct {
	At       time.Time
	Phase    v1alpha1.RolloutPhase
	Reason   string
	Message  string
	Analysis *v1alpha1.AnalysisStatus
}

func (r groupRecord) String() string {
	return fmt.Sprintf("%s %s/%s: %s", r.At.Format(time.StampMilli), r.Phase, r.Reason, r.Message)
}

// gate is the member of the pending gate, or "".
func (r groupRecord) gate() string {
	if r.Analysis == nil || r.Analysis.Gate == nil {
		return ""
	}
	return r.Analysis.Gate.Member
}

// check is the record of the named check, if status has one.
func (r groupRecord) check(name string) (v1alpha1.CheckStatus, bool) {
	if r.Analysis == nil {
		return v1alpha1.CheckStatus{}, false
	}
	i := slices.IndexFunc(r.Analysis.Checks, func(c v1alpha1.CheckStatus) bool { return c.Name == name })
	if i < 0 {
		return v1alpha1.CheckStatus{}, false
	}
	return r.Analysis.Checks[i], true
}

// groupTimeline is every version of a group the test saw through one watch,
// with the time it saw it: what the group said, and when, while it ran.
type groupTimeline struct {
	mu      sync.Mutex
	records []groupRecord
}

// recordGroup watches the group until the spec ends.
func (g *zoneGroup) recordGroup(ctx context.Context) *groupTimeline {
	GinkgoHelper()
	dyn, err := dynamic.NewForConfig(cp.Config())
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	t := &groupTimeline{}
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dyn, 0, g.ns, func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("metadata.name", g.name).String()
	})
	inf := factory.ForResource(v1alpha1.GroupVersion.WithResource("rolloutgroups")).Informer()
	add := func(o any) {
		u, ok := o.(*unstructured.Unstructured)
		if !ok {
			return
		}
		rg := &v1alpha1.RolloutGroup{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, rg); err != nil {
			fmt.Fprintf(GinkgoWriter, "group timeline: %v\n", err)
			return
		}
		t.add(groupRecord{At: time.Now(), Phase: rg.Status.Phase, Reason: readyReason(rg), Message: rg.Status.Message,
			Analysis: rg.Status.Analysis})
	}
	_, err = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    add,
		UpdateFunc: func(_, o any) { add(o) },
	})
	Expect(err).NotTo(HaveOccurred())
	factory.Start(ctx.Done())
	Expect(cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)).To(BeTrue())
	return t
}

func (t *groupTimeline) add(r groupRecord) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.records = append(t.records, r)
}

// all returns the records so far, oldest first.
func (t *groupTimeline) all() []groupRecord {
	t.mu.Lock()
	defer t.mu.Unlock()
	return slices.Clone(t.records)
}

// first returns the first record that matches.
func (t *groupTimeline) first(match func(groupRecord) bool) (groupRecord, bool) {
	for _, r := range t.all() {
		if match(r) {
			return r, true
		}
	}
	return groupRecord{}, false
}

// completedAgain is the first Complete record that follows one that was not:
// the end of the rollout, not the state it started from.
func (t *groupTimeline) completedAgain() (groupRecord, bool) {
	started := false
	for _, r := range t.all() {
		switch {
		case r.Phase != v1alpha1.PhaseComplete:
			started = true
		case started:
			return r, true
		}
	}
	return groupRecord{}, false
}

// String lists the records, for failure messages.
func (t *groupTimeline) String() string {
	var b strings.Builder
	for _, r := range t.all() {
		b.WriteString(r.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// podEvent is one state of a pod, as the test's watch saw it.
type podEvent struct {
	At          time.Time
	Pod         string
	UID         types.UID
	Revision    string
	Ready       bool
	Terminating bool
	Gone        bool
}

// podTimeline is every state of the namespace's pods seen through one watch:
// when a member became whole and when the next deletion came are read from
// the same stream, so they are ordered as the API server ordered them.
type podTimeline struct {
	mu     sync.Mutex
	events []podEvent
}

// recordPods watches the pods of ns until the spec ends.
func recordPods(ctx context.Context, ns string) *podTimeline {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(ctx)
	DeferCleanup(cancel)
	t := &podTimeline{}
	factory := informers.NewSharedInformerFactoryWithOptions(clientset, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	add := func(o any, gone bool) {
		if tomb, ok := o.(cache.DeletedFinalStateUnknown); ok {
			o, gone = tomb.Obj, true
		}
		if p, ok := o.(*corev1.Pod); ok {
			t.mu.Lock()
			defer t.mu.Unlock()
			t.events = append(t.events, podEvent{At: time.Now(), Pod: p.Name, UID: p.UID,
				Revision: p.Labels[appsv1.ControllerRevisionHashLabelKey], Ready: p.Status.Phase == corev1.PodRunning && isReady(p),
				Terminating: p.DeletionTimestamp != nil, Gone: gone})
		}
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { add(o, false) },
		UpdateFunc: func(_, o any) { add(o, false) },
		DeleteFunc: func(o any) { add(o, true) },
	})
	Expect(err).NotTo(HaveOccurred())
	factory.Start(ctx.Done())
	Expect(cache.WaitForCacheSync(ctx.Done(), inf.HasSynced)).To(BeTrue())
	return t
}

// ordinalOf returns the ordinal of pod in member, or -1.
func ordinalOf(member, pod string) int {
	rest, ok := strings.CutPrefix(pod, member+"-")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(rest)
	if err != nil {
		return -1
	}
	return n
}

// wholeAt is when the test first saw every pod of member (ordinals below
// replicas) Ready and not terminating on revision.
func (t *podTimeline) wholeAt(member string, replicas int, revision string) (time.Time, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	last := map[string]podEvent{}
	for _, e := range t.events {
		if ordinalOf(member, e.Pod) < 0 {
			continue
		}
		last[e.Pod] = e
		whole := true
		for i := range replicas {
			p, ok := last[fmt.Sprintf("%s-%d", member, i)]
			whole = whole && ok && !p.Gone && !p.Terminating && p.Ready && p.Revision == revision
		}
		if whole {
			return e.At, true
		}
	}
	return time.Time{}, false
}

// firstDeletion is the first pod of member the test saw terminating (or gone)
// at or after from.
func (t *podTimeline) firstDeletion(member string, from time.Time) (podEvent, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, e := range t.events {
		if ordinalOf(member, e.Pod) >= 0 && (e.Terminating || e.Gone) && !e.At.Before(from) {
			return e, true
		}
	}
	return podEvent{}, false
}

// expectPodsOnRevisions waits until every pod of each zone runs the revision
// revs names for it and its StatefulSet's update revision is that revision.
func (g *zoneGroup) expectPodsOnRevisions(ctx context.Context, revs map[string]string) {
	GinkgoHelper()
	Eventually(func(gm Gomega) {
		for z, rev := range revs {
			sts := &appsv1.StatefulSet{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: z}, sts)).To(Succeed())
			gm.Expect(sts.Status.UpdateRevision).To(Equal(rev), "update revision of %s", z)
			var pods corev1.PodList
			gm.Expect(k8s.List(ctx, &pods, client.InNamespace(g.ns), client.MatchingLabels{"app": z})).To(Succeed())
			gm.Expect(pods.Items).To(HaveLen(int(g.replicasOf(z))))
			for _, p := range pods.Items {
				gm.Expect(p.Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(rev), "pod %s", p.Name)
			}
		}
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
}

// rollsOf counts the monitor's rolls of member.
func rollsOf(mon *framework.Monitor, member string) int {
	n := 0
	for _, d := range mon.Rolls() {
		if d.Member == member {
			n++
		}
	}
	return n
}

// membersInOrder are the members of deletions in the order they were rolled,
// each run of one member's deletions once.
func membersInOrder(deletions []framework.Deletion) []string {
	var out []string
	for _, d := range deletions {
		if len(out) == 0 || out[len(out)-1] != d.Member {
			out = append(out, d.Member)
		}
	}
	return out
}
