package webhooks

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/hooks"
	"github.com/echelon-operator/echelon/internal/httptls/httptlstest"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podcall"
)

// fixedHook is the hook of every pod, or none.
type fixedHook struct{ hook *RemovalHook }

func (f fixedHook) RemovalHook(context.Context, *corev1.Pod) (*RemovalHook, error) {
	return f.hook, nil
}

// TestEvictionCallsRemovalHook: an eviction the budget allows calls the
// pod's hook with reason eviction first; a failure under Fail refuses it
// with 429 (the evicting client asks again) and an Event on the group, under
// Ignore allows it with a warning; a dry run or a refused eviction calls no
// hook.
func TestEvictionCallsRemovalHook(t *testing.T) {
	var mu sync.Mutex
	var queries []url.Values
	failing := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		queries = append(queries, r.URL.Query())
		if failing {
			http.Error(w, "still in the ring", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	host, p := hostPort(t, srv.Listener)
	pod := podA0()
	pod.Status.PodIP = host
	group := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "ingester"}}
	hook := func(policy v1alpha1.HookFailurePolicy) *RemovalHook {
		return &RemovalHook{Group: group, Member: zoneA, Hook: &v1alpha1.PodRemovalHook{
			Endpoint:   v1alpha1.PrepareEndpoint{Port: p, Path: "/ingester/prepare-shutdown"},
			HookPolicy: v1alpha1.HookPolicy{Retries: ptr.To[int32](1), Timeout: &metav1.Duration{Duration: time.Second}, FailurePolicy: policy},
		}}
	}
	for _, tc := range []struct {
		name      string
		req       *reqBuilder
		hook      *RemovalHook
		refuse    bool // the budget refuses
		failing   bool
		wantCode  int32
		wantCalls int
		says      string
		warns     string
	}{
		{name: "allowed: the hook is told first", req: evictionOf(zoneA + "-0"), hook: hook(v1alpha1.HookFail), wantCalls: 1},
		{name: "no hook", req: evictionOf(zoneA + "-0")},
		{name: "a failing hook under Fail refuses", req: evictionOf(zoneA + "-0"), hook: hook(v1alpha1.HookFail), failing: true,
			wantCode: http.StatusTooManyRequests, wantCalls: 2, says: "beforePodRemoval of pod ingester-zone-a-0 failed (failurePolicy Fail)"},
		{name: "a failing hook under Ignore allows with a warning", req: evictionOf(zoneA + "-0"), hook: hook(v1alpha1.HookIgnore), failing: true,
			wantCalls: 2, warns: "failed, ignored (failurePolicy Ignore)"},
		{name: "a dry run calls no hook", req: evictionOf(zoneA + "-0").bodyDryRun(), hook: hook(v1alpha1.HookFail)},
		{name: "a refused eviction calls no hook", req: evictionOf(zoneA + "-0"), hook: hook(v1alpha1.HookFail), refuse: true, wantCode: http.StatusTooManyRequests},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			queries, failing = nil, tc.failing
			mu.Unlock()
			budgets := &fakeBudgets{pods: []*corev1.Pod{pod}, budgets: []Budget{groupBudget}}
			if tc.refuse {
				budgets.verdicts = map[string]disruption.Verdict{groupBudget.Name: refusal}
			}
			h := &Eviction{Cluster: &fakeCluster{}, Budgets: budgets, Hooks: fixedHook{tc.hook},
				Caller: &hooks.Caller{HTTP: srv.Client(), Sleep: func(context.Context, time.Duration) error { return nil }}, Addressing: podcall.Addressing{PodAddressIP: true}}
			a := serve(t, handler(metrics.WebhookEviction, h, nil), tc.req.review(), "")
			r := a.response
			if r == nil {
				t.Fatalf("HTTP %d %s", a.httpStatus, a.body)
			}
			if r.Allowed != (tc.wantCode == 0) || (tc.wantCode != 0 && r.Result.Code != tc.wantCode) || !strings.Contains(a.message(), tc.says) {
				t.Errorf("answer allowed %t %+v, want code %d saying %q", r.Allowed, r.Result, tc.wantCode, tc.says)
			}
			if tc.warns != "" && !strings.Contains(strings.Join(r.Warnings, "\n"), tc.warns) {
				t.Errorf("warnings %q, want one saying %q", r.Warnings, tc.warns)
			}
			// A refusal, by the budget or by the hook, records nothing:
			// the budget is asked to record only after the hook answered
			// (issue 29, finding 4: a failing hook left the zone held).
			if recorded := slices.ContainsFunc(budgets.acquired, func(a string) bool { return strings.HasSuffix(a, "dryRun false") }); recorded != (tc.wantCode == 0 && !strings.Contains(tc.name, "dry run")) {
				t.Errorf("the budget asked to record: %t (%q), want %t", recorded, budgets.acquired, !recorded)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(queries) != tc.wantCalls {
				t.Fatalf("%d hook calls, want %d", len(queries), tc.wantCalls)
			}
			for _, q := range queries {
				if q.Get("reason") != "eviction" || q.Get("pod") != zoneA+"-0" || q.Get("group") != "ingester" {
					t.Errorf("hook called with %v, want reason eviction, the pod and the group", q)
				}
			}
		})
	}
}

