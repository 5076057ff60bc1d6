/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// minWindowIntervals is the fewest check intervals a query count spans.
const minWindowIntervals = 6

// querySeries is the query count of the scenario at one check interval.
type querySeries struct {
	IntervalSeconds float64 `json:"intervalSeconds"`
	WindowSeconds   float64 `json:"windowSeconds"`
	Intervals       int     `json:"intervals"`
	Groups          int     `json:"groups"`
	ChecksPerGroup  int     `json:"checksPerGroup"`
	// Queries are those of the pending groups in the window, at the proxy.
	Queries int `json:"queries"`
	// PerGroupPerInterval is Queries / Groups / Intervals: ChecksPerGroup when
	// every check is queried once an interval.
	PerGroupPerInterval float64 `json:"perGroupPerInterval"`
	// PerGroupMin and PerGroupMax are the fewest and most queries one pending
	// group sent in the window.
	PerGroupMin int `json:"perGroupMin"`
	PerGroupMax int `json:"perGroupMax"`
	// PrometheusQueries is Prometheus's own count of instant query requests
	// over the window (prometheus_http_requests_total{handler="/api/v1/query"}),
	// whoever sent them.
	PrometheusQueries float64 `json:"prometheusQueries"`
	// OtherQueries are queries in the window by groups without a pending
	// gate (the latency groups, rolled back, and the idle ones).
	OtherQueries int `json:"otherQueries"`
	// Errors are queries answered with a status other than 2xx.
	Errors int `json:"errors"`
	// Answer times at the proxy, from a query's arrival to its answer.
	AnswerMedianSeconds float64 `json:"answerMedianSeconds"`
	AnswerP99Seconds    float64 `json:"answerP99Seconds"`
}

// measureQueries rolls zone-a of every pending group, so that each waits on
// its zone-a gate (two checks, passed, soaking), then counts their queries
// over a window at each interval, changing the checks' interval in the spec
// between two windows.
func (r *analysisRun) measureQueries(ctx context.Context, pending []analysisGroup) ([]querySeries, error) {
	began := time.Now()
	if err := forEach(ctx, len(pending), createWorkers, func(ctx context.Context, i int) error {
		return setImage(ctx, r.c, r.ns, pending[i].members[0], newImage)
	}); err != nil {
		return nil, err
	}
	soaking := func(ctx context.Context) (bool, error) {
		for _, g := range pending {
			if ok, err := gateSoaking(r.w, r.ns, g, g.members[0], newImage)(ctx); !ok || err != nil {
				return false, err
			}
		}
		return true, nil
	}
	if err := r.wait(ctx, "every pending group soaking at its zone-a gate", soaking); err != nil {
		return nil, err
	}
	r.say("%d groups rolled %s and wait on its gate, checks passed, soaking, after %s", len(pending), memberNames[0], since(began))

	var out []querySeries
	previous := time.Duration(0)
	for _, interval := range r.o.intervals {
		if previous != 0 && interval != previous {
			if err := r.setIntervals(ctx, pending, interval); err != nil {
				return nil, err
			}
		}
		// Let the schedule settle: the first query at a new interval comes
		// one interval after the last at the old one.
		if err := sleepCtx(ctx, previous+2*interval); err != nil {
			return nil, err
		}
		n := max(minWindowIntervals, int(math.Ceil(r.o.window.Seconds()/interval.Seconds())))
		window := time.Duration(n) * interval
		before, err := prometheusQueryRequests(r.prom.Address())
		if err != nil {
			return nil, err
		}
		from := time.Now()
		if err := sleepCtx(ctx, window); err != nil {
			return nil, err
		}
		to := time.Now()
		after, err := prometheusQueryRequests(r.prom.Address())
		if err != nil {
			return nil, err
		}
		if ok, err := soaking(ctx); !ok || err != nil {
			return nil, fmt.Errorf("a pending group left its gate during the count at %s (err %v)", interval, err)
		}
		s := countQueries(r.proxy.between(from, to), pending, 2)
		s.IntervalSeconds, s.WindowSeconds, s.Intervals = interval.Seconds(), to.Sub(from).Seconds(), n
		s.PerGroupPerInterval = float64(s.Queries) / float64(s.Groups) / float64(n)
		s.PrometheusQueries = after - before
		r.say("interval %s: %d queries of %d groups in %s: %.2f per group per interval (%d checks each); Prometheus counted %.0f",
			interval, s.Queries, s.Groups, seconds(s.WindowSeconds), s.PerGroupPerInterval, s.ChecksPerGroup, s.PrometheusQueries)
		out = append(out, s)
		previous = interval
	}
	return out, nil
}

// countQueries counts the queries of a window by group: those of the pending
// groups, the fewest and most of one, the others, the errors and the answer
// times.
func countQueries(qs []promQuery, pending []analysisGroup, checks int) querySeries {
	s := querySeries{Groups: len(pending), ChecksPerGroup: checks}
	perGroup := map[string]int{}
	for _, g := range pending {
		perGroup[g.name] = 0
	}
	var answers []time.Duration
	for _, q := range qs {
		answers = append(answers, q.done.Sub(q.arrived))
		if q.code < 200 || q.code > 299 {
			s.Errors++
		}
		if _, ok := perGroup[q.group]; ok {
			perGroup[q.group]++
			s.Queries++
		} else {
			s.OtherQueries++
		}
	}
	counts := make([]int, 0, len(perGroup))
	for _, n := range perGroup {
		counts = append(counts, n)
	}
	if len(counts) > 0 {
		s.PerGroupMin, s.PerGroupMax = slices.Min(counts), slices.Max(counts)
	}
	if len(answers) > 0 {
		s.AnswerMedianSeconds = median(answers).Seconds()
		s.AnswerP99Seconds = percentile(answers, 0.99).Seconds()
	}
	return s
}

// setIntervals changes the interval of every check of the groups.
func (r *analysisRun) setIntervals(ctx context.Context, groups []analysisGroup, interval time.Duration) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"analysis": analysisSpec(r.proxy.Address(), interval, true)}})
	if err != nil {
		return err
	}
	return forEach(ctx, len(groups), createWorkers, func(ctx context.Context, i int) error {
		rg := &v1alpha1.RolloutGroup{}
		rg.Namespace, rg.Name = r.ns, groups[i].name
		if err := r.c.Patch(ctx, rg, client.RawPatch(types.MergePatchType, patch)); err != nil {
			return fmt.Errorf("set the check interval of %s to %s: %w", rg.Name, interval, err)
		}
		return nil
	})
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-time.After(d):
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}
