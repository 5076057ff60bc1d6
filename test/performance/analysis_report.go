/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

// printAnalysis prints the analysis scenario's figures.
func printAnalysis(out io.Writer, results []*analysisResult) {
	for _, r := range results {
		printLatency(out, r)
		printQueries(out, r)
	}
}

// latencyRows are the rows of the latency table: what each measures, from
// the metric turning bad, or between two moments.
var latencyRows = []struct {
	label string
	value func(latencySample) float64
}{
	{"metric set bad -> Prometheus scrapes it", func(s latencySample) float64 { return s.ScrapedSeconds }},
	{"metric set bad -> the query that fails the gate", func(s latencySample) float64 { return s.FailingQuerySeconds }},
	{"metric set bad -> first rollback deletion (pod watch)", func(s latencySample) float64 { return s.DeletionSeconds }},
	{"scraped -> first rollback deletion", func(s latencySample) float64 { return s.DeletionSeconds - s.ScrapedSeconds }},
	{"failing query -> operator's first pod DELETE", func(s latencySample) float64 { return s.DeleteRequestSeconds - s.FailingQuerySeconds }},
	{"metric set bad -> rolled back (Failed, every pod Ready)", func(s latencySample) float64 { return s.RolledBackSeconds }},
}

func printLatency(out io.Writer, r *analysisResult) {
	if len(r.Latency) == 0 {
		return
	}
	fmt.Fprintf(out, "\nAnalysis (a): a gate's metric turning bad -> the rollback's first pod deletion. One operator, a real Prometheus\n"+
		"scraping the bench's exporter every %s. A group of %d StatefulSets x %d pods, onFailure Rollback; once zone-a is rolled,\n"+
		"its AfterMember gate (one compare check, failureThreshold 1, interval I) passes and soaks (soakTime %s), its check still\n"+
		"queried every I. The bench then sets zone-a's metric bad at a uniformly random point of the check's cycle, %d times at each I.\n"+
		"Each cell: median / max over the turns, in seconds and in multiples of I.\n\n",
		seconds(r.ScrapeIntervalSeconds), len(memberNames), latencyReplicas, analysisSoak, len(r.Latency[0].Samples))
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	cells := []string{""}
	for _, s := range r.Latency {
		cells = append(cells, fmt.Sprintf("I = %s", seconds(s.IntervalSeconds)))
	}
	fmt.Fprintln(tw, strings.Join(cells, "\t"))
	for _, row := range latencyRows {
		cells := []string{row.label}
		for _, s := range r.Latency {
			cells = append(cells, latencyCell(s, row.value))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	_ = tw.Flush()
	fmt.Fprintf(out, "The wait for the next query is at most one interval, and the scrape at most one scrape interval: the first\n"+
		"deletion comes within I + %s + the operator's reaction (restore the templates, the StatefulSet controller's new\n"+
		"revision, the deletion).\n", seconds(r.ScrapeIntervalSeconds))
}

// latencyCell is "median / max" of one row over a series' samples.
func latencyCell(s latencySeries, value func(latencySample) float64) string {
	if len(s.Samples) == 0 {
		return "-"
	}
	ds := make([]time.Duration, len(s.Samples))
	for i, sample := range s.Samples {
		ds[i] = time.Duration(value(sample) * float64(time.Second))
	}
	med, top := median(ds), percentile(ds, 1)
	inI := func(d time.Duration) string { return fmt.Sprintf("%.2f I", d.Seconds()/s.IntervalSeconds) }
	return fmt.Sprintf("%s / %s  (%s / %s)", d3(med), d3(top), inI(med), inI(top))
}

func printQueries(out io.Writer, r *analysisResult) {
	if len(r.Queries) == 0 {
		return
	}
	q0 := r.Queries[0]
	fmt.Fprintf(out, "\nAnalysis (b): Prometheus queries of %d groups, each waiting on its zone-a AfterMember gate of %d checks (a compare and\n"+
		"a hasData: false), passed and soaking, counted at a proxy in front of Prometheus and by Prometheus itself over a window\n"+
		"of whole intervals; %d more groups have analysis and no rollout. The checks' interval I is changed in the spec between windows.\n\n",
		q0.Groups, q0.ChecksPerGroup, r.IdleGroups)
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	row := func(label string, cell func(q querySeries) string) {
		cells := []string{label}
		for _, q := range r.Queries {
			cells = append(cells, cell(q))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	row("", func(q querySeries) string { return fmt.Sprintf("I = %s", seconds(q.IntervalSeconds)) })
	row("window", func(q querySeries) string {
		return fmt.Sprintf("%s (%d I)", seconds(q.WindowSeconds).Round(10*time.Millisecond), q.Intervals)
	})
	row(fmt.Sprintf("queries of the %d pending groups (proxy)", q0.Groups), func(q querySeries) string { return fmt.Sprint(q.Queries) })
	row(fmt.Sprintf("per group per interval (expected %d, the checks)", q0.ChecksPerGroup), func(q querySeries) string {
		return fmt.Sprintf("%.2f", q.PerGroupPerInterval)
	})
	row("one group in the window: fewest - most", func(q querySeries) string {
		return fmt.Sprintf("%d - %d (%d expected)", q.PerGroupMin, q.PerGroupMax, q.Intervals*q.ChecksPerGroup)
	})
	row(`Prometheus's own count, prometheus_http_requests_total{handler="/api/v1/query"}`, func(q querySeries) string { return fmt.Sprintf("%.0f", q.PrometheusQueries) })
	row("queries by groups without a pending gate", func(q querySeries) string { return fmt.Sprint(q.OtherQueries) })
	row("queries answered with an error", func(q querySeries) string { return fmt.Sprint(q.Errors) })
	row("Prometheus's answer at the proxy: median / p99", func(q querySeries) string {
		return fmt.Sprintf("%s / %s", d3(seconds(q.AnswerMedianSeconds)), d3(seconds(q.AnswerP99Seconds)))
	})
	_ = tw.Flush()
	fmt.Fprintf(out, "Queries by the %d idle groups over the whole run: %d (the operator queries only for a pending gate).\n", r.IdleGroups, r.QueriesOfIdleGroups)
}

// d3 prints a duration to the millisecond.
func d3(d time.Duration) string { return d.Round(time.Millisecond).String() }

// writeAnalysisJSON writes the analysis scenario's figures next to the
// bench's JSON report: <report>-analysis.json.
func writeAnalysisJSON(reportPath string, results []*analysisResult) (string, error) {
	path := strings.TrimSuffix(reportPath, ".json") + "-analysis.json"
	b, err := json.MarshalIndent(map[string]any{"analysis": results}, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}