// TestEvictionHookTLS: the hook's endpoint tls block is read live: while its
// CA Secret is missing the hook fails naming the field, and the eviction is
// refused (failurePolicy Fail) without a call; once the Secrets exist the
// pod is called over mutual TLS and the eviction allowed.
func TestEvictionHookTLS(t *testing.T) {
	var calls atomic.Int32
	srv, err := httptlstest.NewMutualTLS(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		calls.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	host, p := hostPort(t, srv.Listener)
	pod := podA0()
	pod.Status.PodIP = host
	hook := &RemovalHook{Group: &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: testNS, Name: "ingester"}}, Member: zoneA, Hook: &v1alpha1.PodRemovalHook{
		Endpoint: v1alpha1.PrepareEndpoint{Scheme: "https", Port: p, Path: "/ingester/prepare-shutdown", TLS: &v1alpha1.TLSConfig{
			CASecretRef: &v1alpha1.SecretKeyReference{Name: "pods-ca"}, ClientCertSecretRef: &v1alpha1.LocalSecretReference{Name: "echelon-client"}}},
		HookPolicy: v1alpha1.HookPolicy{Retries: ptr.To[int32](0), Timeout: &metav1.Duration{Duration: time.Second}},
	}}
	secrets := fake.NewClientBuilder().Build()
	evict := func() answer {
		h := &Eviction{Cluster: &fakeCluster{}, Budgets: &fakeBudgets{pods: []*corev1.Pod{pod}, budgets: []Budget{groupBudget}}, Hooks: fixedHook{hook},
			Caller: &hooks.Caller{HTTP: &http.Client{}}, Addressing: podcall.Addressing{PodAddressIP: true}, Secrets: secrets}
		a := serve(t, handler(metrics.WebhookEviction, h, nil), evictionOf(zoneA+"-0").review(), "")
		if a.response == nil {
			t.Fatalf("HTTP %d %s", a.httpStatus, a.body)
		}
		return a
	}

	a := evict()
	says := "spec.hooks.beforePodRemoval.endpoint.tls.caSecretRef: Secret pods-ca not found in namespace " + testNS
	if a.response.Allowed || a.response.Result.Code != http.StatusTooManyRequests || !strings.Contains(a.message(), says) || calls.Load() != 0 {
		t.Errorf("answer allowed %t %+v after %d calls, want 429 saying %q and no call", a.response.Allowed, a.response.Result, calls.Load(), says)
	}

	for _, s := range []*corev1.Secret{
		httptlstest.CASecret(testNS, "pods-ca", srv.Material.CAPEM),
		httptlstest.TLSSecret(testNS, "echelon-client", srv.Material.CertPEM, srv.Material.KeyPEM),
	} {
		if err := secrets.Create(context.Background(), s); err != nil {
			t.Fatal(err)
		}
	}
	if a := evict(); !a.response.Allowed || calls.Load() != 1 {
		t.Errorf("answer allowed %t %+v after %d calls, want allowed after one call over mutual TLS", a.response.Allowed, a.response.Result, calls.Load())
	}
}

// hostPort is where l listens: its IP (a pod's, in these tests) and port.
func hostPort(t *testing.T, l net.Listener) (string, int32) {
	t.Helper()
	host, port, err := net.SplitHostPort(l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	return host, int32(p)
}
