package hooks

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/httptls/httptlstest"
)

func TestSettingsOf(t *testing.T) {
	tests := []struct {
		name string
		in   v1alpha1.HookPolicy
		want Settings
	}{
		{name: "defaults: 5s, 2 retries, Fail", want: Settings{Timeout: 5 * time.Second, Retries: 2, FailurePolicy: v1alpha1.HookFail}},
		{name: "as set", in: v1alpha1.HookPolicy{Timeout: &metav1.Duration{Duration: time.Second}, Retries: ptr.To[int32](0), FailurePolicy: v1alpha1.HookIgnore},
			want: Settings{Timeout: time.Second, Retries: 0, FailurePolicy: v1alpha1.HookIgnore}},
		{name: "bounded past the CRD's limits", in: v1alpha1.HookPolicy{Timeout: &metav1.Duration{Duration: time.Hour}, Retries: ptr.To[int32](50)},
			want: Settings{Timeout: MaxTimeout, Retries: MaxRetries, FailurePolicy: v1alpha1.HookFail}},
		{name: "a zero timeout is the default", in: v1alpha1.HookPolicy{Timeout: &metav1.Duration{}}, want: Settings{Timeout: DefaultTimeout, Retries: 2, FailurePolicy: v1alpha1.HookFail}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := SettingsOf(tt.in); got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestRetrySchedule(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		retries int
		want    []time.Duration
		worst   time.Duration // at the default 5s timeout
	}{
		{retries: 0, want: []time.Duration{}, worst: 5 * time.Second},
		{retries: 1, want: []time.Duration{500 * ms}, worst: 10500 * ms},
		{retries: 2, want: []time.Duration{500 * ms, time.Second}, worst: 16500 * ms},
		{retries: 5, want: []time.Duration{500 * ms, time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second}, worst: 45500 * ms},
	}
	for _, tt := range tests {
		if got := RetrySchedule(tt.retries); !slices.Equal(got, tt.want) {
			t.Errorf("RetrySchedule(%d) = %v, want %v", tt.retries, got, tt.want)
		}
		if got := WorstCase(Settings{Timeout: DefaultTimeout, Retries: tt.retries}); got != tt.worst {
			t.Errorf("WorstCase with %d retries = %v, want %v", tt.retries, got, tt.worst)
		}
	}
}

// Within fits a hook into the eviction webhook's budget: retries go first,
// then the timeout shrinks; the result never exceeds the budget.
func TestWithin(t *testing.T) {
	tests := []struct {
		in, want Settings
	}{
		{in: Settings{Timeout: time.Second, Retries: 2}, want: Settings{Timeout: time.Second, Retries: 2}},         // 4.5s fits
		{in: Settings{Timeout: 2 * time.Second, Retries: 2}, want: Settings{Timeout: 2 * time.Second, Retries: 1}}, // 7s, then 4.5s
		{in: Settings{Timeout: 5 * time.Second, Retries: 2}, want: Settings{Timeout: 5 * time.Second, Retries: 0}},
		{in: Settings{Timeout: 30 * time.Second, Retries: 5}, want: Settings{Timeout: EvictionBudget, Retries: 0}},
	}
	for _, tt := range tests {
		got := Within(tt.in, EvictionBudget)
		if got != tt.want {
			t.Errorf("Within(%+v) = %+v, want %+v", tt.in, got, tt.want)
		}
		if WorstCase(got) > EvictionBudget {
			t.Errorf("Within(%+v) takes up to %v, over the budget", tt.in, WorstCase(got))
		}
	}
}

func TestApplies(t *testing.T) {
	all := &v1alpha1.PodRemovalHook{}
	mimir := &v1alpha1.PodRemovalHook{Reasons: []v1alpha1.RemovalReason{v1alpha1.RemovalEviction, v1alpha1.RemovalDownscale}}
	tests := []struct {
		hook   *v1alpha1.PodRemovalHook
		reason v1alpha1.RemovalReason
		want   bool
	}{
		{nil, v1alpha1.RemovalRollout, false},
		{all, v1alpha1.RemovalRollout, true},
		{all, v1alpha1.RemovalEviction, true},
		{mimir, v1alpha1.RemovalEviction, true},
		{mimir, v1alpha1.RemovalDownscale, true},
		{mimir, v1alpha1.RemovalRollout, false},
		{mimir, v1alpha1.RemovalRotation, false},
	}
	for _, tt := range tests {
		if got := Applies(tt.hook, tt.reason); got != tt.want {
			t.Errorf("Applies(%v, %s) = %v, want %v", tt.hook, tt.reason, got, tt.want)
		}
	}
}

func TestRemovalURL(t *testing.T) {
	ep := v1alpha1.PrepareEndpoint{Port: 8080, Path: "/ingester/prepare-shutdown"}
	got := RemovalURL(ep, "127.1.0.7", RemovalPayload{Reason: v1alpha1.RemovalEviction, Pod: "ingester-zone-a-0", Group: "ingester"})
	if want := "http://127.1.0.7:8080/ingester/prepare-shutdown?group=ingester&pod=ingester-zone-a-0&reason=eviction"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
	got = RemovalURL(v1alpha1.PrepareEndpoint{Scheme: "https", Port: 443, Path: "/leave"}, "p.svc", RemovalPayload{Reason: v1alpha1.RemovalRollout, Pod: "p"})
	if want := "https://p.svc:443/leave?pod=p&reason=rollout"; got != want {
		t.Errorf("got %s, want %s", got, want)
	}
}

func TestDecide(t *testing.T) {
	boom := errors.New("answered 500")
	keys := []string{"a-0", "a-1", "a-2"}
	errs := map[string]error{"a-1": boom}
	v := Decide(v1alpha1.HookFail, keys, errs)
	if !slices.Equal(v.Proceed, []string{"a-0", "a-2"}) || v.Held["a-1"] != "answered 500" || len(v.Ignored) != 0 {
		t.Errorf("Fail: %+v, want a-1 held, the others going on", v)
	}
	v = Decide(v1alpha1.HookIgnore, keys, errs)
	if !slices.Equal(v.Proceed, keys) || len(v.Held) != 0 || v.Ignored["a-1"] != "answered 500" {
		t.Errorf("Ignore: %+v, want every pod going on, a-1's failure recorded", v)
	}
	v = Decide(v1alpha1.HookFail, keys, nil)
	if !slices.Equal(v.Proceed, keys) || len(v.Held) != 0 {
		t.Errorf("no failure: %+v", v)
	}
}

// The caller posts the payload, retries failures and errors on the schedule
// and stops at the bound.
func TestCaller(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]int{}
	var bodies []RemovalPayload
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var p RemovalPayload
		_ = json.NewDecoder(r.Body).Decode(&p)
		mu.Lock()
		seen[p.Pod]++
		n := seen[p.Pod]
		bodies = append(bodies, p)
		mu.Unlock()
		switch {
		case p.Pod == "flaky" && n < 3, p.Pod == "broken":
			http.Error(w, "not yet", http.StatusServiceUnavailable)
		case p.Pod == "hanging":
			<-r.Context().Done()
		case r.Header.Get("Authorization") != "" && r.Header.Get("Authorization") != "Bearer t0ken":
			http.Error(w, "who", http.StatusUnauthorized)
		default:
			w.WriteHeader(http.StatusNoContent)
		}
	}))
	defer srv.Close()
	var waits []time.Duration
	c := &Caller{HTTP: srv.Client(), Sleep: func(_ context.Context, d time.Duration) error {
		mu.Lock()
		waits = append(waits, d)
		mu.Unlock()
		return nil
	}}
	call := func(pod string) Call {
		return Call{Key: pod, URL: srv.URL, BearerToken: "t0ken", Body: RemovalPayload{Reason: v1alpha1.RemovalRollout, Pod: pod}}
	}
	s := Settings{Timeout: 200 * time.Millisecond, Retries: 2}
	res := c.Do(context.Background(), BeforePodRemoval, "rollout", s, []Call{call("ok"), call("flaky"), call("broken"), call("hanging")})

	if r := res["ok"]; r.Err != nil || r.Attempts != 1 || r.Status != http.StatusNoContent {
		t.Errorf("ok: %+v", r)
	}
	if r := res["flaky"]; r.Err != nil || r.Attempts != 3 {
		t.Errorf("flaky (fails twice): %+v, want success at the third attempt", r)
	}
	if r := res["broken"]; r.Err == nil || r.Attempts != 3 || r.Status != http.StatusServiceUnavailable || !strings.Contains(r.Err.Error(), "answered 503") {
		t.Errorf("broken: %+v, want 3 attempts ending with 503", r)
	}
	if r := res["hanging"]; r.Err == nil || r.Attempts != 3 || r.Status != 0 || !strings.Contains(r.Err.Error(), "no answer within the timeout of 200ms") {
		t.Errorf("hanging: %+v, want 3 attempts ending with a timeout", r)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(waits) != 6 {
		t.Errorf("%d waits, want 2 per call that needed retries (6)", len(waits))
	}
	for _, b := range bodies {
		if b.Reason != v1alpha1.RemovalRollout {
			t.Errorf("body %+v without the reason", b)
		}
	}
}

// A call's tls block reaches its request: a server that requires a client
// certificate of a private CA answers only the call that carries it.
func TestCallerTLS(t *testing.T) {
	srv, err := httptlstest.NewMutualTLS(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	c := &Caller{HTTP: &http.Client{}}
	s := Settings{Timeout: 5 * time.Second}
	res := c.Do(context.Background(), BeforeMember, "member", s, []Call{
		{Key: "tls", URL: srv.URL, Body: MemberPayload{Hook: BeforeMember}, TLS: srv.Material},
		{Key: "plain", URL: srv.URL, Body: MemberPayload{Hook: BeforeMember}},
	})
	if r := res["tls"]; r.Err != nil || r.Status != http.StatusNoContent {
		t.Errorf("the call with the tls block: %+v", r)
	}
	if r := res["plain"]; r.Err == nil || !strings.Contains(r.Err.Error(), "certificate signed by unknown authority") {
		t.Errorf("the call without it: %+v, want a verification error", r)
	}
}
