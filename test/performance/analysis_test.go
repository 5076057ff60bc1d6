/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"flag"
	"io"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"
)

func TestGroupOfQuery(t *testing.T) {
	query := `max(bench_errors{group="pending-07",zone="pending-07-zone-a"})`
	// client_golang sends a POST form, and a GET when the server refuses POST.
	post := httptest.NewRequest("POST", queryPath, strings.NewReader(url.Values{"query": {query}, "time": {"1"}}.Encode()))
	post.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if got := groupOfQuery(post); got != "pending-07" {
		t.Errorf("POST: group %q, want pending-07", got)
	}
	if rest, err := io.ReadAll(post.Body); err != nil || !strings.Contains(string(rest), "query=") {
		t.Errorf("the form was not put back for the proxy to forward: %q, %v", rest, err)
	}
	get := httptest.NewRequest("GET", queryPath+"?"+url.Values{"query": {query}}.Encode(), nil)
	if got := groupOfQuery(get); got != "pending-07" {
		t.Errorf("GET: group %q, want pending-07", got)
	}
	if got := groupOfQuery(httptest.NewRequest("GET", queryPath+"?query=up", nil)); got != "" {
		t.Errorf("a query naming no group: %q, want none", got)
	}
}

func TestSumQueryRequests(t *testing.T) {
	exposition := `# HELP prometheus_http_requests_total Counter of HTTP requests.
# TYPE prometheus_http_requests_total counter
prometheus_http_requests_total{code="200",handler="/api/v1/query"} 58
prometheus_http_requests_total{code="400",handler="/api/v1/query"} 2
prometheus_http_requests_total{code="200",handler="/api/v1/query_range"} 7
prometheus_http_requests_total{code="200",handler="/-/ready"} 3
prometheus_http_request_duration_seconds_count{handler="/api/v1/query"} 60
`
	got, err := sumQueryRequests(strings.NewReader(exposition))
	if err != nil || got != 60 {
		t.Errorf("sumQueryRequests = %v, %v; want 60 (the instant query handler, every code, nothing else)", got, err)
	}
	if _, err := sumQueryRequests(strings.NewReader(`prometheus_http_requests_total{code="200",handler="/api/v1/query"} x` + "\n")); err == nil {
		t.Error("a value that is no number was accepted")
	}
}

func TestOwnedByOneOf(t *testing.T) {
	members := []string{"gate-1s-zone-a", "gate-1s-zone-b"}
	for pod, want := range map[string]bool{
		"gate-1s-zone-a-0":  true,
		"gate-1s-zone-b-12": true,
		"gate-1s-zone-c-0":  false,
		"gate-1s-zone-a-":   false,
		"gate-1s-zone-a-x":  false,
		// A member whose name extends another's is not the other's pod.
		"gate-1s-zone-a-b-0": false,
	} {
		if got := ownedByOneOf(pod, members); got != want {
			t.Errorf("ownedByOneOf(%q) = %t, want %t", pod, got, want)
		}
	}
}

func TestCountQueries(t *testing.T) {
	at := time.Unix(1000, 0)
	q := func(group string, code int, took time.Duration) promQuery {
		return promQuery{group: group, arrived: at, done: at.Add(took), code: code}
	}
	pending := []analysisGroup{{group: group{name: "pending-01"}}, {group: group{name: "pending-02"}}, {group: group{name: "pending-03"}}}
	s := countQueries([]promQuery{
		q("pending-01", 200, time.Millisecond), q("pending-01", 200, time.Millisecond), q("pending-02", 200, 3*time.Millisecond),
		q("idle-01", 200, time.Millisecond), q("pending-02", 503, 2*time.Millisecond),
	}, pending, 2)
	if s.Queries != 4 || s.OtherQueries != 1 || s.Errors != 1 {
		t.Errorf("queries %d, others %d, errors %d; want 4, 1 and 1", s.Queries, s.OtherQueries, s.Errors)
	}
	// pending-03 sent none: the fewest is 0, not left out.
	if s.PerGroupMin != 0 || s.PerGroupMax != 2 {
		t.Errorf("per group %d - %d, want 0 - 2", s.PerGroupMin, s.PerGroupMax)
	}
	if s.AnswerMedianSeconds != 0.001 || s.AnswerP99Seconds != 0.003 {
		t.Errorf("answer median %v p99 %v, want 1ms and 3ms", s.AnswerMedianSeconds, s.AnswerP99Seconds)
	}
}

func TestLatencyCell(t *testing.T) {
	s := latencySeries{IntervalSeconds: 2, Samples: []latencySample{{DeletionSeconds: 1}, {DeletionSeconds: 3}, {DeletionSeconds: 2}}}
	got := latencyCell(s, func(l latencySample) float64 { return l.DeletionSeconds })
	if want := "2s / 3s  (1.00 I / 1.50 I)"; got != want {
		t.Errorf("latencyCell = %q, want %q (median / max, then in intervals)", got, want)
	}
	if got := latencyCell(latencySeries{IntervalSeconds: 1}, func(latencySample) float64 { return 0 }); got != "-" {
		t.Errorf("latencyCell of no sample = %q, want -", got)
	}
}

func TestAnalysisOptions(t *testing.T) {
	var o analysisOptions
	bindAnalysisFlags(flag.NewFlagSet("bench", flag.ContinueOnError), &o)
	if err := o.validate(); err != nil {
		t.Errorf("the defaults are refused: %v", err)
	}
	bad := o
	bad.intervals = []time.Duration{500 * time.Millisecond}
	if bad.validate() == nil {
		t.Error("an interval under the API's 1s minimum was accepted")
	}
	bad = o
	bad.repeats = 0
	if bad.validate() == nil {
		t.Error("--analysis-repeats=0 was accepted")
	}
}

func TestAnalysisCase(t *testing.T) {
	got, err := cases(caseOptions{kinds: []string{kindAnalysis, kindFollow}})
	if err != nil {
		t.Fatal(err)
	}
	// In the order of allKinds: follow, then analysis, one operator each.
	want := []benchCase{{kind: kindFollow, operators: 1}, {kind: kindAnalysis, operators: 1}}
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("cases = %+v, want %+v", got, want)
	}
	if slug := got[1].slug(); slug != "analysis" {
		t.Errorf("slug of the analysis case = %q, want analysis (it names the run's files)", slug)
	}
}
