package rolloutgroup

// Controller-tier tests of analysis gates and rollbacks: the reconciler
// against a real API server, the test playing the StatefulSet controller, and
// an HTTP server answering as Prometheus's query API (a real Prometheus runs
// in the e2e tests).

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/controllers/internal/controllertest"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
)

// promStub answers /api/v1/query with one sample whose value value(query)
// chooses ("" answers an empty vector), and records every query.
type promStub struct {
	srv     *httptest.Server
	mu      sync.Mutex
	value   func(query string) string
	queries []stubQuery
}

type stubQuery struct {
	at    time.Time
	query string
	// authorization is the request's Authorization header.
	authorization string
}

func newPromStub(t *testing.T, value func(string) string) *promStub {
	p := &promStub{value: value}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := r.ParseForm(); err != nil || r.URL.Path != "/api/v1/query" {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		q := r.Form.Get("query")
		p.mu.Lock()
		p.queries = append(p.queries, stubQuery{at: time.Now(), query: q, authorization: r.Header.Get("Authorization")})
		v := p.value(q)
		p.mu.Unlock()
		result := ""
		if v != "" {
			result = fmt.Sprintf(`{"metric":{},"value":[%d,"%s"]}`, time.Now().Unix(), v)
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":{"resultType":"vector","result":[%s]}}`, result)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

func (p *promStub) setValue(value func(string) string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.value = value
}

func (p *promStub) recorded() []stubQuery {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.queries)
}

func constant(v string) func(string) string { return func(string) string { return v } }

// analysisGroup creates a group of the members whose analysis queries prom with
// the given checks; with prom nil the analysis has no Prometheus (http checks
// only).
func (e *env) analysisGroup(name string, prom *promStub, policy v1alpha1.FailurePolicy, checks []v1alpha1.AnalysisCheck, members ...string) {
	e.T.Helper()
	rg := &v1alpha1.RolloutGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		Spec: v1alpha1.RolloutGroupSpec{
			MaxUnavailable: ptr.To(intstr.FromInt32(1)),
			OnFailure:      policy,
			Analysis:       &v1alpha1.RolloutAnalysis{Checks: checks},
		},
	}
	if prom != nil {
		rg.Spec.Analysis.Prometheus = &v1alpha1.PrometheusSource{Address: prom.srv.URL}
	}
	for _, m := range members {
		rg.Spec.StatefulSets = append(rg.Spec.StatefulSets, v1alpha1.RolloutMember{Name: m})
	}
	if err := e.Admin.Create(e.Ctx, rg); err != nil {
		e.T.Fatal(err)
	}
}

// analyzedMembers creates the members, each with replicas pods on r1 and
// ControllerRevisions r1 and r2, and a group of them analysed against prom;
// once the group is Complete it plays the StatefulSet controller and returns a
// monitor of the guarantees.
func (e *env) analyzedMembers(prom *promStub, policy v1alpha1.FailurePolicy, check v1alpha1.AnalysisCheck, replicas int, members ...string) *framework.Monitor {
	e.T.Helper()
	for _, m := range members {
		sts := e.versionedStatefulSet(m, int32(replicas), "r1", "r1", "r2")
		e.Pods(sts, replicas, revisionName(m, "r1"), controllertest.PodSpec{})
	}
	e.analysisGroup("ingester", prom, policy, []v1alpha1.AnalysisCheck{check}, members...)
	e.waitPhase("ingester", v1alpha1.PhaseComplete, 20*time.Second)
	e.PlayStatefulSetController(controllertest.KubeletTiming{ReadyAfter: 50 * time.Millisecond}, members...)
	e.playRevisions()
	return e.startMonitor(1, replicas, members...)
}

// rollTo changes every member's template to revision rev.
func (e *env) rollTo(rev string, members ...string) {
	e.T.Helper()
	for _, m := range members {
		e.setImage(m, rev)
	}
}

// errorsBelowOne is a check that the member's error count is below 1, queried
// every second at gate.
func errorsBelowOne(gate v1alpha1.AnalysisGate, successes, failures int32) v1alpha1.AnalysisCheck {
	return v1alpha1.AnalysisCheck{
		Name: "errors", Query: `errors{statefulset="{{ .Member }}",revision="{{ .Revision }}"}`, Gate: gate,
		Condition: v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: v1alpha1.OperatorLess, Threshold: "1"}},
		Interval:  &metav1.Duration{Duration: time.Second}, SuccessThreshold: successes, FailureThreshold: failures,
	}
}

