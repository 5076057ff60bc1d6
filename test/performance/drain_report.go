/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
)

// printDrain prints the drain scenario's figures.
func printDrain(out io.Writer, results []*drainResult) {
	for _, r := range results {
		perZone := (r.PodsPerZone + r.MaxUnavailable - 1) / r.MaxUnavailable
		fmt.Fprintf(out, "\nDrain of %d pods in %d zones (%d StatefulSets x %d pods, OnDelete, Parallel) on %d fake nodes (%s), one kubectl drain\n"+
			"per node, all at once, as a node pool upgrade would. The eviction webhook judges with the group's disruptionBudget,\n"+
			"maxUnavailable %d; the replacements start on %d spare nodes per zone, uncordoned before the drain; pod start %s.\n"+
			"The floor is the time Kubernetes needs to replace them zone by zone at that budget: %d batches (%d per zone x %d zones) x the\n"+
			"median time one batch of %d pods takes to be replaced with no operator (deleted at once, until every one is back and Ready).\n\n",
			r.Zones*r.PodsPerZone, r.Zones, r.Zones, r.PodsPerZone, r.NodesDrained, podsPerNodeCell(r.PodsPerNode),
			r.MaxUnavailable, drainNodesPerZone, seconds(r.PodStartSeconds), r.Batches, perZone, r.Zones, r.MaxUnavailable)
		tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
		row := func(label, value string) { fmt.Fprintf(tw, "%s\t%s\n", label, value) }
		row("setup: first create -> every pod Ready", fmt.Sprintf("%.1fs", r.SetupSeconds))
		row(fmt.Sprintf("one batch of %d pods, no operator (median of %v)", r.MaxUnavailable, secondsList(r.BatchSeconds)), fmt.Sprintf("%.3fs", r.BatchMedianSeconds))
		row(fmt.Sprintf("floor: %d batches x median", r.Batches), fmt.Sprintf("%.2fs", r.FloorSeconds))
		row("wall: drains started -> every pod Ready again", fmt.Sprintf("%.2fs", r.WallSeconds))
		row("wall / floor", fmt.Sprintf("%.2f", r.Ratio))
		row("wall per batch", fmt.Sprintf("%.2fs", r.WallSeconds/float64(max(r.Batches, 1))))
		row("kubectl drains exited after", rangeCell(r.DrainsSeconds))
		row("evictions admitted / refused (429) / errors", fmt.Sprintf("%d / %d / %d", r.Admitted, r.Refused, r.Errors))
		row("  by reason ("+evictionsMetric+")", decisionsCell(r.Decisions))
		row("  hold writes that met a concurrent one (Conflict)", fmt.Sprintf("%.0f", r.HoldConflicts))
		row("kubectl drains printed: pods evicted / refusals retried / other errors", fmt.Sprintf("%d / %d / %d", r.KubectlEvicted, r.KubectlRetries, r.KubectlEvictionErrors))
		row("kubectl drains that failed and were run again", fmt.Sprint(r.DrainRestarts))
		row("pod monitor: evictions seen", fmt.Sprint(r.Evictions))
		row("  zones in the order they were drained", strings.Join(r.ZoneOrder, " "))
		row(fmt.Sprintf("  most pods unavailable at once (maxUnavailable %d)", r.MaxUnavailable), peakCell(r.PeakUnavailable))
		row("  breaches: an eviction while another zone was short, or two zones short at once (must be 0)", fmt.Sprint(len(r.Breaches)))
		row("operator CPU during the drain", fmt.Sprintf("%.2fs", r.OperatorCPUSeconds))
		row("operator --kube-api-qps (the controllers' client-side limit; the webhooks have their own)", fmt.Sprintf("%g", r.OperatorKubeAPIQPS))
		_ = tw.Flush()
		if r.DrainFailure != "" {
			fmt.Fprintf(out, "  first failed drain: %s\n", r.DrainFailure)
		}
		for _, b := range r.Breaches {
			fmt.Fprintf(out, "  breach: %s\n", b)
		}
		for _, f := range r.ForcedDeletions {
			fmt.Fprintf(out, "  pod removed without terminating first (someone force-deleted it): %s\n", f)
		}
	}
}

// printDrainZones prints the drain-zones scenario's figures.
func printDrainZones(out io.Writer, results []*drainZonesResult) {
	for _, r := range results {
		fmt.Fprintf(out, "\nDrain of one node in each of zones %s (%s), %d pods a zone, maxUnavailable %d, pod start %s.\n"+
			"One after the other: Kubernetes alone, a PodDisruptionBudget (maxUnavailable %d) per StatefulSet, the second zone's node\n"+
			"drained once the first zone is whole again. At once: two other nodes of the same zones, one kubectl drain each, judged by\n"+
			"the group's disruptionBudget alone. kubectl drain retries a refused eviction 5 s later.\n\n",
			strings.Join(drainedZones, ", "), podsPerNodeCell(r.PodsPerNode), r.PodsPerZone, r.MaxUnavailable, seconds(r.PodStartSeconds), r.MaxUnavailable)
		tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "\tnodes\twall\tper zone\tevicted\t429s retried\tother errors\tdrains run again\tzones in order\tpeak unavailable\tbreaches\t\n")
		phaseRow := func(label string, p drainPhase) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%s\t%d\t\n", label, strings.Join(p.Nodes, " "), seconds(p.WallSeconds),
				secondsList(p.ZoneSeconds), p.Evicted, p.Retries, p.EvictionErrors, p.Restarts, strings.Join(p.ZoneOrder, " "), peakCell(p.PeakUnavailable), len(p.Breaches))
		}
		phaseRow("one after the other, PodDisruptionBudgets", r.Sequential)
		phaseRow("at once, Echelon", r.AtOnce)
		_ = tw.Flush()
		fmt.Fprintf(out, "at once / one after the other: %.2f\n", r.Ratio)
		fmt.Fprintf(out, "eviction webhook, at once: %d admitted / %d refused (429) / %d errors; 429s for a contended record %d (must be 0);\n"+
			"  intent writes that met another %.0f; by reason: %s\n",
			r.Admitted, r.Refused, r.Errors, r.Contended, r.HoldConflicts, decisionsCell(r.Decisions))
		for _, b := range append(slices.Clone(r.Sequential.Breaches), r.AtOnce.Breaches...) {
			fmt.Fprintf(out, "  breach: %s\n", b)
		}
	}
}

// podsPerNodeCell says how the pods were spread: "10 pods each" when evenly.
func podsPerNodeCell(counts map[string]int) string {
	values := slices.Sorted(maps.Values(counts))
	if len(values) > 0 && values[0] == values[len(values)-1] {
		return fmt.Sprintf("%d pods each", values[0])
	}
	return perNode(counts)
}

// perNode lists the pods on each node, by node.
func perNode(counts map[string]int) string {
	var parts []string
	for _, n := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%s %d", n, counts[n]))
	}
	return strings.Join(parts, ", ")
}

// rangeCell is "a .. b" of a list of seconds, its lowest and highest.
func rangeCell(ss []float64) string {
	if len(ss) == 0 {
		return "-"
	}
	return fmt.Sprintf("%s .. %s", seconds(slices.Min(ss)), seconds(slices.Max(ss)))
}

// peakCell lists the peak of each zone, by zone.
func peakCell(peak map[string]int) string {
	var parts []string
	for _, z := range slices.Sorted(maps.Keys(peak)) {
		parts = append(parts, fmt.Sprintf("%s %d", z, peak[z]))
	}
	return strings.Join(parts, ", ")
}
