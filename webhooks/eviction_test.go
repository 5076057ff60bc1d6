package webhooks

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/test/builders"
)

// fakeBudgets answers the eviction webhook's lookups from fixed budgets and
// verdicts, and records what it was asked to acquire.
type fakeBudgets struct {
	mu       sync.Mutex
	pods     []*corev1.Pod
	budgets  []Budget
	unusable []string
	// verdicts by budget name; a budget without one allows.
	verdicts map[string]disruption.Verdict
	// errs fail Acquire of a budget, by name; lookupErr fails Pod and Judging.
	errs      map[string]error
	lookupErr error
	acquired  []string
	judged    []string
}

func (f *fakeBudgets) Pod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	if f.lookupErr != nil {
		return nil, f.lookupErr
	}
	for _, p := range f.pods {
		if p.Namespace == ns && p.Name == name {
			return p.DeepCopy(), nil
		}
	}
	return nil, nil
}

func (f *fakeBudgets) Judging(context.Context, *corev1.Pod) ([]Budget, []string, error) {
	return f.budgets, f.unusable, f.lookupErr
}

// Judge answers as Acquire does, writing nothing; judged lists the calls.
func (f *fakeBudgets) Judge(_ context.Context, b Budget, pod *corev1.Pod) (disruption.Verdict, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.judged = append(f.judged, fmt.Sprintf("%s zone %s pod %s", b, b.Zone, pod.Name))
	// A judgement writes nothing, so it meets no Conflict.
	if err := f.errs[b.Name]; err != nil && !apierrors.IsConflict(err) {
		return disruption.Verdict{}, err
	}
	if v, ok := f.verdicts[b.Name]; ok {
		return v, nil
	}
	return disruption.Verdict{Allowed: true}, nil
}

func (f *fakeBudgets) Acquire(_ context.Context, b Budget, pod *corev1.Pod, dryRun bool) (disruption.Verdict, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acquired = append(f.acquired, fmt.Sprintf("%s zone %s pod %s dryRun %t", b, b.Zone, pod.Name, dryRun))
	if err := f.errs[b.Name]; err != nil {
		return disruption.Verdict{}, err
	}
	if v, ok := f.verdicts[b.Name]; ok {
		return v, nil
	}
	return disruption.Verdict{Allowed: true}, nil
}

// evictionOf is a CREATE of pods/eviction for the pod name, as the API
// server sends it for `kubectl drain`.
func evictionOf(name string) *reqBuilder {
	ev := &policyv1.Eviction{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: name},
	}
	return &reqBuilder{admissionv1.AdmissionRequest{
		UID:         "req-1",
		Kind:        metav1.GroupVersionKind{Group: "policy", Version: "v1", Kind: "Eviction"},
		Resource:    metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
		SubResource: evictionSubresource,
		Name:        name,
		Namespace:   testNS,
		Operation:   admissionv1.Create,
		UserInfo:    authenticationv1.UserInfo{Username: "alice"},
		Object:      raw(ev),
	}}
}

// bodyDryRun puts the dry run in the Eviction's deleteOptions, as `kubectl
// drain --dry-run=server` does.
func (b *reqBuilder) bodyDryRun() *reqBuilder {
	b.r.Object = raw(&policyv1.Eviction{
		TypeMeta:      metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta:    metav1.ObjectMeta{Namespace: testNS, Name: b.r.Name},
		DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
	})
	return b
}

const (
	zoneA = "ingester-zone-a"
	zoneB = "ingester-zone-b"
)

var (
	groupBudget = Budget{Kind: KindRolloutGroup, Namespace: testNS, Name: "ingester", UID: "uid-ingester", Zone: zoneA}
	zdbBudget   = Budget{Kind: KindZoneDisruptionBudget, Namespace: testNS, Name: "store", UID: "uid-store", Zone: zoneA}
	refusal     = disruption.Verdict{Code: disruption.CodeOtherZoneDisrupted, Message: "zone ingester-zone-b (1 not available) is disrupted"}
)