// Revisions in these tests are named as the StatefulSet controller names them,
// after their ControllerRevision: <statefulset>-<hash>, with the hash a tag
// such as r1, and the template of revision <sts>-<tag> runs image
// app:<sts>-<tag>.
func revisionName(sts, tag string) string { return sts + "-" + tag }

// versionedStatefulSet creates an OnDelete StatefulSet on revision tag, with a
// ControllerRevision for each of tags holding its template, as the
// StatefulSet controller would have stored them.
func (e *env) versionedStatefulSet(name string, replicas int32, tag string, tags ...string) *appsv1.StatefulSet {
	e.T.Helper()
	sts := e.StatefulSet(name, replicas, revisionName(name, tag))
	for i, r := range tags {
		tmpl := sts.Spec.Template.DeepCopy()
		tmpl.Spec.Containers[0].Image = "app:" + revisionName(name, r)
		raw, err := json.Marshal(tmpl)
		if err != nil {
			e.T.Fatal(err)
		}
		var fields map[string]any
		if err := json.Unmarshal(raw, &fields); err != nil {
			e.T.Fatal(err)
		}
		fields["$patch"] = "replace"
		data, err := json.Marshal(map[string]any{"spec": map[string]any{"template": fields}})
		if err != nil {
			e.T.Fatal(err)
		}
		cr := &appsv1.ControllerRevision{
			ObjectMeta: metav1.ObjectMeta{Name: revisionName(name, r), Namespace: e.NS,
				Labels:          map[string]string{appsv1.ControllerRevisionHashLabelKey: r, "app": name},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}},
			Data:     runtime.RawExtension{Raw: data},
			Revision: int64(i + 1),
		}
		if err := e.Admin.Create(e.Ctx, cr); err != nil {
			e.T.Fatal(err)
		}
	}
	return sts
}

// playRevisions does the StatefulSet controller's revision bookkeeping: when a
// StatefulSet's spec changes, it observes the generation and makes the
// revision its template's image names (app:<revision>) the update revision.
func (e *env) playRevisions() {
	e.T.Helper()
	wc, err := client.NewWithWatch(controllertest.APIServer(e.T).Config(), client.Options{Scheme: controllertest.Scheme()})
	if err != nil {
		e.T.Fatal(err)
	}
	w, err := wc.Watch(e.Ctx, &appsv1.StatefulSetList{}, client.InNamespace(e.NS))
	if err != nil {
		e.T.Fatal(err)
	}
	done := make(chan struct{})
	e.T.Cleanup(func() { w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			sts, ok := ev.Object.(*appsv1.StatefulSet)
			if !ok || ev.Type == watch.Deleted || sts.Status.ObservedGeneration >= sts.Generation {
				continue
			}
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				cur := &appsv1.StatefulSet{}
				if err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(sts), cur); err != nil {
					return err
				}
				cur.Status.ObservedGeneration = cur.Generation
				cur.Status.UpdateRevision = strings.TrimPrefix(cur.Spec.Template.Spec.Containers[0].Image, "app:")
				if err := e.Recount(cur); err != nil {
					return err
				}
				return e.Admin.Status().Update(e.Ctx, cur)
			})
			if err != nil && e.Ctx.Err() == nil {
				e.T.Errorf("observe StatefulSet %s: %v", sts.Name, err)
			}
		}
	}()
}

// setImage changes the StatefulSet's template to the one of revision tag.
func (e *env) setImage(name, tag string) {
	e.T.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := e.GetSTS(name)
		sts.Spec.Template.Spec.Containers[0].Image = "app:" + revisionName(name, tag)
		return e.Admin.Update(e.Ctx, sts)
	}); err != nil {
		e.T.Fatal(err)
	}
}

func (e *env) annotate(group, key, value string) {
	e.T.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rg := e.GetGroup(group)
		if rg.Annotations == nil {
			rg.Annotations = map[string]string{}
		}
		rg.Annotations[key] = value
		return e.Admin.Update(e.Ctx, rg)
	}); err != nil {
		e.T.Fatal(err)
	}
}

