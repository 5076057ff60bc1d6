/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"fmt"
	"io"
	"text/tabwriter"
)

// printScale prints the scale scenario's runs: the rollout table of their
// shape, then what the scale scenario measures besides, then the heap
// summaries.
func printScale(out io.Writer, s scenario, o scaleOptions, results []*result) {
	if len(results) == 0 {
		return
	}
	s.replicas = int32(o.replicas)
	printTable(out, s, results)

	fmt.Fprintf(out, "\nScale: every group's zone-b and zone-c follow zone-a (ScalingPolicies), one follower in %d has a DelayedDownscale.\n\n", delayedEvery)
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
	row := tableRow(tw, results)
	row("", func(r *result) string { return r.Title })
	row("ScalingPolicies / DelayedDownscales", func(r *result) string {
		return fmt.Sprintf("%d / %d", r.Scale.ScalingPolicies, r.Scale.DelayedDownscales)
	})
	row("operator start -> caches synced (/ready)", func(r *result) string { return fmt.Sprintf("%.2fs", r.Scale.CacheSyncSeconds) })
	row("operator start -> every group Complete", func(r *result) string { return fmt.Sprintf("%.2fs", r.StartupSeconds) })
	row(fmt.Sprintf("settled (%s after): RSS", scaleSettle), func(r *result) string { return mib(r.Scale.AtStart.RSSBytes) })
	row("settled: peak RSS (VmHWM)", func(r *result) string { return mib(r.Scale.AtStart.PeakRSSBytes) })
	row("settled: heap in use (profile)", func(r *result) string { return mib(r.Scale.AtStart.Heap.InuseBytes) })
	row("growth from the previous size: RSS per thousand pods", func(r *result) string {
		return growth(results, r, func(r *result) float64 { return float64(r.Scale.AtStart.RSSBytes) }, func(v float64) string { return mib(int64(v)) })
	})
	row("growth from the previous size: peak RSS per thousand pods", func(r *result) string {
		return growth(results, r, func(r *result) float64 { return float64(r.PeakRSSBytes) }, func(v float64) string { return mib(int64(v)) })
	})
	row("start-up CPU per thousand pods", func(r *result) string {
		return fmt.Sprintf("%.3fs", r.StartupCPUSeconds/(float64(r.PodsInNamespace)/1000))
	})
	row("idle CPU (window)", func(r *result) string {
		if r.Scale.IdleSeconds == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f millicores (%s)", r.Scale.IdleCPUCores*1000, seconds(r.Scale.IdleSeconds))
	})
	row("growth from the previous size: idle CPU per thousand pods", func(r *result) string {
		return growth(results, r, func(r *result) float64 { return r.Scale.IdleCPUCores * 1000 }, func(v float64) string { return fmt.Sprintf("%.2f millicores", v) })
	})
	row("load average 1/5/15 min, after the idle window", func(r *result) string { return loadString(r.Scale.LoadAfterIdle) })
	row("load average 1/5/15 min, after the rollout", func(r *result) string { return loadString(r.Scale.LoadAfterRollout) })
	row("API requests per pod rolled (GET and writes)", func(r *result) string {
		return fmt.Sprintf("%.2f", r.ReadsPerPod+r.WritesPerPod+r.LeaseWritesPerPod)
	})
	row("without cache transforms: start -> caches synced", func(r *result) string {
		return ifUntransformed(r, func(u *untransformedResult) string { return fmt.Sprintf("%.2fs", u.CacheSyncSeconds) })
	})
	row("without cache transforms: settled RSS", func(r *result) string {
		return ifUntransformed(r, func(u *untransformedResult) string { return mib(u.Figures.RSSBytes) })
	})
	row("without cache transforms: peak RSS (VmHWM)", func(r *result) string {
		return ifUntransformed(r, func(u *untransformedResult) string { return mib(u.Figures.PeakRSSBytes) })
	})
	row("without cache transforms: heap in use", func(r *result) string {
		return ifUntransformed(r, func(u *untransformedResult) string { return mib(u.Figures.Heap.InuseBytes) })
	})
	row("with / without transforms: heap in use, RSS, peak RSS", func(r *result) string {
		return ifUntransformed(r, func(u *untransformedResult) string {
			a := r.Scale.AtStart
			return fmt.Sprintf("%s, %s, %s", ratio(float64(a.Heap.InuseBytes), float64(u.Figures.Heap.InuseBytes)),
				ratio(float64(a.RSSBytes), float64(u.Figures.RSSBytes)), ratio(float64(a.PeakRSSBytes), float64(u.Figures.PeakRSSBytes)))
		})
	})
	row("without cache transforms: load average 1/5/15 min", func(r *result) string {
		return ifUntransformed(r, func(u *untransformedResult) string { return loadString(u.Load) })
	})
	_ = tw.Flush()

	for _, r := range results {
		printHeap(out, fmt.Sprintf("%s, settled", r.Title), r.Scale.AtStart.Heap)
		if u := r.Scale.Untransformed; u != nil {
			printHeap(out, fmt.Sprintf("%s, settled, without cache transforms", r.Title), u.Figures.Heap)
		}
	}
}

// printHeap prints a heap summary as `go tool pprof -top` would, flat then
// cumulative.
func printHeap(out io.Writer, title string, h heapSummary) {
	fmt.Fprintf(out, "\nHeap in use, %s: %s in all\n\n", title, mib(h.InuseBytes))
	tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "flat\tflat%\t\t")
	for _, e := range h.Flat {
		fmt.Fprintf(tw, "%s\t%.1f%%\t\t%s\n", mib(e.Bytes), 100*float64(e.Bytes)/float64(max(h.InuseBytes, 1)), e.Function)
	}
	fmt.Fprintln(tw, "cum\tcum%\t\t")
	for _, e := range h.Cumulative {
		fmt.Fprintf(tw, "%s\t%.1f%%\t\t%s\n", mib(e.Bytes), 100*float64(e.Bytes)/float64(max(h.InuseBytes, 1)), e.Function)
	}
	_ = tw.Flush()
}

// growth is the change of value per thousand pods watched from the run
// before r (the runs are sorted by size), or "-" for the first.
func growth(results []*result, r *result, value func(*result) float64, format func(float64) string) string {
	for i, x := range results {
		if x != r || i == 0 {
			continue
		}
		prev := results[i-1]
		pods := float64(r.PodsInNamespace - prev.PodsInNamespace)
		if pods <= 0 {
			return "-"
		}
		return format((value(r) - value(prev)) / (pods / 1000))
	}
	return "-"
}

func ifUntransformed(r *result, cell func(u *untransformedResult) string) string {
	if r.Scale.Untransformed == nil {
		return "-"
	}
	return cell(r.Scale.Untransformed)
}

func loadString(l [3]float64) string { return fmt.Sprintf("%.2f / %.2f / %.2f", l[0], l[1], l[2]) }