func podA0() *corev1.Pod { return builders.MakePod(testNS, zoneA, 0).Obj() }

// TestEvictionAnswers: what the eviction webhook answers, and what it asks
// the budgets, for each kind of request and budget.
func TestEvictionAnswers(t *testing.T) {
	for _, tc := range []struct {
		name    string
		req     *reqBuilder
		budgets *fakeBudgets
		// code is the answer's status code, 0 when allowed.
		code     int32
		reason   string
		says     string
		acquired []string
		warns    string
	}{{
		name:     "within the budget",
		req:      evictionOf(zoneA + "-0"),
		budgets:  &fakeBudgets{pods: []*corev1.Pod{podA0()}, budgets: []Budget{groupBudget}},
		reason:   reasonEvictionAllowed,
		acquired: []string{"RolloutGroup ingester zone ingester-zone-a pod ingester-zone-a-0 dryRun false"},
	}, {
		name:     "refused: 429 naming the budget, the zone and the pod",
		req:      evictionOf(zoneA + "-0"),
		budgets:  &fakeBudgets{pods: []*corev1.Pod{podA0()}, budgets: []Budget{groupBudget}, verdicts: map[string]disruption.Verdict{"ingester": refusal}},
		code:     http.StatusTooManyRequests,
		reason:   disruption.CodeOtherZoneDisrupted,
		says:     "RolloutGroup ingester: zone ingester-zone-b (1 not available) is disrupted; evict ingester-zone-a-0 later",
		acquired: nil, // refused on the cache: nothing asked to be recorded
	}, {
		name: "refused until a hold lapses: the time to ask again",
		req:  evictionOf(zoneA + "-0"),
		budgets: &fakeBudgets{pods: []*corev1.Pod{podA0()}, budgets: []Budget{zdbBudget}, verdicts: map[string]disruption.Verdict{"store": {
			Code: disruption.CodeHeldByOtherZone, Message: "zone store-b holds the disruption budget", RetryAfter: 11600 * time.Millisecond}}},
		code:     http.StatusTooManyRequests,
		reason:   disruption.CodeHeldByOtherZone,
		says:     "ZoneDisruptionBudget store: zone store-b holds the disruption budget; evict ingester-zone-a-0 in 12s or later",
		acquired: nil, // refused on the cache: nothing asked to be recorded
	}, {
		name:     "a dry run in the request decides without recording",
		req:      evictionOf(zoneA + "-0").dryRun(),
		budgets:  &fakeBudgets{pods: []*corev1.Pod{podA0()}, budgets: []Budget{groupBudget}},
		reason:   reasonEvictionDryRun,
		acquired: []string{"RolloutGroup ingester zone ingester-zone-a pod ingester-zone-a-0 dryRun true"},
	}, {
		name:     "a dry run in the Eviction's deleteOptions (kubectl drain --dry-run=server) too",
		req:      evictionOf(zoneA + "-0").bodyDryRun(),
		budgets:  &fakeBudgets{pods: []*corev1.Pod{podA0()}, budgets: []Budget{groupBudget}, verdicts: map[string]disruption.Verdict{"ingester": refusal}},
		code:     http.StatusTooManyRequests,
		reason:   disruption.CodeOtherZoneDisrupted,
		says:     "RolloutGroup ingester",
		acquired: nil, // refused on the cache: nothing asked to be recorded
	}, {
		name:     "every budget must allow: the second refuses",
		req:      evictionOf(zoneA + "-0"),
		budgets:  &fakeBudgets{pods: []*corev1.Pod{podA0()}, budgets: []Budget{groupBudget, zdbBudget}, verdicts: map[string]disruption.Verdict{"store": refusal}},
		code:     http.StatusTooManyRequests,
		reason:   disruption.CodeOtherZoneDisrupted,
		says:     "ZoneDisruptionBudget store:",
		acquired: nil, // refused on the cache: nothing asked to be recorded
	}, {
		name:    "a pod no budget covers",
		req:     evictionOf(zoneA + "-0"),
		budgets: &fakeBudgets{pods: []*corev1.Pod{podA0()}},
		reason:  reasonNotCovered,
	}, {
		name:    "a budget that cannot judge: allowed, saying why",
		req:     evictionOf(zoneA + "-0"),
		budgets: &fakeBudgets{pods: []*corev1.Pod{podA0()}, unusable: []string{"RolloutGroup ingester: spec.disruptionBudget.podNamePartitionRegex: bad"}},
		reason:  reasonInvalidBudget,
		warns:   "spec.disruptionBudget.podNamePartitionRegex",
	}, {
		name:     "a budget deleted since it was found judges nothing",
		req:      evictionOf(zoneA + "-0"),
		budgets:  &fakeBudgets{pods: []*corev1.Pod{podA0()}, budgets: []Budget{groupBudget}, errs: map[string]error{"ingester": fmt.Errorf("x: %w", errBudgetGone)}},
		reason:   reasonNotCovered,
		acquired: []string{"RolloutGroup ingester zone ingester-zone-a pod ingester-zone-a-0 dryRun false"},
	}, {
		name:    "a pod that does not exist: the API server answers 404",
		req:     evictionOf(zoneA + "-9"),
		budgets: &fakeBudgets{budgets: []Budget{groupBudget}},
		reason:  reasonPodNotFound,
	}, {
		name:    "a terminating pod: evicting it disrupts nothing more",
		req:     evictionOf(zoneA + "-0"),
		budgets: &fakeBudgets{pods: []*corev1.Pod{builders.MakePod(testNS, zoneA, 0).Terminating(time.Now()).Obj()}, budgets: []Budget{groupBudget}},
		reason:  reasonPodTerminating,
	}, {
		name:    "a pod that has finished",
		req:     evictionOf(zoneA + "-0"),
		budgets: &fakeBudgets{pods: []*corev1.Pod{builders.MakePod(testNS, zoneA, 0).Phase(corev1.PodFailed).Obj()}, budgets: []Budget{groupBudget}},
		reason:  reasonPodFinished,
	}, {
		name:     "the hold contended past budget.Acquire's attempts: 429, to ask again",
		req:      evictionOf(zoneA + "-0"),
		budgets:  &fakeBudgets{pods: []*corev1.Pod{podA0()}, budgets: []Budget{groupBudget}, errs: map[string]error{"ingester": fmt.Errorf("record: %w", apierrors.NewConflict(schema.GroupResource{Resource: "rolloutgroups"}, "ingester", errors.New("changed")))}},
		code:     http.StatusTooManyRequests,
		reason:   reasonHoldContended,
		says:     "RolloutGroup ingester: other disruptions were decided meanwhile",
		acquired: []string{"RolloutGroup ingester zone ingester-zone-a pod ingester-zone-a-0 dryRun false"},
	}, {
		name:     "a failed live read: refused, as failurePolicy Fail would",
		req:      evictionOf(zoneA + "-0"),
		budgets:  &fakeBudgets{pods: []*corev1.Pod{podA0()}, budgets: []Budget{groupBudget}, errs: map[string]error{"ingester": errors.New("connection refused")}},
		code:     http.StatusInternalServerError,
		reason:   reasonLookupFailed,
		says:     "connection refused",
		acquired: nil, // refused on the cache: nothing asked to be recorded
	}, {
		name:    "a failed cache read",
		req:     evictionOf(zoneA + "-0"),
		budgets: &fakeBudgets{lookupErr: errors.New("cache not started")},
		code:    http.StatusInternalServerError,
		reason:  reasonLookupFailed,
		says:    "cache not started",
	}, {
		name: "an object that is no Eviction",
		req: func() *reqBuilder {
			b := evictionOf(zoneA + "-0")
			pod := podA0()
			pod.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
			b.r.Object = raw(pod)
			return b
		}(),
		budgets: &fakeBudgets{},
		code:    http.StatusBadRequest,
		reason:  reasonMalformed,
		says:    "want policy/v1 or policy/v1beta1 Eviction",
	}, {
		name:    "a namespace the operator does not watch",
		req:     func() *reqBuilder { b := evictionOf(zoneA + "-0"); b.r.Namespace = "elsewhere"; return b }(),
		budgets: &fakeBudgets{},
		reason:  reasonNamespaceNotWatched,
		warns:   "does not watch namespace elsewhere",
	}, {
		name: "not an eviction: a pod DELETE sent by a wider rule",
		req: func() *reqBuilder {
			b := evictionOf(zoneA + "-0")
			b.r.SubResource = ""
			b.r.Operation = admissionv1.Delete
			return b
		}(),
		budgets: &fakeBudgets{},
		reason:  reasonUnhandled,
		warns:   "does not handle DELETE of pods",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := &Eviction{Cluster: &fakeCluster{unwatched: []string{"elsewhere"}}, Budgets: tc.budgets}
			decision := metrics.DecisionAllowed
			if tc.code == http.StatusInternalServerError || tc.code == http.StatusBadRequest || tc.reason == reasonHoldContended {
				decision = metrics.DecisionError
			} else if tc.code != 0 {
				decision = metrics.DecisionDenied
			}
			before := testutil.ToFloat64(metrics.Evictions.WithLabelValues(decision, tc.reason))
			a := serve(t, handler(metrics.WebhookEviction, h, nil), tc.req.review(), "")
			if a.response == nil {
				t.Fatalf("HTTP %d %s", a.httpStatus, a.body)
			}
			r := a.response
			if r.Allowed != (tc.code == 0) || (tc.code != 0 && r.Result.Code != tc.code) || !strings.Contains(a.message(), tc.says) {
				t.Errorf("answer allowed %t %+v, want code %d saying %q", r.Allowed, r.Result, tc.code, tc.says)
			}
			if tc.code == http.StatusTooManyRequests && r.Result.Reason != metav1.StatusReasonTooManyRequests {
				t.Errorf("reason %q, want TooManyRequests: kubectl drain retries only that", r.Result.Reason)
			}
			if tc.warns != "" && !strings.Contains(strings.Join(r.Warnings, "\n"), tc.warns) {
				t.Errorf("warnings %q, want one saying %q", r.Warnings, tc.warns)
			}
			if got := strings.Join(tc.budgets.acquired, "\n"); got != strings.Join(tc.acquired, "\n") {
				t.Errorf("acquired\n%s\nwant\n%s", got, strings.Join(tc.acquired, "\n"))
			}
			if tc.reason != reasonUnhandled {
				if got := testutil.ToFloat64(metrics.Evictions.WithLabelValues(decision, tc.reason)) - before; got != 1 {
					t.Errorf("echelon_evictions_total{decision=%q,reason=%q} rose by %v, want 1", decision, tc.reason, got)
				}
			}
		})
	}
}