// eventReasons returns the reasons of the Events about the group, oldest first.
func (e *env) eventReasons(group string) []string {
	e.T.Helper()
	var list eventsv1.EventList
	if err := e.Admin.List(e.Ctx, &list, client.InNamespace(e.NS)); err != nil {
		e.T.Fatal(err)
	}
	slices.SortFunc(list.Items, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Name == group && ev.Regarding.Kind == "RolloutGroup" {
			out = append(out, ev.Reason)
		}
	}
	return out
}

func (e *env) waitEvent(group, reason string, timeout time.Duration) {
	e.T.Helper()
	e.Eventually(timeout, "Event "+reason, func() (bool, error) { return slices.Contains(e.eventReasons(group), reason), nil })
}

// podRevisions counts the member's pods on each revision tag, terminating or not.
func (e *env) podRevisions(sts string) map[string]int {
	e.T.Helper()
	var list corev1.PodList
	if err := e.Admin.List(e.Ctx, &list, client.InNamespace(e.NS), client.MatchingLabels{"app": sts}); err != nil {
		e.T.Fatal(err)
	}
	out := map[string]int{}
	for _, p := range list.Items {
		out[strings.TrimPrefix(p.Labels[appsv1.ControllerRevisionHashLabelKey], sts+"-")]++
	}
	return out
}

// waitRolledToTag waits until the group is Complete with every member on its
// revision tag.
func (e *env) waitRolledToTag(group, tag string, timeout time.Duration) *v1alpha1.RolloutGroup {
	e.T.Helper()
	var rg *v1alpha1.RolloutGroup
	e.Eventually(timeout, "group "+group+" complete on "+tag, func() (bool, error) {
		rg = e.GetGroup(group)
		if rg.Status.Phase != v1alpha1.PhaseComplete {
			return false, nil
		}
		for _, m := range rg.Status.StatefulSets {
			if m.UpdateRevision != revisionName(m.Name, tag) || m.UpdatedReplicas != m.Replicas {
				return false, nil
			}
		}
		return true, nil
	})
	return rg
}

// An AfterBatch gate holds the next batch while its check does not pass, with
// one query per interval and none before the gate opens; once Prometheus
// answers well the group completes, one gate per batch.
func TestAnalysisGateHoldsDeletions(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	prom := newPromStub(t, constant("5"))
	mon := e.analyzedMembers(prom, v1alpha1.FailurePause, errorsBelowOne(v1alpha1.GateAfterBatch, 2, 100), 2, "zone-a", "zone-b")
	if n := len(prom.recorded()); n != 0 {
		t.Fatalf("%d queries before any gate opened, want none", n)
	}
	e.rollTo("r2", "zone-a", "zone-b")

	// The first batch goes, then the gate holds: three failing queries, a
	// second apart, and no second batch.
	e.Eventually(20*time.Second, "three queries at the first gate", func() (bool, error) { return len(prom.recorded()) >= 3, nil })
	rg := e.GetGroup("ingester")
	if got := e.podRevisions("zone-a"); got["r2"] != 1 || got["r1"] != 1 {
		t.Errorf("zone-a pods by revision %v while the gate holds, want one batch (1 pod) on r2", got)
	}
	if len(mon.Rolls()) != 1 {
		t.Errorf("%d pods rolled while the first gate holds, want 1", len(mon.Rolls()))
	}
	an := rg.Status.Analysis
	if rg.Status.Phase != v1alpha1.PhaseAnalyzing || an == nil || an.Gate == nil || an.Gate.Kind != v1alpha1.GateAfterBatch || an.Gate.Member != "zone-a" ||
		len(an.Checks) != 1 || an.Checks[0].ConsecutiveFailures < 1 || an.Checks[0].LastValue != "5" {
		t.Errorf("status while the gate holds: phase %s analysis %+v", rg.Status.Phase, an)
	}
	queries := prom.recorded()
	for i, q := range queries[:3] {
		if q.query != `errors{statefulset="zone-a",revision="zone-a-r2"}` {
			t.Errorf("query %d = %q, want the template expanded for zone-a", i, q.query)
		}
		if i > 0 && q.at.Sub(queries[i-1].at) < 900*time.Millisecond {
			t.Errorf("queries %d and %d %v apart, want one per interval (1s)", i-1, i, q.at.Sub(queries[i-1].at))
		}
	}

	prom.setValue(constant("0"))
	rg = e.waitRolledToTag("ingester", "r2", 60*time.Second)
	expectNoBreaches(t, mon)
	e.Eventually(10*time.Second, "a GatePassed Event per batch", func() (bool, error) {
		n := 0
		for _, r := range e.eventReasons("ingester") {
			if r == "GatePassed" {
				n++
			}
		}
		return n == 4, nil
	})
	if an := rg.Status.Analysis; an == nil || an.Gate != nil || an.Failure != nil {
		t.Errorf("analysis after the rollout: %+v", an)
	}
	for _, m := range rg.Status.StatefulSets {
		if m.StableRevision != revisionName(m.Name, "r2") {
			t.Errorf("member %s stableRevision %q after the rollout, want r2", m.Name, m.StableRevision)
		}
	}
	// Gates passed: no more queries.
	n := len(prom.recorded())
	e.reconcile("ingester")
	if got := len(prom.recorded()); got != n {
		t.Errorf("%d queries after the rollout completed, want none", got-n)
	}
}

