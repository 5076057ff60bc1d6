/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestDisruptionCases(t *testing.T) {
	got, err := cases(caseOptions{kinds: []string{kindDrain, kindAnalysis, kindEviction, kindWebhook}, disruptionPodStart: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	want := []benchCase{
		{kind: kindWebhook, operators: 1, apiServerOnly: true},
		{kind: kindEviction, podStart: 2 * time.Second, operators: 1},
		{kind: kindDrain, podStart: 2 * time.Second, operators: 1, nodes: drainNodes},
		{kind: kindAnalysis, operators: 1},
	}
	if !slices.Equal(got, want) {
		t.Errorf("cases = %+v,\nwant %+v (in the order of allKinds)", got, want)
	}
	if got[1].slug() != "eviction" || got[2].slug() != "drain" {
		t.Errorf("slugs = %q, %q", got[1].slug(), got[2].slug())
	}
	if title := got[2].title(drainScenario); title != "kubectl drain of 9 nodes in 3 zones at once, 1 operator" {
		t.Errorf("title of the drain case = %q", title)
	}
}

func TestEvictionOptionsValidate(t *testing.T) {
	var o evictionOptions
	bindEvictionFlags(flag.NewFlagSet("bench", flag.ContinueOnError), &o)
	if err := o.validate(); err != nil {
		t.Fatalf("the defaults: %v", err)
	}
	for _, bad := range []func(*evictionOptions){
		func(o *evictionOptions) { o.rates = []float64{20, 0} },
		func(o *evictionOptions) { o.rates = nil },
		func(o *evictionOptions) { o.round = 0 },
		func(o *evictionOptions) { o.rounds = 0 },
		func(o *evictionOptions) { o.clients = 0 },
		func(o *evictionOptions) { o.guarded = 0 },
	} {
		o := o
		bad(&o)
		if err := o.validate(); err == nil {
			t.Errorf("%+v was accepted", o)
		}
	}
}

func TestJudgeEviction(t *testing.T) {
	pods := schema.GroupResource{Resource: "pods"}
	tests := []struct {
		err  error
		want string
	}{
		{nil, ""},
		{apierrors.NewTooManyRequests(`admission webhook "eviction.echelon.dev" denied the request: RolloutGroup bench: zone zone-a has 5 of 30 pods unavailable`, 0), failRefused},
		{apierrors.NewNotFound(pods, "zone-a-0"), failStatus},
		{fmt.Errorf("post: %w", context.DeadlineExceeded), failTransport},
	}
	for _, tt := range tests {
		if kind, _ := judgeEviction(tt.err); kind != tt.want {
			t.Errorf("judgeEviction(%v) = %q, want %q", tt.err, kind, tt.want)
		}
	}
}

func TestJudgeScale(t *testing.T) {
	denied := errors.New(`admission webhook "no-downscale.echelon.dev" denied the request: ScalingPolicy guard-03 does not allow scaling guarded-03 down`)
	tests := []struct {
		err  error
		grow bool
		want string
	}{
		{nil, true, ""},
		{denied, false, ""},
		{nil, false, failDecision},
		{errors.New("denied by someone else"), false, failDecision},
		{denied, true, failStatus},
		{context.DeadlineExceeded, false, failTransport},
	}
	for _, tt := range tests {
		if kind, _ := judgeScale(tt.err, tt.grow, policyName(3)); kind != tt.want {
			t.Errorf("judgeScale(%v, grow %t) = %q, want %q", tt.err, tt.grow, kind, tt.want)
		}
	}
}

func TestRatio(t *testing.T) {
	for _, tt := range []struct {
		a, b float64
		want string
	}{{0.003, 0.001, "3.00x"}, {0.001, 0.004, "0.25x"}, {0.001, 0, "-"}} {
		if got := ratio(tt.a, tt.b); got != tt.want {
			t.Errorf("ratio(%v, %v) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestPerRequestAndDecisions(t *testing.T) {
	counts := map[string]int{"LIST pods": 300, "GET statefulsets": 300, "GET rolloutgroups": 100}
	if got := perRequest(counts, 100); got != "get statefulsets 3.00, list pods 3.00, get rolloutgroups 1.00" {
		t.Errorf("perRequest = %q", got)
	}
	if got := perRequest(nil, 100); got != "none" {
		t.Errorf("perRequest of nothing = %q", got)
	}
	if got := decisionsCell(map[string]float64{"denied/ZoneBudgetExhausted": 25, "allowed/allowed": 5}); got != "denied/ZoneBudgetExhausted 25, allowed/allowed 5" {
		t.Errorf("decisionsCell = %q", got)
	}
}

func TestPrintEviction(t *testing.T) {
	side := func(p50, p99 float64) admissionSide {
		return admissionSide{
			Client:  latencySummary{Seconds: 30, OfferedPerSecond: 50, AchievedPerSecond: 50, Requests: 1500, P50Seconds: p50, P90Seconds: p50 * 2, P99Seconds: p99, MaxSeconds: p99 * 2},
			Webhook: histogramSummary{Count: 1500, P50Seconds: p50 / 2, P99Seconds: p99 / 2, MaxAtMostSeconds: 0.016, MeanSeconds: p50 / 2},
		}
	}
	r := &evictionResult{
		Zones: 3, PodsPerZone: 30, MaxUnavailable: 5, Guarded: 10, Clients: 16, RealPerSec: 50, Rounds: 3, RoundSeconds: 10,
		APIServerDenial: "denied naming guard-00",
		Loads: []evictionLoad{
			{OfferedPerSec: 50, Eviction: side(0.006, 0.030), NoDownscale: side(0.002, 0.010)},
			{OfferedPerSec: 100, Eviction: side(0.012, 0.060), NoDownscale: side(0.004, 0.020)},
		},
		Real: realEvictions{Zone: "zone-a", Requested: 30, Admitted: 5, Refused: 25, ZoneWholeSeconds: 17.2,
			Decisions: map[string]float64{"allowed/allowed": 5, "denied/ZoneBudgetExhausted": 25}, FirstRefusal: "zone zone-a has 5 of 30 pods unavailable"},
	}
	r.Loads[0].Eviction.Decisions = map[string]float64{"allowed/dry-run": 1500}
	r.Loads[0].Eviction.OperatorRequests = map[string]int{"LIST pods": 4500, "GET rolloutgroups": 1500}
	var b bytes.Buffer
	printEviction(&b, []*evictionResult{r})
	out := b.String()
	for _, want := range []string{
		"16 clients, open loop at\n50, 100 requests/s in turn, 3 rounds of 10s of each load at each rate",
		"eviction (dry run) at 50/s",
		"eviction (dry run) at 100/s",
		"Eviction webhook p50 / p99, its own histogram: 3.00ms / 15.00ms at 50/s; 6.00ms / 30.00ms at 100/s;",
		"6.00ms",
		"eviction / no-downscale",
		"allowed/dry-run 1500",
		"list pods 3.00, get rolloutgroups 1.00",
		"Real evictions of every pod of zone-a (30), once each in order at 50/s: 5 admitted, 25 refused with 429, 0 other errors",
		"17.2s",
		"denied/ZoneBudgetExhausted 25, allowed/allowed 5",
		"First refusal: zone zone-a has 5 of 30 pods unavailable",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("printEviction lacks %q:\n%s", want, out)
		}
	}
	// Client p50, p90, p99 and max; the webhook's p50, p99 and mean.
	if n := strings.Count(out, "3.00x"); n != 14 {
		t.Errorf("%d ratios of 3.00x, want 7 at each rate:\n%s", n, out)
	}
}

func TestKubeAPIFlags(t *testing.T) {
	if flags, qps := kubeAPIFlags(0); flags != nil || qps != 50 {
		t.Errorf("kubeAPIFlags(0) = %v, %v; want none and the operator's default, 50", flags, qps)
	}
	if flags, qps := kubeAPIFlags(400); fmt.Sprint(flags) != "[--kube-api-qps=400 --kube-api-burst=800]" || qps != 400 {
		t.Errorf("kubeAPIFlags(400) = %v, %v", flags, qps)
	}
}