// TestEvictionRefusalIsAPDBRefusal: the answer has the shape of the API
// server's PodDisruptionBudget refusal: code 429, reason TooManyRequests and
// a DisruptionBudget cause, no Retry-After (which would make client-go retry
// inside one call instead of the evicting client deciding), and the Event of
// a refusal is a Warning on the budget with the pod as related object.
func TestEvictionRefusalIsAPDBRefusal(t *testing.T) {
	budgets := &fakeBudgets{pods: []*corev1.Pod{podA0()}, budgets: []Budget{groupBudget}, verdicts: map[string]disruption.Verdict{"ingester": refusal}}
	events := &eventRecorder{}
	a := serve(t, handler(metrics.WebhookEviction, &Eviction{Cluster: &fakeCluster{}, Budgets: budgets}, events), evictionOf(zoneA+"-0").review(), "")
	res := a.response.Result
	if res.Code != http.StatusTooManyRequests || res.Reason != metav1.StatusReasonTooManyRequests || res.Details == nil ||
		len(res.Details.Causes) != 1 || res.Details.Causes[0].Type != policyv1.DisruptionBudgetCause || res.Details.RetryAfterSeconds != 0 {
		t.Errorf("result %+v details %+v, want 429 TooManyRequests with one DisruptionBudget cause and no retry-after", res, res.Details)
	}
	got := events.list()
	if len(got) != 1 || got[0].kind != "RolloutGroup" || got[0].name != "ingester" || got[0].uid != "uid-ingester" ||
		got[0].reason != EventReasonEvictionRefused || got[0].related != "Pod/"+zoneA+"-0" || got[0].note != res.Message {
		t.Errorf("events %+v, want one EvictionRefused on RolloutGroup ingester related to the pod, saying the refusal", got)
	}
}

