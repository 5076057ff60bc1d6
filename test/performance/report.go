/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Targets the figures are judged against (issue 6). The CPU and memory
// targets are set for 4,500 pods; smaller runs are held to them too.
const (
	targetRatio        = 1.05
	targetWritesPerPod = 2.0
	targetCPUSeconds   = 2.0
	targetPeakRSSBytes = 80 << 20
)

// printTable prints one column per run.
func printTable(out io.Writer, s scenario, results []*result) {
	fmt.Fprintf(out, "\nRollout of %d StatefulSets x %d pods (Parallel, OnDelete), maxUnavailable %d: %d pods in %d batches at least.\n\n",
		s.members, s.replicas, s.maxUnavailable, s.pods(), s.batches())
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	row := tableRow(tw, results)
	header := func() {
		row("", func(r *result) string { return r.Title })
		row("pod start", func(r *result) string { return seconds(r.PodStartSeconds).String() })
	}
	header()
	row("pods in the namespace (groups)", func(r *result) string { return fmt.Sprintf("%d (%d)", r.PodsInNamespace, r.Groups) })
	row("setup: first create -> every pod Ready", func(r *result) string { return fmt.Sprintf("%.1fs", r.SetupSeconds) })
	row("operator start -> every group Complete", func(r *result) string { return fmt.Sprintf("%.2fs", r.StartupSeconds) })
	row("operator CPU during start-up", func(r *result) string { return fmt.Sprintf("%.2fs", r.StartupCPUSeconds) })
	row("operator peak RSS after start-up", func(r *result) string { return mib(r.StartupPeakRSSBytes) })
	row("wall: template change -> Complete", func(r *result) string { return fmt.Sprintf("%.2fs", r.WallSeconds) })
	row(fmt.Sprintf("one batch of %d pods, no operator (median)", s.maxUnavailable), func(r *result) string {
		return fmt.Sprintf("%.3fs", r.BatchMedianSeconds)
	})
	row(fmt.Sprintf("floor: %d batches x median", s.batches()), func(r *result) string { return fmt.Sprintf("%.2fs", r.FloorSeconds) })
	row(fmt.Sprintf("wall / floor (target <= %.2f)", targetRatio), func(r *result) string { return verdict(fmt.Sprintf("%.3f", r.Ratio), r.Ratio <= targetRatio) })
	row("Kubernetes rolling the same members itself, one after the other", func(r *result) string {
		if r.KubernetesRollSeconds == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2fs", r.KubernetesRollSeconds)
	})
	row(fmt.Sprintf("wall / Kubernetes itself (target <= %.2f)", targetRatio), func(r *result) string {
		if r.KubernetesRollSeconds == 0 {
			return "-"
		}
		return verdict(fmt.Sprintf("%.3f", r.KubernetesRatio), r.KubernetesRatio <= targetRatio)
	})
	row("handover: pods deleted before the signal", func(r *result) string {
		return ifHandover(r, func(h *handoverResult) string { return fmt.Sprint(h.AfterPodsDeleted) })
	})
	row("handover: signal -> new leader's Lease write", func(r *result) string {
		return ifHandover(r, func(h *handoverResult) string { return fmt.Sprintf("%.2fs", h.TakeoverSeconds) })
	})
	row("handover gap: signal -> new leader's first deletion", func(r *result) string {
		return ifHandover(r, func(h *handoverResult) string { return fmt.Sprintf("%.2fs", h.GapSeconds) })
	})
	row("reads per pod (GET)", func(r *result) string { return fmt.Sprintf("%.2f", r.ReadsPerPod) })
	row(fmt.Sprintf("writes per pod, Lease writes aside (target <= %.1f)", targetWritesPerPod), func(r *result) string {
		return verdict(fmt.Sprintf("%.2f", r.WritesPerPod), r.WritesPerPod <= targetWritesPerPod)
	})
	row("Lease writes per pod (leader election)", func(r *result) string { return fmt.Sprintf("%.2f", r.LeaseWritesPerPod) })
	for _, method := range methods(results) {
		row("  "+method+" per pod", func(r *result) string { return fmt.Sprintf("%.2f", r.RequestsByMethod[method]/float64(r.Pods)) })
	}
	row("pod deletions the API server refused", func(r *result) string { return fmt.Sprint(r.FailedPodDeletions) })
	// The caches list once, at start; what lists after is the live read of a
	// member's pods before a deletion batch, which the issue bounds to one a batch.
	row(fmt.Sprintf("LISTs after start (target <= %d, one live read a batch)", s.batches()), func(r *result) string {
		return verdict(fmt.Sprint(r.ListsAfterStart), r.ListsAfterStart <= r.Batches)
	})
	row(fmt.Sprintf("operator CPU during the rollout (target <= %.1fs)", targetCPUSeconds), func(r *result) string {
		return verdict(fmt.Sprintf("%.2fs", r.CPUSeconds), r.CPUSeconds <= targetCPUSeconds)
	})
	row("operator CPU since its start", func(r *result) string { return fmt.Sprintf("%.2fs", r.CPUSecondsTotal) })
	row(fmt.Sprintf("operator peak RSS, VmHWM (target <= %s)", mib(targetPeakRSSBytes)), func(r *result) string {
		return verdict(mib(r.PeakRSSBytes), r.PeakRSSBytes <= targetPeakRSSBytes)
	})
	_ = tw.Flush()
	fmt.Fprintf(out, "\nWith two operators, requests are both processes', CPU is their sum and RSS the higher\n"+
		"of the two; a signalled process counts with what it had used at the signal.\n")

	fmt.Fprintf(out, "\nOperator requests during the rollout, by verb and resource (counted by a proxy in front of each process):\n\n")
	tw = tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	row = tableRow(tw, results)
	header()
	for _, key := range verbs(results) {
		row(strings.ToLower(key), func(r *result) string {
			n := float64(r.RequestsByVerb[key])
			return fmt.Sprintf("%d (%.2f/pod, %.1f/batch)", r.RequestsByVerb[key], n/float64(r.Pods), n/float64(r.Batches))
		})
	}
	_ = tw.Flush()
}

