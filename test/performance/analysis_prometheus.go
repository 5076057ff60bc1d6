/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// queryPath is the Prometheus API path of instant queries, the only one a
// RolloutGroup's analysis uses.
const queryPath = "/api/v1/query"

// promQueryCounter is a reverse proxy in front of Prometheus that records
// every instant query the operator sends: when it arrived and was answered,
// the group it is about and the answer's status. The groups' analysis names
// the proxy as their Prometheus address; their queries carry the group's name
// (group="{{ .Group }}"), which is how a query is told to belong to a group.
type promQueryCounter struct {
	listener net.Listener
	server   *http.Server

	mu      sync.Mutex
	queries []promQuery // in the order they were answered
}

// promQuery is one instant query through the proxy.
type promQuery struct {
	group         string
	arrived, done time.Time
	code          int
}

func startPromQueryCounter(prometheusAddress string) (*promQueryCounter, error) {
	target, err := url.Parse(prometheusAddress)
	if err != nil {
		return nil, fmt.Errorf("prometheus proxy: address %q: %w", prometheusAddress, err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("prometheus proxy: %w", err)
	}
	pc := &promQueryCounter{listener: l}
	proxy := &httputil.ReverseProxy{
		Rewrite:  func(r *httputil.ProxyRequest) { r.SetURL(target) },
		ErrorLog: log.New(io.Discard, "", 0),
	}
	pc.server = &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != queryPath {
			proxy.ServeHTTP(w, r)
			return
		}
		arrived := time.Now()
		group := groupOfQuery(r)
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		proxy.ServeHTTP(sw, r)
		pc.mu.Lock()
		pc.queries = append(pc.queries, promQuery{group: group, arrived: arrived, done: time.Now(), code: sw.code})
		pc.mu.Unlock()
	})}
	go func() { _ = pc.server.Serve(l) }()
	return pc, nil
}

// Address is the proxy's base URL, the Prometheus address the groups name.
func (pc *promQueryCounter) Address() string { return "http://" + pc.listener.Addr().String() }

func (pc *promQueryCounter) close() { _ = pc.server.Close() }

// all returns the queries answered so far.
func (pc *promQueryCounter) all() []promQuery {
	pc.mu.Lock()
	defer pc.mu.Unlock()
	return slices.Clone(pc.queries)
}

// lastBefore returns the last query of group that arrived before t.
func (pc *promQueryCounter) lastBefore(group string, t time.Time) (promQuery, bool) {
	qs := pc.all()
	for i := len(qs) - 1; i >= 0; i-- {
		if qs[i].group == group && qs[i].arrived.Before(t) {
			return qs[i], true
		}
	}
	return promQuery{}, false
}

// between returns the queries that arrived in [from, to).
func (pc *promQueryCounter) between(from, to time.Time) []promQuery {
	var out []promQuery
	for _, q := range pc.all() {
		if !q.arrived.Before(from) && q.arrived.Before(to) {
			out = append(out, q)
		}
	}
	return out
}

var groupMatcher = regexp.MustCompile(`group="([^"]*)"`)

// groupOfQuery returns the group a query names in its group="..." matcher,
// "" if none. client_golang sends the query as a POST form and falls back to
// GET; the form is read here and put back for the proxy to forward.
func groupOfQuery(r *http.Request) string {
	values := r.URL.Query()
	if r.Body != nil && r.Method == http.MethodPost {
		body, err := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		if err == nil {
			if form, err := url.ParseQuery(string(body)); err == nil {
				for k, v := range form {
					values[k] = append(values[k], v...)
				}
			}
		}
	}
	if m := groupMatcher.FindStringSubmatch(values.Get("query")); m != nil {
		return m[1]
	}
	return ""
}

// prometheusQueryRequests reads, from Prometheus's own /metrics (not through
// its query API, which would count the read itself), how many instant query
// requests it has served: prometheus_http_requests_total{handler="/api/v1/query"}
// summed over status codes.
func prometheusQueryRequests(prometheusAddress string) (float64, error) {
	resp, err := http.Get(prometheusAddress + "/metrics")
	if err != nil {
		return 0, fmt.Errorf("read Prometheus's own metrics: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("read Prometheus's own metrics: HTTP %d", resp.StatusCode)
	}
	return sumQueryRequests(resp.Body)
}

// sumQueryRequests sums the prometheus_http_requests_total series of the
// instant query handler in a text exposition.
func sumQueryRequests(r io.Reader) (float64, error) {
	var total float64
	scanner := bufio.NewScanner(r)
	scanner.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for scanner.Scan() {
		line := scanner.Text()
		if !strings.HasPrefix(line, "prometheus_http_requests_total{") || !strings.Contains(line, `handler="`+queryPath+`"`) {
			continue
		}
		fields := strings.Fields(line[strings.LastIndex(line, "}")+1:])
		if len(fields) == 0 {
			return 0, fmt.Errorf("no value in %q", line)
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("value of %q: %w", line, err)
		}
		total += v
	}
	return total, scanner.Err()
}