// TestEvictionEvents: one Event per pod per minute, however often a drain
// asks; none for a dry run.
func TestEvictionEvents(t *testing.T) {
	pods := []*corev1.Pod{podA0(), builders.MakePod(testNS, zoneA, 1).Obj()}
	budgets := &fakeBudgets{pods: pods, budgets: []Budget{groupBudget}, verdicts: map[string]disruption.Verdict{"ingester": refusal}}
	events := &eventRecorder{}
	h := &reviewHandler{webhook: metrics.WebhookEviction, decider: &Eviction{Cluster: &fakeCluster{}, Budgets: budgets},
		events: events, limiter: newEventLimiter(evictionEventInterval), log: logr.Discard()}
	serve(t, h, evictionOf(zoneA+"-0").dryRun().review(), "")
	serve(t, h, evictionOf(zoneA+"-0").bodyDryRun().review(), "")
	if got := events.list(); len(got) != 0 {
		t.Fatalf("events %+v for dry runs", got)
	}
	for range 3 {
		serve(t, h, evictionOf(zoneA+"-0").review(), "")
		serve(t, h, evictionOf(zoneA+"-1").review(), "")
	}
	var related []string
	for _, ev := range events.list() {
		related = append(related, ev.related)
	}
	if want := []string{"Pod/" + zoneA + "-0", "Pod/" + zoneA + "-1"}; strings.Join(related, ",") != strings.Join(want, ",") {
		t.Errorf("events related to %v, want one per pod: %v", related, want)
	}
}

