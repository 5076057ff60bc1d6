/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"fmt"
	"maps"
	"math"
	"testing"
)

// metricsText is a /metrics page as the operator serves it, abridged: the
// duration histogram of two webhooks and the eviction counters.
const metricsText = `# HELP echelon_webhook_request_duration_seconds Time Echelon's webhooks take to answer an admission request, pod calls included.
# TYPE echelon_webhook_request_duration_seconds histogram
echelon_webhook_request_duration_seconds_bucket{webhook="eviction",le="0.001"} 10
echelon_webhook_request_duration_seconds_bucket{webhook="eviction",le="0.002"} 60
echelon_webhook_request_duration_seconds_bucket{webhook="eviction",le="0.004"} 99
echelon_webhook_request_duration_seconds_bucket{webhook="eviction",le="0.008"} 100
echelon_webhook_request_duration_seconds_bucket{webhook="eviction",le="+Inf"} 100
echelon_webhook_request_duration_seconds_sum{webhook="eviction"} 0.2
echelon_webhook_request_duration_seconds_count{webhook="eviction"} 100
echelon_webhook_request_duration_seconds_bucket{webhook="no-downscale",le="0.001"} 50
echelon_webhook_request_duration_seconds_bucket{webhook="no-downscale",le="0.002"} 50
echelon_webhook_request_duration_seconds_bucket{webhook="no-downscale",le="0.004"} 50
echelon_webhook_request_duration_seconds_bucket{webhook="no-downscale",le="0.008"} 50
echelon_webhook_request_duration_seconds_bucket{webhook="no-downscale",le="+Inf"} 50
echelon_webhook_request_duration_seconds_sum{webhook="no-downscale"} 0.01
echelon_webhook_request_duration_seconds_count{webhook="no-downscale"} 50
# HELP echelon_evictions_total Evictions judged by Echelon's eviction webhook, by decision (allowed, denied, error) and reason.
# TYPE echelon_evictions_total counter
echelon_evictions_total{decision="allowed",reason="dry-run"} 95
echelon_evictions_total{decision="allowed",reason="allowed"} 5
echelon_evictions_total{decision="denied",reason="ZoneBudgetExhausted"} 25
`

func TestHistogramFromMetrics(t *testing.T) {
	m, err := parseMetrics(metricsText)
	if err != nil {
		t.Fatal(err)
	}
	h := m.histogram(webhookDurationMetric, map[string]string{"webhook": "eviction"})
	if h.Count != 100 || h.Sum != 0.2 || fmt.Sprint(h.Bounds) != "[0.001 0.002 0.004 0.008]" || fmt.Sprint(h.Counts) != "[10 60 99 100]" {
		t.Fatalf("histogram = %+v", h)
	}
	if none := m.histogram(webhookDurationMetric, map[string]string{"webhook": "validate"}); none.Count != 0 || !math.IsNaN(none.quantile(0.5)) {
		t.Errorf("histogram of a webhook with no request = %+v", none)
	}
	if _, err := parseMetrics("not a metric line {"); err == nil {
		t.Error("parseMetrics accepted garbage")
	}
}

func TestHistogramQuantile(t *testing.T) {
	h := histogram{Bounds: []float64{0.001, 0.002, 0.004, 0.008}, Counts: []uint64{10, 60, 99, 100}, Count: 100, Sum: 0.2}
	tests := []struct {
		q    float64
		want float64
	}{
		// As histogram_quantile: rank q*count, linear within its bucket.
		{0.05, 0.0005}, // 5 of the 10 in (0, 1ms]
		{0.50, 0.0018}, // 40 of the 50 in (1ms, 2ms]
		{0.99, 0.004},  // the 99th is the last of (2ms, 4ms]
		{0.995, 0.006}, // half of the one in (4ms, 8ms]
		{1, 0.008},
	}
	for _, tt := range tests {
		if got := h.quantile(tt.q); math.Abs(got-tt.want) > 1e-12 {
			t.Errorf("quantile(%v) = %v, want %v", tt.q, got, tt.want)
		}
	}
	beyond := histogram{Bounds: []float64{0.001}, Counts: []uint64{1}, Count: 3}
	if got := beyond.quantile(0.9); got != 0.001 {
		t.Errorf("a quantile beyond the highest bound = %v, want the highest bound", got)
	}
	if got, ok := beyond.maxAtMost(); ok {
		t.Errorf("maxAtMost beyond the highest bound = %v, true", got)
	}
	if got, ok := h.maxAtMost(); !ok || got != 0.008 {
		t.Errorf("maxAtMost = %v, %t; want 0.008", got, ok)
	}
	s := h.summary()
	if s.Count != 100 || s.P50Seconds != h.quantile(0.5) || s.P99Seconds != 0.004 || s.MaxAtMostSeconds != 0.008 || s.MeanSeconds != 0.002 {
		t.Errorf("summary = %+v", s)
	}
}

func TestHistogramDelta(t *testing.T) {
	before := histogram{Bounds: []float64{0.001, 0.002}, Counts: []uint64{5, 8}, Count: 9, Sum: 0.01}
	after := histogram{Bounds: []float64{0.001, 0.002}, Counts: []uint64{15, 28}, Count: 30, Sum: 0.05}
	d := after.minus(before)
	if fmt.Sprint(d.Counts) != "[10 20]" || d.Count != 21 || math.Abs(d.Sum-0.04) > 1e-12 {
		t.Errorf("after - before = %+v", d)
	}
	// Rounds add up from nothing, and the first reading may have none yet.
	total := histogram{}.plus(d).plus(d)
	if fmt.Sprint(total.Counts) != "[20 40]" || total.Count != 42 {
		t.Errorf("d + d = %+v", total)
	}
	if first := after.minus(histogram{}); first.Count != 30 || fmt.Sprint(first.Counts) != "[15 28]" {
		t.Errorf("after - nothing = %+v", first)
	}
}

func TestCounters(t *testing.T) {
	before, err := parseMetrics(metricsText)
	if err != nil {
		t.Fatal(err)
	}
	got := evictionDecisions(before)
	want := map[string]float64{"allowed/dry-run": 95, "allowed/allowed": 5, "denied/ZoneBudgetExhausted": 25}
	if !maps.Equal(got, want) {
		t.Errorf("evictionDecisions = %v, want %v", got, want)
	}
	if sum := before.counters(evictionsMetric, nil)[""]; sum != 125 {
		t.Errorf("sum of every series = %v, want 125", sum)
	}
	if denied := before.counters(evictionsMetric, map[string]string{"decision": "denied"}, "reason"); !maps.Equal(denied, map[string]float64{"ZoneBudgetExhausted": 25}) {
		t.Errorf("denied by reason = %v", denied)
	}
	after := map[string]float64{"allowed/dry-run": 195, "allowed/allowed": 5, "denied/ZoneBudgetExhausted": 25, "error/hold-contended": 2}
	if d := counterDelta(after, got); !maps.Equal(d, map[string]float64{"allowed/dry-run": 100, "error/hold-contended": 2}) {
		t.Errorf("counterDelta = %v", d)
	}
	if sum := addCounts(addCounts(nil, want), want); sum["allowed/allowed"] != 10 {
		t.Errorf("addCounts = %v", sum)
	}
}