// onFailure Pause: a failed AfterMember gate holds the group Failed before the
// next member; echelon.dev/retry evaluates the gate again and the rollout
// goes on.
func TestAnalysisPauseAndRetry(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	prom := newPromStub(t, constant("3"))
	mon := e.analyzedMembers(prom, v1alpha1.FailurePause, errorsBelowOne(v1alpha1.GateAfterMember, 1, 1), 2, "zone-a", "zone-b")
	e.rollTo("r2", "zone-a", "zone-b")

	rg := e.waitPhase("ingester", v1alpha1.PhaseFailed, 30*time.Second)
	f := rg.Status.Analysis.Failure
	if f == nil || f.Reason != v1alpha1.ReasonAnalysisFailed || f.Check != "errors" || !strings.Contains(rg.Status.Message, "check errors failed: value 3") ||
		!strings.Contains(rg.Status.Message, "AfterMember gate of zone-a") {
		t.Fatalf("failed status: message %q failure %+v", rg.Status.Message, f)
	}
	if c := findCondition(rg.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonAnalysisFailed {
		t.Errorf("Ready condition %+v, want reason AnalysisFailed", c)
	}
	e.waitEvent("ingester", "GateFailed", 10*time.Second)
	if got := e.podRevisions("zone-b"); got["r1"] != 2 {
		t.Errorf("zone-b pods %v after zone-a's gate failed, want both still on r1", got)
	}
	if got := e.podRevisions("zone-a"); got["r2"] != 2 {
		t.Errorf("zone-a pods %v, want both on r2 before its gate", got)
	}
	// Held: nothing more is queried or deleted.
	n, rolls := len(prom.recorded()), len(mon.Rolls())
	e.reconcile("ingester")
	if len(prom.recorded()) != n || len(mon.Rolls()) != rolls {
		t.Errorf("a failed group queried or rolled: %d queries, %d rolls more", len(prom.recorded())-n, len(mon.Rolls())-rolls)
	}

	prom.setValue(constant("0"))
	e.annotate("ingester", v1alpha1.AnnotationRetry, "1")
	rg = e.waitRolledToTag("ingester", "r2", 60*time.Second)
	expectNoBreaches(t, mon)
	if rg.Status.Analysis.HandledRetry != "1" || rg.Status.Analysis.Failure != nil {
		t.Errorf("analysis after the retry: %+v", rg.Status.Analysis)
	}
	e.waitEvent("ingester", "RetryRequested", 10*time.Second)
	e.waitEvent("ingester", "GatePassed", 10*time.Second)
	if order := mon.MemberOrder(); !slices.Equal(order, []string{"zone-a", "zone-b"}) {
		t.Errorf("members rolled in order %v, want zone-a then zone-b", order)
	}
}

// onFailure Rollback: zone-b's gate fails after zone-a passed. Every member
// that moved gets the template of its stable revision back from its
// ControllerRevision (zone-c too, though not rolled yet), and the moved pods
// roll back under the guarantees, zone-b first; the group ends Failed.
func TestAnalysisRollbackRestoresTemplates(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	prom := newPromStub(t, func(q string) string {
		if strings.Contains(q, "zone-b") {
			return "7"
		}
		return "0"
	})
	members := []string{"zone-a", "zone-b", "zone-c"}
	mon := e.analyzedMembers(prom, v1alpha1.FailureRollback, errorsBelowOne(v1alpha1.GateAfterMember, 1, 2), 3, members...)
	e.rollTo("r2", members...)

	var rg *v1alpha1.RolloutGroup
	e.Eventually(60*time.Second, "the rollback to complete", func() (bool, error) {
		rg = e.GetGroup("ingester")
		an := rg.Status.Analysis
		return rg.Status.Phase == v1alpha1.PhaseFailed && an != nil && an.Rollback != nil && an.Rollback.CompletionTime != nil, nil
	})
	expectNoBreaches(t, mon)
	an := rg.Status.Analysis
	if an.Failure == nil || an.Failure.Reason != v1alpha1.ReasonAnalysisFailed || !strings.Contains(an.Failure.Message, "AfterMember gate of zone-b") {
		t.Errorf("failure %+v, want zone-b's gate failed", an.Failure)
	}
	var wantMembers []v1alpha1.RollbackMember
	for _, m := range []string{"zone-c", "zone-b", "zone-a"} {
		wantMembers = append(wantMembers, v1alpha1.RollbackMember{Name: m, From: revisionName(m, "r2"), To: revisionName(m, "r1")})
	}
	if !slices.Equal(an.Rollback.Members, wantMembers) {
		t.Errorf("rollback members %+v, want %+v", an.Rollback.Members, wantMembers)
	}
	for _, m := range members {
		sts := e.GetSTS(m)
		if img := sts.Spec.Template.Spec.Containers[0].Image; img != "app:"+revisionName(m, "r1") || sts.Status.UpdateRevision != revisionName(m, "r1") {
			t.Errorf("StatefulSet %s: image %s, update revision %s after the rollback, want revision r1", m, img, sts.Status.UpdateRevision)
		}
		if got := e.podRevisions(m); got["r1"] != 3 {
			t.Errorf("StatefulSet %s pods by revision %v, want all 3 on r1", m, got)
		}
	}
	// Rolled forward: zone-a then zone-b; rolled back: zone-b, then zone-a.
	var back []string
	for _, d := range mon.Rolls() {
		if d.Labels[appsv1.ControllerRevisionHashLabelKey] == revisionName(d.Member, "r2") && (len(back) == 0 || back[len(back)-1] != d.Member) {
			back = append(back, d.Member)
		}
	}
	if !slices.Equal(back, []string{"zone-b", "zone-a"}) {
		t.Errorf("members rolled back in order %v, want zone-b then zone-a", back)
	}
	for _, reason := range []string{"GatePassed", "GateFailed", "RollbackStarted", "TemplateRestored", "RollbackComplete"} {
		e.waitEvent("ingester", reason, 10*time.Second)
	}
	if slices.Contains(e.eventReasons("ingester"), "RolloutComplete") {
		t.Error("a rolled-back rollout reported RolloutComplete")
	}

	// Failed holds until the templates change to a new revision: r3 on zone-c
	// starts a new rollout.
	e.setImage("zone-c", "r3")
	e.Eventually(30*time.Second, "the failure to be released by a new revision", func() (bool, error) {
		rg = e.GetGroup("ingester")
		return rg.Status.Analysis.Failure == nil && rg.Status.Phase != v1alpha1.PhaseFailed, nil
	})
	e.waitEvent("ingester", "FailureCleared", 10*time.Second)
}

// echelon.dev/abort rolls back at once, whatever onFailure says.
func TestAnalysisAbort(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	prom := newPromStub(t, constant("5"))
	// The gate never decides: failureThreshold 1000.
	mon := e.analyzedMembers(prom, v1alpha1.FailurePause, errorsBelowOne(v1alpha1.GateAfterBatch, 1, 1000), 2, "zone-a")
	e.rollTo("r2", "zone-a")
	e.waitPhase("ingester", v1alpha1.PhaseAnalyzing, 20*time.Second)

	e.annotate("ingester", v1alpha1.AnnotationAbort, "now")
	var rg *v1alpha1.RolloutGroup
	e.Eventually(30*time.Second, "the abort's rollback to complete", func() (bool, error) {
		rg = e.GetGroup("ingester")
		an := rg.Status.Analysis
		return rg.Status.Phase == v1alpha1.PhaseFailed && an.Rollback != nil && an.Rollback.CompletionTime != nil, nil
	})
	expectNoBreaches(t, mon)
	if f := rg.Status.Analysis.Failure; f == nil || f.Reason != v1alpha1.ReasonAborted || rg.Status.Analysis.HandledAbort != "now" {
		t.Errorf("analysis %+v, want Aborted, handledAbort now", rg.Status.Analysis)
	}
	if got := e.podRevisions("zone-a"); got["r1"] != 2 {
		t.Errorf("pods by revision %v after the abort, want both on r1", got)
	}
	e.waitEvent("ingester", "AbortRequested", 10*time.Second)

	// Retry clears the failure: the group is Complete on r1.
	e.annotate("ingester", v1alpha1.AnnotationRetry, "1")
	e.waitRolledToTag("ingester", "r1", 20*time.Second)
}

// A rollback whose stable ControllerRevision is gone cannot restore the
// template: the group holds Failed (RollbackFailed) naming it, deleting
// nothing, until the template is put back by hand; then the pods roll back.
func TestAnalysisRollbackWithoutStableRevision(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	prom := newPromStub(t, constant("5"))
	sts := e.versionedStatefulSet("zone-a", 2, "r1", "r2") // no ControllerRevision for r1
	e.Pods(sts, 2, revisionName("zone-a", "r1"), controllertest.PodSpec{})
	e.analysisGroup("ingester", prom, v1alpha1.FailureRollback, []v1alpha1.AnalysisCheck{errorsBelowOne(v1alpha1.GateAfterBatch, 1, 1)}, "zone-a")
	e.waitPhase("ingester", v1alpha1.PhaseComplete, 20*time.Second)
	e.PlayStatefulSetController(controllertest.KubeletTiming{ReadyAfter: 50 * time.Millisecond}, "zone-a")
	e.playRevisions()
	mon := e.startMonitor(1, 2, "zone-a")
	e.rollTo("r2", "zone-a")

	rg := e.waitPhase("ingester", v1alpha1.PhaseFailed, 30*time.Second)
	e.Eventually(10*time.Second, "RollbackFailed", func() (bool, error) {
		rg = e.GetGroup("ingester")
		c := findCondition(rg.Status.Conditions, v1alpha1.ConditionReady)
		return c != nil && c.Reason == v1alpha1.ReasonRollbackFailed, nil
	})
	if !strings.Contains(rg.Status.Message, "ControllerRevision zone-a-r1 (the stable revision) is gone") {
		t.Errorf("message %q, want it to name the missing revision", rg.Status.Message)
	}
	rolls := len(mon.Rolls())
	e.reconcile("ingester")
	if got := e.podRevisions("zone-a"); got["r2"] != 1 || len(mon.Rolls()) != rolls {
		t.Errorf("pods %v, %d rolls more, while the rollback cannot restore: want the one batch on r2 left alone", got, len(mon.Rolls())-rolls)
	}

	e.setImage("zone-a", "r1") // restored by hand
	e.Eventually(30*time.Second, "the rollback to complete", func() (bool, error) {
		rg = e.GetGroup("ingester")
		rb := rg.Status.Analysis.Rollback
		return rg.Status.Phase == v1alpha1.PhaseFailed && rb != nil && rb.CompletionTime != nil, nil
	})
	expectNoBreaches(t, mon)
	if got := e.podRevisions("zone-a"); got["r1"] != 2 {
		t.Errorf("pods %v after the template was restored by hand, want both on r1", got)
	}
}

// The operator reads no Secret unless granted: a group whose credentials it
// may not read fails its gate with an error that says what to grant, and once
// the namespace is granted (config/rbac/analysis_secrets_role.yaml) a retry
// reads the Secret and queries with its token.
func TestAnalysisSecretForbiddenSaysWhatToGrant(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true, liveReadsAsOperator: true})
	prom := newPromStub(t, constant("0"))
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "prometheus-auth"}, StringData: map[string]string{"token": "s3cret"}}
	if err := e.Admin.Create(e.Ctx, secret); err != nil {
		t.Fatal(err)
	}
	mon := e.analyzedMembers(prom, v1alpha1.FailurePause, errorsBelowOne(v1alpha1.GateAfterMember, 1, 1), 2, "zone-a")
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rg := e.GetGroup("ingester")
		rg.Spec.Analysis.Prometheus.AuthSecretRef = &v1alpha1.LocalSecretReference{Name: secret.Name}
		return e.Admin.Update(e.Ctx, rg)
	}); err != nil {
		t.Fatal(err)
	}
	e.rollTo("r2", "zone-a")

	rg := e.waitPhase("ingester", v1alpha1.PhaseFailed, 30*time.Second)
	want := fmt.Sprintf("spec.analysis.prometheus.authSecretRef: the operator may not read Secret prometheus-auth in namespace %s: "+
		"grant it get on Secrets there (Helm value rbac.analysisSecretNamespaces)", e.NS)
	an := rg.Status.Analysis
	if an.Failure == nil || an.Failure.Reason != v1alpha1.ReasonAnalysisError || !strings.Contains(rg.Status.Message, want) {
		t.Errorf("failed status: message %q failure %+v, want an AnalysisError saying %q", rg.Status.Message, an.Failure, want)
	}
	if len(an.Checks) != 1 || an.Checks[0].Phase != v1alpha1.CheckErrored || an.Checks[0].LastError != want || an.Checks[0].ConsecutiveFailures != 0 {
		t.Errorf("check status %+v, want errored (not failed) with lastError %q", an.Checks, want)
	}
	if n := len(prom.recorded()); n != 0 {
		t.Errorf("%d queries without the credentials, want none", n)
	}

	if err := controllertest.APIServer(t).GrantAnalysisSecrets(e.Ctx, e.liveReader.Name, e.NS); err != nil {
		t.Fatal(err)
	}
	e.annotate("ingester", v1alpha1.AnnotationRetry, "granted")
	e.waitRolledToTag("ingester", "r2", 60*time.Second)
	expectNoBreaches(t, mon)
	queries := prom.recorded()
	if len(queries) == 0 || queries[len(queries)-1].authorization != "Bearer s3cret" {
		t.Errorf("queries after the grant %+v, want the Secret's token as the bearer token", queries)
	}
}