// tableRow returns a function that prints one row: a label and a cell per run.
func tableRow(tw io.Writer, results []*result) func(label string, cell func(r *result) string) {
	return func(label string, cell func(r *result) string) {
		cells := []string{label}
		for _, r := range results {
			cells = append(cells, cell(r))
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
}

func ifHandover(r *result, cell func(h *handoverResult) string) string {
	if r.Handover == nil {
		return "-"
	}
	return cell(r.Handover)
}

func mib(bytes int64) string { return fmt.Sprintf("%.1f MiB", float64(bytes)/(1<<20)) }

func verdict(v string, ok bool) string {
	if ok {
		return v
	}
	return v + " (over)"
}

func seconds(s float64) time.Duration {
	return time.Duration(s * float64(time.Second)).Round(time.Millisecond)
}

func secondsList(ss []float64) []time.Duration {
	out := make([]time.Duration, len(ss))
	for i, s := range ss {
		out[i] = seconds(s)
	}
	return out
}

// methods are the HTTP methods any run counted, writes after reads.
func methods(results []*result) []string {
	seen := map[string]bool{}
	for _, r := range results {
		for m := range r.RequestsByMethod {
			seen[m] = true
		}
	}
	return slices.SortedFunc(maps.Keys(seen), func(a, b string) int {
		if isRead(a) != isRead(b) {
			if isRead(a) {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
}

// verbs are the request kinds any run counted, the most frequent first.
func verbs(results []*result) []string {
	total := map[string]int{}
	for _, r := range results {
		for k, n := range r.RequestsByVerb {
			total[k] += n
		}
	}
	return slices.SortedFunc(maps.Keys(total), func(a, b string) int {
		if total[a] != total[b] {
			return total[b] - total[a]
		}
		return strings.Compare(a, b)
	})
}

// report is the JSON document of --json.
type report struct {
	Scenario struct {
		StatefulSets   int `json:"statefulSets"`
		Replicas       int `json:"replicas"`
		MaxUnavailable int `json:"maxUnavailable"`
	} `json:"scenario"`
	Results []*result `json:"results"`
	// Scale holds the scale scenario's runs, each with its own shape.
	Scale []*result `json:"scale,omitempty"`
	// Follow holds the follow scenario's figures, which share nothing with a rollout's.
	Follow []*followResult `json:"follow,omitempty"`
	// Webhook holds the webhook scenario's figures.
	Webhook []*webhookResult `json:"webhook,omitempty"`
	// Eviction and Drain hold the eviction and drain scenarios' figures.
	Eviction []*evictionResult `json:"eviction,omitempty"`
	Drain    []*drainResult    `json:"drain,omitempty"`
	// DrainZones holds the drain-zones scenario's figures.
	DrainZones []*drainZonesResult `json:"drainZones,omitempty"`
	// Resize holds the resize scenario's figures.
	Resize []*resizeResult `json:"resize,omitempty"`
}

// writeJSON writes r, with the scenario s, to path.
func writeJSON(path string, s scenario, r report) error {
	r.Scenario.StatefulSets, r.Scenario.Replicas, r.Scenario.MaxUnavailable = s.members, int(s.replicas), int(s.maxUnavailable)
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