func TestEventLimiter(t *testing.T) {
	l := newEventLimiter(time.Minute)
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		key  string
		at   time.Duration
		want bool
	}{
		{"a", 0, true},
		{"a", 5 * time.Second, false},
		{"b", 5 * time.Second, true},
		{"a", 59 * time.Second, false},
		{"a", time.Minute, true},
		{"b", time.Minute, false},
		{"a", 90 * time.Second, false},
		{"", 90 * time.Second, true},
		{"", 90 * time.Second, true},
	} {
		if got := l.allow(step.key, t0.Add(step.at)); got != step.want {
			t.Errorf("allow(%q) at +%s = %t, want %t", step.key, step.at, got, step.want)
		}
	}
	if _, ok := l.last["a"]; !ok || len(l.last) != 1 {
		t.Errorf("limiter holds %v, want only the keys of the last minute (a)", l.last)
	}
	if !(*eventLimiter)(nil).allow("a", t0) {
		t.Error("a nil limiter refused an Event")
	}
}

// TestDecodeEviction: both versions of the Eviction API are read.
func TestDecodeEviction(t *testing.T) {
	for _, apiVersion := range []string{"policy/v1", "policy/v1beta1"} {
		ev, err := decodeEviction(raw(map[string]any{"apiVersion": apiVersion, "kind": "Eviction",
			"metadata": map[string]any{"name": "p"}, "deleteOptions": map[string]any{"dryRun": []string{"All"}}}))
		if err != nil || ev.Name != "p" || ev.DeleteOptions == nil || len(ev.DeleteOptions.DryRun) != 1 {
			t.Errorf("%s: %+v, %v", apiVersion, ev, err)
		}
	}
	if _, err := decodeEviction(raw(map[string]any{"apiVersion": "v1", "kind": "Pod"})); err == nil {
		t.Error("a Pod was read as an Eviction")
	}
}
