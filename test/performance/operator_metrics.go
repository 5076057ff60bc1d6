/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// The operator's own metrics, read from its /metrics before and after a
// stretch of load: what the webhook measured of itself (its request duration
// histogram) and what it decided (its counters), as an operator on call
// would see them.
const (
	webhookDurationMetric = "echelon_webhook_request_duration_seconds"
	webhookRequestsMetric = "echelon_webhook_requests_total"
	evictionsMetric       = "echelon_evictions_total"
	holdConflictsMetric   = "echelon_disruption_hold_conflicts_total"
)

// metricsSnapshot is the operator's /metrics at one moment, by family name.
type metricsSnapshot map[string]*dto.MetricFamily

// scrapeMetrics reads the operator's /metrics.
func scrapeMetrics(in *instance) (metricsSnapshot, error) {
	code, body, err := in.Get("/metrics")
	if err != nil {
		return nil, fmt.Errorf("GET /metrics of %s: %w", in.Name, err)
	}
	if code != 200 {
		return nil, fmt.Errorf("GET /metrics of %s: HTTP %d", in.Name, code)
	}
	return parseMetrics(body)
}

// parseMetrics parses the Prometheus text format.
func parseMetrics(text string) (metricsSnapshot, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parse /metrics: %w", err)
	}
	return families, nil
}

// hasLabels tells whether m carries every label of want with its value.
func hasLabels(m *dto.Metric, want map[string]string) bool {
	found := 0
	for _, l := range m.GetLabel() {
		if v, ok := want[l.GetName()]; ok {
			if v != l.GetValue() {
				return false
			}
			found++
		}
	}
	return found == len(want)
}

// histogram is a Prometheus histogram's cumulative buckets: Counts[i]
// observations at most Bounds[i] seconds, Count in all (the +Inf bucket).
type histogram struct {
	Bounds []float64 `json:"bounds"`
	Counts []uint64  `json:"cumulativeCounts"`
	Count  uint64    `json:"count"`
	Sum    float64   `json:"sum"`
}

// histogram returns the series of the histogram name with labels; the zero
// histogram when there is none yet (no observation was made).
func (s metricsSnapshot) histogram(name string, labels map[string]string) histogram {
	f := s[name]
	if f == nil {
		return histogram{}
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, labels) || m.GetHistogram() == nil {
			continue
		}
		h := histogram{Count: m.GetHistogram().GetSampleCount(), Sum: m.GetHistogram().GetSampleSum()}
		for _, b := range m.GetHistogram().GetBucket() {
			if math.IsInf(b.GetUpperBound(), +1) {
				continue
			}
			h.Bounds = append(h.Bounds, b.GetUpperBound())
			h.Counts = append(h.Counts, b.GetCumulativeCount())
		}
		return h
	}
	return histogram{}
}

// plus adds the observations of o, a histogram with the same buckets or
// none; minus takes those of an earlier reading away.
func (h histogram) plus(o histogram) histogram  { return h.combine(o, 1) }
func (h histogram) minus(o histogram) histogram { return h.combine(o, -1) }

func (h histogram) combine(o histogram, sign int) histogram {
	if len(h.Bounds) == 0 {
		h.Bounds = o.Bounds
		h.Counts = make([]uint64, len(o.Counts))
	}
	out := histogram{Bounds: h.Bounds, Counts: slices.Clone(h.Counts), Count: h.Count, Sum: h.Sum + float64(sign)*o.Sum}
	add := func(a, b uint64) uint64 {
		if sign < 0 {
			return a - b
		}
		return a + b
	}
	for i := range min(len(out.Counts), len(o.Counts)) {
		out.Counts[i] = add(out.Counts[i], o.Counts[i])
	}
	out.Count = add(out.Count, o.Count)
	return out
}

// quantile estimates the q-quantile as Prometheus's histogram_quantile does:
// linearly within the bucket that holds it, from 0 in the first bucket, and
// the highest finite bound when it falls in the +Inf bucket. NaN with no
// observation.
func (h histogram) quantile(q float64) float64 {
	if h.Count == 0 {
		return math.NaN()
	}
	rank := q * float64(h.Count)
	for i, upper := range h.Bounds {
		if float64(h.Counts[i]) < rank {
			continue
		}
		lower, below := 0.0, uint64(0)
		if i > 0 {
			lower, below = h.Bounds[i-1], h.Counts[i-1]
		}
		in := h.Counts[i] - below
		if in == 0 {
			return upper
		}
		return lower + (upper-lower)*(rank-float64(below))/float64(in)
	}
	return h.Bounds[len(h.Bounds)-1]
}

// maxAtMost is the upper bound of the highest bucket with an observation:
// the most a histogram can say of the slowest request. False when that is
// the +Inf bucket, or there is no observation.
func (h histogram) maxAtMost() (float64, bool) {
	if h.Count == 0 {
		return 0, false
	}
	for i, c := range h.Counts {
		if c == h.Count {
			return h.Bounds[i], true
		}
	}
	return 0, false
}

// histogramSummary condenses what the webhook's own histogram says of a
// stretch of load. Durations are in seconds.
type histogramSummary struct {
	Count      uint64  `json:"count"`
	P50Seconds float64 `json:"p50Seconds"`
	P99Seconds float64 `json:"p99Seconds"`
	// MaxAtMostSeconds is the upper bound of the slowest request's bucket;
	// 0 when it fell beyond the highest bound.
	MaxAtMostSeconds float64 `json:"maxAtMostSeconds"`
	MeanSeconds      float64 `json:"meanSeconds"`
}

func (h histogram) summary() histogramSummary {
	s := histogramSummary{Count: h.Count}
	if h.Count == 0 {
		return s
	}
	s.P50Seconds, s.P99Seconds = h.quantile(0.50), h.quantile(0.99)
	s.MaxAtMostSeconds, _ = h.maxAtMost()
	s.MeanSeconds = h.Sum / float64(h.Count)
	return s
}

// counters returns the series of the counter name that carry the labels of
// filter, keyed by the values of keys joined with "/" (e.g.
// "denied/ZoneBudgetExhausted" for keys decision and reason).
func (s metricsSnapshot) counters(name string, filter map[string]string, keys ...string) map[string]float64 {
	out := map[string]float64{}
	f := s[name]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		if !hasLabels(m, filter) || m.GetCounter() == nil {
			continue
		}
		values := make([]string, len(keys))
		for i, k := range keys {
			for _, l := range m.GetLabel() {
				if l.GetName() == k {
					values[i] = l.GetValue()
				}
			}
		}
		out[strings.Join(values, "/")] += m.GetCounter().GetValue()
	}
	return out
}

// counterDelta is what each counter series gained from before to after,
// leaving out those that did not change.
func counterDelta(after, before map[string]float64) map[string]float64 {
	out := maps.Clone(after)
	for k, v := range before {
		out[k] -= v
	}
	maps.DeleteFunc(out, func(_ string, v float64) bool { return v == 0 })
	return out
}

// addCounts adds b's counts to a, which may be nil.
func addCounts(a, b map[string]float64) map[string]float64 {
	if a == nil {
		a = map[string]float64{}
	}
	for k, v := range b {
		a[k] += v
	}
	return a
}
