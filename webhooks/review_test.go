package webhooks

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/test/builders"
)

// TestBadBodies: what is not an AdmissionReview v1 with a request gets an
// HTTP error naming the problem, counted as an error, and reaches no decider.
func TestBadBodies(t *testing.T) {
	valid := stsUpdate("a", 3, 2).review()
	for _, tc := range []struct {
		name   string
		method string
		body   []byte
		status int
		says   string
	}{
		{"GET", http.MethodGet, valid, http.StatusMethodNotAllowed, "POSTed"},
		{"empty body", http.MethodPost, nil, http.StatusBadRequest, "not a JSON AdmissionReview"},
		{"garbage", http.MethodPost, []byte("\x00{{not json"), http.StatusBadRequest, "not a JSON AdmissionReview"},
		{"JSON null", http.MethodPost, []byte("null"), http.StatusBadRequest, `want admission.k8s.io/v1 AdmissionReview`},
		{"v1beta1", http.MethodPost, bytes.Replace(valid, []byte(`admission.k8s.io/v1"`), []byte(`admission.k8s.io/v1beta1"`), 1), http.StatusBadRequest, "admissionReviewVersions"},
		{"another kind", http.MethodPost, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"Pod"}`), http.StatusBadRequest, `kind "Pod"`},
		{"no request", http.MethodPost, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), http.StatusBadRequest, "no request"},
		{"no uid", http.MethodPost, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"UPDATE"}}`), http.StatusBadRequest, "no uid"},
		{"request is a string", http.MethodPost, []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":"x"}`), http.StatusBadRequest, "not a JSON AdmissionReview"},
		{"too large", http.MethodPost, bytes.Repeat([]byte(" "), maxReviewBytes+1), http.StatusRequestEntityTooLarge, "larger than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := &countingDecider{}
			h := handler("test-bad-bodies", d, nil)
			before := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues("test-bad-bodies", metrics.DecisionError, reasonUndecodable))
			r := httptest.NewRequest(tc.method, "/admission/x", bytes.NewReader(tc.body))
			w := httptest.NewRecorder()
			h.ServeHTTP(w, r)
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.says) {
				t.Errorf("answer %d %q, want %d saying %q", w.Code, w.Body.String(), tc.status, tc.says)
			}
			if d.calls != 0 {
				t.Errorf("the decider was called %d times", d.calls)
			}
			if got := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues("test-bad-bodies", metrics.DecisionError, reasonUndecodable)) - before; got != 1 {
				t.Errorf("undecodable requests counted %v times, want 1", got)
			}
		})
	}
}

type countingDecider struct {
	calls int
	v     verdict
}

func (d *countingDecider) decide(context.Context, *admissionv1.AdmissionRequest) verdict {
	d.calls++
	return d.v
}

type panickingDecider struct{}

func (panickingDecider) decide(context.Context, *admissionv1.AdmissionRequest) verdict {
	panic("a bug in a decider")
}

// TestPanicIsAnInternalError: a decider's panic is answered as an internal
// error of the request, counted with reason "panic"; the server goes on.
func TestPanicIsAnInternalError(t *testing.T) {
	h := handler("test-panic", panickingDecider{}, nil)
	before := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues("test-panic", metrics.DecisionError, reasonPanic))
	a := serve(t, h, stsUpdate("a", 3, 2).review(), "")
	if a.response.Allowed || a.response.Result.Code != http.StatusInternalServerError || a.response.UID != "req-1" {
		t.Errorf("answer %+v, want a refusal with code 500 for uid req-1", a.response)
	}
	if got := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues("test-panic", metrics.DecisionError, reasonPanic)) - before; got != 1 {
		t.Errorf("panics counted %v, want 1", got)
	}
}

// TestAnswerCarriesVerdict: the AdmissionReview answered carries the uid,
// the decision, the status code and message, and the warnings; the metrics
// count the decision with its reason; a denial records its Event unless the
// request is a dry run.
func TestAnswerCarriesVerdict(t *testing.T) {
	denial := deny("because", "no, because")
	denial.warnings = []string{"careful"}
	sts := builders.MakeStatefulSet(testNS, "a").Replicas(1).TypeMeta().Obj()
	denial.event = &denialEvent{regarding: sts, reason: "Denied", action: "Deny"}
	for _, tc := range []struct {
		name     string
		v        verdict
		dryRun   bool
		decision string
		events   int
	}{
		{"allowed", allow("fine", "w1"), false, metrics.DecisionAllowed, 0},
		{"denied", denial, false, metrics.DecisionDenied, 1},
		{"denied dry run", denial, true, metrics.DecisionDenied, 0},
		{"error", failed("broke", http.StatusInternalServerError, context.DeadlineExceeded), false, metrics.DecisionError, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			events := &eventRecorder{}
			h := handler("test-verdict-"+tc.name, &countingDecider{v: tc.v}, events)
			req := stsUpdate("a", 3, 2)
			if tc.dryRun {
				req.dryRun()
			}
			before := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues("test-verdict-"+tc.name, tc.decision, tc.v.reason))
			a := serve(t, h, req.review(), "")
			if a.response.Allowed != tc.v.allowed || a.response.UID != "req-1" || strings.Join(a.response.Warnings, "|") != strings.Join(tc.v.warnings, "|") {
				t.Errorf("response %+v, want allowed %v and warnings %q", a.response, tc.v.allowed, tc.v.warnings)
			}
			if !tc.v.allowed && (a.response.Result.Code != tc.v.code || a.response.Result.Message != tc.v.message) {
				t.Errorf("result %+v, want code %d message %q", a.response.Result, tc.v.code, tc.v.message)
			}
			if got := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues("test-verdict-"+tc.name, tc.decision, tc.v.reason)) - before; got != 1 {
				t.Errorf("%s/%s counted %v, want 1", tc.decision, tc.v.reason, got)
			}
			if got := len(events.list()); got != tc.events {
				t.Errorf("%d Events, want %d", got, tc.events)
			}
		})
	}
}

// TestRequestDeadline: the API server's timeout query parameter becomes the
// context's deadline; without one, the longest a webhook may take.
func TestRequestDeadline(t *testing.T) {
	for query, want := range map[string]time.Duration{"timeout=10s": 10 * time.Second, "timeout=bogus": maxRequestDuration, "": maxRequestDuration, "timeout=-1s": maxRequestDuration} {
		r := httptest.NewRequest(http.MethodPost, "/x?"+query, nil)
		start := time.Now()
		ctx, cancel := withRequestDeadline(r, start)
		deadline, ok := ctx.Deadline()
		cancel()
		if !ok || deadline.Sub(start) != want {
			t.Errorf("%q: deadline %v (set %v), want %v after the start", query, deadline.Sub(start), ok, want)
		}
	}
}

// A request in flight when the process begins to stop is still judged: the
// server's base context (the manager's) is cancelled at once, while the
// server finishes the requests it holds.
func TestRequestOutlivesTheStoppingServer(t *testing.T) {
	base, stop := context.WithCancel(context.Background())
	r := httptest.NewRequest(http.MethodPost, "/x?timeout=10s", nil).WithContext(base)
	ctx, cancel := withRequestDeadline(r, time.Now())
	defer cancel()
	stop()
	if err := ctx.Err(); err != nil {
		t.Fatalf("the request's context ended with the server's: %v", err)
	}
	if _, ok := ctx.Deadline(); !ok {
		t.Error("no deadline: the request would be unbounded")
	}
}
