/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// maxLoggedBody bounds how much of a patch the request log keeps.
const maxLoggedBody = 64 << 10

// requestCounter is a reverse proxy between one operator process and the API
// server that counts the process's requests by Kubernetes verb and resource: it
// tells a LIST or a WATCH from a GET, which the operator's own
// rest_client_requests_total cannot, and its counts outlive a process the bench
// kills. Each operator process gets its own, so that the first deletion of a new
// leader can be told from the last of the old one. The proxy forwards with the
// operator user's own client certificate, so the API server authenticates and
// authorizes exactly as without it.
type requestCounter struct {
	listener net.Listener
	server   *http.Server
	log      *os.File // one line per request: time, kind, path, and the body of patches

	mu       sync.Mutex
	counts   map[string]int // "<VERB> <resource>[/<subresource>]", counted as requests arrive
	answered []request      // in the order their answers were sent
	changed  chan struct{}  // one pending wake-up at most, sent when a request is answered
}

// request is one answered request: when it arrived, when its answer was sent,
// and the HTTP status of the answer.
type request struct {
	key           string
	arrived, done time.Time
	code          int
}

func startRequestCounter(upstream *rest.Config, logPath string) (*requestCounter, error) {
	target, err := url.Parse(upstream.Host)
	if err != nil {
		return nil, fmt.Errorf("request counter: API server address %q: %w", upstream.Host, err)
	}
	transport, err := rest.TransportFor(upstream)
	if err != nil {
		return nil, fmt.Errorf("request counter: transport: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("request counter: %w", err)
	}
	logFile, err := os.Create(logPath)
	if err != nil {
		_ = l.Close()
		return nil, fmt.Errorf("request counter: %w", err)
	}
	rc := &requestCounter{listener: l, log: logFile, counts: map[string]int{}, changed: make(chan struct{}, 1)}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Host = target.Host
		},
		Transport: transport,
		// Watches stream: pass every event on at once.
		FlushInterval: -1,
		// A watch cut short when the operator stops is no news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	rc.server = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key, arrived := rc.record(r), time.Now()
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		proxy.ServeHTTP(sw, r)
		rc.answer(request{key: key, arrived: arrived, done: time.Now(), code: sw.code})
	})}
	go func() { _ = rc.server.Serve(l) }()
	return rc, nil
}

// record counts a request and logs it, with its body if it is a patch: what
// the operator changes, e.g. in each status patch, is what explains its count.
func (rc *requestCounter) record(r *http.Request) string {
	key := classify(r.Method, r.URL.Path, r.URL.Query().Get("watch"))
	var body []byte
	if r.Method == http.MethodPatch && r.Body != nil {
		body, _ = io.ReadAll(io.LimitReader(r.Body, maxLoggedBody))
		r.Body = io.NopCloser(io.MultiReader(bytes.NewReader(body), r.Body))
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.counts[key]++
	fmt.Fprintf(rc.log, "%s %s %s %s\n", time.Now().Format("15:04:05.000000"), key, r.URL.RequestURI(), body)
	return key
}

// answer keeps an answered request and wakes the waiters. A watch is answered
// when it ends.
func (rc *requestCounter) answer(req request) {
	rc.mu.Lock()
	rc.answered = append(rc.answered, req)
	if !strings.HasPrefix(req.key, "WATCH ") {
		// The answer's line says how long the API server took, so that a
		// slow step between a decision and its act can be read off the log.
		fmt.Fprintf(rc.log, "%s ANSWER %s %d after %s\n", req.done.Format("15:04:05.000000"), req.key, req.code,
			req.done.Sub(req.arrived).Round(100*time.Microsecond))
	}
	rc.mu.Unlock()
	select {
	case rc.changed <- struct{}{}:
	default:
	}
}

// waitUntil returns once cond holds for the requests answered so far, checking
// it now and after every answer.
func (rc *requestCounter) waitUntil(ctx context.Context, what string, cond func([]request) bool) error {
	for {
		rc.mu.Lock()
		ok := cond(rc.answered)
		rc.mu.Unlock()
		if ok {
			return nil
		}
		select {
		case <-rc.changed:
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, context.Cause(ctx))
		}
	}
}

// requests returns the requests answered so far.
func (rc *requestCounter) requests() []request {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return slices.Clone(rc.answered)
}

// snapshot returns the counts so far.
func (rc *requestCounter) snapshot() map[string]int {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return maps.Clone(rc.counts)
}

// writeKubeconfig writes a kubeconfig that sends the operator through the proxy.
// It holds no credentials: the proxy adds the operator user's.
func (rc *requestCounter) writeKubeconfig(path string) error {
	kubeconfig := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: bench
  cluster:
    server: http://%s
contexts:
- name: bench
  context:
    cluster: bench
    user: bench
users:
- name: bench
  user: {}
current-context: bench
`, rc.listener.Addr())
	return os.WriteFile(path, []byte(kubeconfig), 0o600)
}

// statusWriter remembers the status of an answer. Unwrap lets the proxy flush
// watch events through it.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (rc *requestCounter) close() {
	_ = rc.server.Close()
	_ = rc.log.Close()
}

// classify names a request as "<VERB> <resource>[/<subresource>]", with the
// verbs of Kubernetes' RBAC: get, list and watch are told apart by the name in
// the path and the watch parameter. Paths outside a resource (discovery,
// /version) are "<METHOD> <path>".
func classify(method, path, watch string) string {
	segs := strings.Split(strings.Trim(path, "/"), "/")
	var rest []string
	switch {
	case len(segs) >= 3 && segs[0] == "api":
		rest = segs[2:]
	case len(segs) >= 4 && segs[0] == "apis":
		rest = segs[3:]
	default:
		return method + " " + path
	}
	if len(rest) > 2 && rest[0] == "namespaces" {
		rest = rest[2:]
	}
	resource, name := rest[0], ""
	if len(rest) > 1 {
		name = rest[1]
	}
	if len(rest) > 2 {
		resource += "/" + rest[2]
	}
	verb := map[string]string{
		http.MethodPost:   "CREATE",
		http.MethodPut:    "UPDATE",
		http.MethodPatch:  "PATCH",
		http.MethodDelete: "DELETE",
	}[method]
	switch {
	case method == http.MethodGet && (watch == "true" || watch == "1"):
		verb = "WATCH"
	case method == http.MethodGet && name == "":
		verb = "LIST"
	case method == http.MethodGet:
		verb = "GET"
	case method == http.MethodDelete && name == "":
		verb = "DELETECOLLECTION"
	case verb == "":
		verb = method
	}
	return verb + " " + resource
}
