/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strings"
	"text/tabwriter"
)

// printEviction prints the eviction scenario's figures.
func printEviction(out io.Writer, results []*evictionResult) {
	for _, r := range results {
		fmt.Fprintf(out, "\nEviction admission beside no-downscale admission, through the API server: one operator serves both webhooks, registered\n"+
			"with the API server; its --kube-api-qps is %g (the webhooks' own client has its own limit). %d clients, open loop at\n"+
			"%s requests/s in turn, %d rounds of %s of each load at each rate, in turn first. Group %s: "+
			"%d zones x %d pods, disruptionBudget maxUnavailable %d; %d StatefulSets guarded by a ScalingPolicy (downscale.allowed=false).\n"+
			"  eviction: dry-run evictions of every pod of the group in turn (as kubectl drain --dry-run=server): judged in full, on the\n"+
			"    cache and then confirmed with the live reads, but no intent written, so the pods stay;\n"+
			"  no-downscale: dry-run scales of the guarded StatefulSets (as kubectl scale --dry-run=server), %d in %d down (denied naming\n"+
			"    the policy), 1 in %d up (allowed), answered from the cache.\n"+
			"client: from a request's queueing to the API server's answer. webhook: the operator's own %s,\n"+
			"quantiles interpolated within its buckets as histogram_quantile does; max<= is the bound of the slowest request's bucket.\n"+
			"API server, dry-run scale down of %s: %s\n\n",
			r.OperatorKubeAPIQPS, r.Clients, ratesCell(r.Loads), r.Rounds, seconds(r.RoundSeconds), groupName, r.Zones, r.PodsPerZone, r.MaxUnavailable, r.Guarded,
			increaseEvery-1, increaseEvery, increaseEvery, webhookDurationMetric, guardedName(0), r.APIServerDenial)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "\trequests\terrors\tachieved/s\tclient p50\tp90\tp99\tmax\twebhook p50\tp99\tmax<=\tmean\toperator reads/request\toperator CPU\t\n")
		for _, l := range r.Loads {
			sideRow(tw, fmt.Sprintf("eviction (dry run) at %.0f/s", l.OfferedPerSec), l.Eviction)
			sideRow(tw, fmt.Sprintf("no-downscale (dry run) at %.0f/s", l.OfferedPerSec), l.NoDownscale)
			e, n := l.Eviction, l.NoDownscale
			fmt.Fprintf(tw, "eviction / no-downscale\t\t\t\t%s\t%s\t%s\t%s\t%s\t%s\t\t%s\t\t\t\n",
				ratio(e.Client.P50Seconds, n.Client.P50Seconds), ratio(e.Client.P90Seconds, n.Client.P90Seconds),
				ratio(e.Client.P99Seconds, n.Client.P99Seconds), ratio(e.Client.MaxSeconds, n.Client.MaxSeconds),
				ratio(e.Webhook.P50Seconds, n.Webhook.P50Seconds), ratio(e.Webhook.P99Seconds, n.Webhook.P99Seconds),
				ratio(e.Webhook.MeanSeconds, n.Webhook.MeanSeconds))
		}
		_ = tw.Flush()
		fmt.Fprintf(out, "\nEviction webhook p50 / p99, its own histogram:")
		for _, l := range r.Loads {
			fmt.Fprintf(out, " %s / %s at %.0f/s;", ms(l.Eviction.Webhook.P50Seconds), ms(l.Eviction.Webhook.P99Seconds), l.OfferedPerSec)
		}
		fmt.Fprintf(out, "\nDecisions over the loads (the operator's counters, decision/reason), and the operator's API requests per\n"+
			"dry-run eviction (the webhook's live reads):\n")
		for _, l := range r.Loads {
			fmt.Fprintf(out, "  at %.0f/s: eviction, %s: %s\n    no-downscale, %s{webhook=\"no-downscale\"}: %s\n    requests per eviction: %s\n",
				l.OfferedPerSec, evictionsMetric, decisionsCell(l.Eviction.Decisions), webhookRequestsMetric, decisionsCell(l.NoDownscale.Decisions),
				perRequest(l.Eviction.OperatorRequests, l.Eviction.Client.Requests))
		}

		re := r.Real
		fmt.Fprintf(out, "\nReal evictions of every pod of %s (%d), once each in order at %.0f/s: %d admitted, %d refused with 429, %d other errors;\n"+
			"the zone was whole again %s after the first.\n",
			re.Zone, re.Requested, r.RealPerSec, re.Admitted, re.Refused, re.Errors, seconds(re.ZoneWholeSeconds))
		tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "\trequests\tclient p50\tp90\tp99\tmax\twebhook p50\tp99\tmax<=\tmean\t\n")
		fmt.Fprintf(tw, "real evictions\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t\n", re.Client.Requests,
			ms(re.Client.P50Seconds), ms(re.Client.P90Seconds), ms(re.Client.P99Seconds), ms(re.Client.MaxSeconds),
			ms(re.Webhook.P50Seconds), ms(re.Webhook.P99Seconds), maxAtMostCell(re.Webhook), ms(re.Webhook.MeanSeconds))
		_ = tw.Flush()
		fmt.Fprintf(out, "Decisions: %s\n", decisionsCell(re.Decisions))
		if re.FirstRefusal != "" {
			fmt.Fprintf(out, "First refusal: %s\n", re.FirstRefusal)
		}
		if len(r.FirstErrors) > 0 {
			fmt.Fprintf(out, "\nFirst error of each kind:\n")
			for _, kind := range slices.Sorted(maps.Keys(r.FirstErrors)) {
				fmt.Fprintf(out, "  %s: %s\n", kind, r.FirstErrors[kind])
			}
		}
	}
}

