/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
)

// requestCounter is a reverse proxy between the operator and the API server
// that counts the operator's requests by Kubernetes verb and resource. The
// operator's own rest_client_requests_total says only GET, so it cannot tell a
// LIST or a WATCH from a GET; this can. The proxy forwards with the operator
// user's own client certificate, so the API server authenticates and authorizes
// exactly as without it.
// maxLoggedBody bounds how much of a patch the request log keeps.
const maxLoggedBody = 64 << 10

type requestCounter struct {
	listener net.Listener
	server   *http.Server
	log      *os.File // one line per request: time, kind, path, and the body of patches

	mu     sync.Mutex
	counts map[string]int // "<VERB> <resource>[/<subresource>]"
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
	rc := &requestCounter{listener: l, log: logFile, counts: map[string]int{}}
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
		rc.record(r)
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = rc.server.Serve(l) }()
	return rc, nil
}

// record counts a request and logs it, with its body if it is a patch: what
// the operator changes, e.g. in each status patch, is what explains its count.
func (rc *requestCounter) record(r *http.Request) {
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
