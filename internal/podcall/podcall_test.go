package podcall

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/internal/httptls/httptlstest"
)

func TestPrepareAndCancel(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /ok", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{"timestamp": 1700000000}`)) })
	mux.HandleFunc("POST /fail", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusInternalServerError) })
	mux.HandleFunc("POST /garbage", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`<html>`)) })
	mux.HandleFunc("POST /empty", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`{}`)) })
	mux.HandleFunc("POST /hang", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	mux.HandleFunc("DELETE /ok", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("DELETE /conflict", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusConflict) })
	mux.HandleFunc("DELETE /fail", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &Client{HTTP: srv.Client(), Concurrency: 2}
	target := func(path string) Target { return Target{Pod: path, URL: srv.URL + "/" + path} }

	got := c.Prepare(context.Background(), []Target{target("ok"), target("fail"), target("garbage"), target("empty"), target("hang")}, 200*time.Millisecond)
	if r := got["ok"]; r.Err != nil || r.PreparedAt.Unix() != 1700000000 {
		t.Errorf("ok: %+v", r)
	}
	for pod, want := range map[string]string{"fail": "answered 500", "garbage": "not JSON", "empty": "without a timestamp", "hang": "no answer within the timeout"} {
		if r := got[pod]; r.Err == nil || !strings.Contains(r.Err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", pod, r.Err, want)
		}
	}

	got = c.Cancel(context.Background(), []Target{target("ok"), target("conflict"), target("fail")}, time.Second)
	if got["ok"].Err != nil || got["conflict"].Err != nil {
		t.Errorf("DELETE answered 204 and 409 must both succeed: %+v %+v", got["ok"], got["conflict"])
	}
	if r := got["fail"]; r.Err == nil || !strings.Contains(r.Err.Error(), "502") {
		t.Errorf("fail: %+v", r)
	}
}

func TestNotify(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /nocontent", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("POST /text", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte(`prepared`)) })
	mux.HandleFunc("POST /fail", func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "boom", http.StatusServiceUnavailable) })
	mux.HandleFunc("POST /hang", func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	srv := httptest.NewServer(mux)
	defer srv.Close()
	c := &Client{HTTP: srv.Client()}
	target := func(path string) Target { return Target{Pod: path, URL: srv.URL + "/" + path} }

	got := c.Notify(context.Background(), []Target{target("nocontent"), target("text"), target("fail"), target("hang")}, 200*time.Millisecond)
	for pod, status := range map[string]int{"nocontent": 204, "text": 200} {
		if r := got[pod]; r.Err != nil || r.Status != status {
			t.Errorf("%s: %+v, want success with status %d", pod, r, status)
		}
	}
	if r := got["fail"]; r.Err == nil || r.Status != 503 || !strings.Contains(r.Err.Error(), `503: "boom"`) {
		t.Errorf("fail: %+v", r)
	}
	if r := got["hang"]; r.Err == nil || r.Status != 0 || !strings.Contains(r.Err.Error(), "no answer within the timeout") {
		t.Errorf("hang: %+v", r)
	}
}

// A target's tls block reaches its call: a server that requires a client
// certificate of a private CA answers only the call that carries it, and
// Wrap observes that call.
func TestTLS(t *testing.T) {
	srv, err := httptlstest.NewMutualTLS(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	var wrapped atomic.Int32
	c := &Client{HTTP: &http.Client{}, Wrap: func(next http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) { wrapped.Add(1); return next.RoundTrip(r) })
	}}
	got := c.Notify(context.Background(), []Target{{Pod: "tls", URL: srv.URL, TLS: srv.Material}, {Pod: "plain", URL: srv.URL}}, 5*time.Second)
	if r := got["tls"]; r.Err != nil || r.Status != http.StatusNoContent {
		t.Errorf("the call with the tls block: %+v", r)
	}
	if r := got["plain"]; r.Err == nil || !strings.Contains(r.Err.Error(), "certificate signed by unknown authority") {
		t.Errorf("the call without it: %+v, want a verification error", r)
	}
	if n := wrapped.Load(); n != 1 {
		t.Errorf("Wrap saw %d calls, want the one with the tls block", n)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