func sideRow(tw io.Writer, label string, s admissionSide) {
	reads, _, _ := tally(s.OperatorRequests)
	perReq := 0.0
	if s.Client.Requests > 0 {
		perReq = float64(reads) / float64(s.Client.Requests)
	}
	fmt.Fprintf(tw, "%s\t%d\t%s\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%.2f\t%.2f cores\t\n",
		label, s.Client.Requests, errorsCell(s.Client), s.Client.AchievedPerSecond,
		ms(s.Client.P50Seconds), ms(s.Client.P90Seconds), ms(s.Client.P99Seconds), ms(s.Client.MaxSeconds),
		ms(s.Webhook.P50Seconds), ms(s.Webhook.P99Seconds), maxAtMostCell(s.Webhook), ms(s.Webhook.MeanSeconds),
		perReq, s.OperatorCPUSeconds/max(s.Client.Seconds, 1e-9))
}

// ratesCell is "20, 100", the loads' offered rates.
func ratesCell(loads []evictionLoad) string {
	parts := make([]string, len(loads))
	for i, l := range loads {
		parts[i] = fmt.Sprintf("%.0f", l.OfferedPerSec)
	}
	return strings.Join(parts, ", ")
}

// maxAtMostCell is the histogram's bound on the slowest request, "> highest
// bound" when it fell beyond it.
func maxAtMostCell(h histogramSummary) string {
	if h.Count > 0 && h.MaxAtMostSeconds == 0 {
		return "beyond"
	}
	return ms(h.MaxAtMostSeconds)
}

// ratio is a over b, "-" when it has no meaning.
func ratio(a, b float64) string {
	if b <= 0 || math.IsNaN(a) || math.IsNaN(b) {
		return "-"
	}
	return fmt.Sprintf("%.2fx", a/b)
}

// perRequest lists request counts divided by n, by verb and resource, the
// most frequent first.
func perRequest(counts map[string]int, n int) string {
	if n == 0 || len(counts) == 0 {
		return "none"
	}
	keys := slices.SortedFunc(maps.Keys(counts), func(a, b string) int {
		if counts[a] != counts[b] {
			return counts[b] - counts[a]
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %.2f", strings.ToLower(k), float64(counts[k])/float64(n))
	}
	return strings.Join(parts, ", ")
}