func TestSecretReadError(t *testing.T) {
	secrets := schema.GroupResource{Resource: "secrets"}
	for _, tc := range []struct {
		name, field string
		err         error
		want        string
	}{{
		name:  "refused credentials say what to grant",
		field: "spec.analysis.prometheus.authSecretRef",
		err:   apierrors.NewForbidden(secrets, "prometheus-auth", errors.New(`User "echelon" cannot get resource "secrets"`)),
		want: "spec.analysis.prometheus.authSecretRef: the operator may not read Secret prometheus-auth in namespace mimir: " +
			"grant it get on Secrets there (Helm value rbac.analysisSecretNamespaces)",
	}, {
		name:  "refused CA says what to grant",
		field: "spec.analysis.prometheus.tls.caSecretRef",
		err:   apierrors.NewForbidden(secrets, "prometheus-auth", errors.New("no RBAC policy matched")),
		want: "spec.analysis.prometheus.tls.caSecretRef: the operator may not read Secret prometheus-auth in namespace mimir: " +
			"grant it get on Secrets there (Helm value rbac.analysisSecretNamespaces)",
	}, {
		name:  "a missing Secret is reported as it is",
		field: "spec.analysis.prometheus.authSecretRef",
		err:   apierrors.NewNotFound(secrets, "prometheus-auth"),
		want:  `spec.analysis.prometheus.authSecretRef: read Secret prometheus-auth: secrets "prometheus-auth" not found`,
	}, {
		name:  "other errors keep their cause",
		field: "spec.analysis.prometheus.authSecretRef",
		err:   errors.New("connection refused"),
		want:  "spec.analysis.prometheus.authSecretRef: read Secret prometheus-auth: connection refused",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			err := secretReadError(tc.field, "mimir", "prometheus-auth", tc.err)
			if err.Error() != tc.want {
				t.Errorf("error %q\nwant  %q", err, tc.want)
			}
			if !apierrors.IsForbidden(tc.err) && !errors.Is(err, tc.err) {
				t.Errorf("error %q does not wrap its cause %v", err, tc.err)
			}
		})
	}
}
