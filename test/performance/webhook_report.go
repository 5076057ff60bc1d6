/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"fmt"
	"io"
	"maps"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
)

// printWebhook prints the webhook scenario's figures.
func printWebhook(out io.Writer, results []*webhookResult) {
	for _, r := range results {
		fmt.Fprintf(out, "\nNo-downscale admission webhook, one operator: %d HTTPS clients (%s, kept-alive connections, trusting the CA bundle\n"+
			"injected into the webhook configuration) POST AdmissionReviews straight to %s,\n"+
			"each an UPDATE of a StatefulSet's /scale. %d StatefulSets, each guarded by a ScalingPolicy with downscale.allowed=false:\n"+
			"%d requests in %d shrink one (denied, naming the policy), 1 in %d grows one (allowed). Open loop: requests fall due at the\n"+
			"offered rate whatever the answers; latency runs from a request's queueing for a free client to its whole answer.\n"+
			"API server, dry-run scale down of %s: %s\n\n",
			r.Clients, strings.Join(r.Protocols, ", "), r.URL, r.Guarded, r.IncreaseEvery-1, r.IncreaseEvery, r.IncreaseEvery,
			guardedName(0), r.APIServerDenial)
		tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "\toffered/s\tachieved/s\trequests\terrors\tdropped\tp50\tp90\tp99\tmax\toperator CPU\tbench CPU\tothers CPU\toperator API writes\tp99 <= %s\t\n", ms(r.P99LimitSeconds))
		stepRow(tw, fmt.Sprintf("steady (%s)", seconds(r.Steady.Seconds).Round(100e6)), r.Steady)
		for _, s := range r.Steps {
			stepRow(tw, "step", s)
		}
		_ = tw.Flush()
		held := "none"
		if r.HeldPerSecond > 0 {
			held = fmt.Sprintf("%.0f requests/s", r.HeldPerSecond)
		}
		if n := len(r.Steps); n > 0 && r.Steps[n-1].Held {
			held += " (the highest step: one replica holds that much at least)"
		}
		fmt.Fprintf(out, "\nHighest step one replica holds (p99 <= %s, no error, nothing dropped, >= %.0f%% of the offered rate achieved): %s\n"+
			"CPU in cores: CPU seconds over the step's seconds. The clients (bench) run on the same %d cores as the operator; others\n"+
			"is the rest of the machine's busy time: kube-apiserver, etcd and whatever else runs there meanwhile. * marks more than\n"+
			"%.2f cores of it: other work competed for the cores, and the step's latency tells of it as much as of the operator.\n",
			ms(r.P99LimitSeconds), achievedShare*100, held, runtime.NumCPU(), busyNeighbours)
		if rot := r.Rotation; rot != nil {
			printRotation(out, r, rot)
		}
		if len(r.FirstErrors) > 0 {
			fmt.Fprintf(out, "\nFirst error of each kind:\n")
			for _, kind := range slices.Sorted(maps.Keys(r.FirstErrors)) {
				fmt.Fprintf(out, "  %s: %s\n", kind, r.FirstErrors[kind])
			}
		}
	}
}

func printRotation(out io.Writer, r *webhookResult, rot *rotationResult) {
	fmt.Fprintf(out, "\nCertificate rotation (--webhook-cert-validity=%s --webhook-ca-validity=%s, renewed at two thirds), %.0f requests/s,\n"+
		"1 request in %d on a new connection (a full TLS handshake against the bundle injected at that moment):\n\n",
		rot.CertValidity, rot.CAValidity, rot.Whole.OfferedPerSecond, rot.FreshEvery)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	served := func(label string, s servedCert) {
		fmt.Fprintf(tw, "%s\tserial %s, issued by %s, %d handshakes\n", label, s.Serial, s.Issuer, s.Handshakes)
	}
	served("served before the rotation", rot.Served[0])
	served("served after", rot.Served[1])
	fmt.Fprintf(tw, "first handshake with the new certificate\t%.1fs after the operator started\n", rot.SwitchSeconds)
	var changes []string
	for _, c := range rot.BundleChangesSeconds {
		changes = append(changes, fmt.Sprintf("%+.1fs", c))
	}
	fmt.Fprintf(tw, "new CA bundle taken by the clients, relative to that\t%s\n", orNone(strings.Join(changes, ", ")))
	fmt.Fprintf(tw, "operator's echelon_webhook_certificate_rotations_total\t%s\n", orNone(rot.OperatorRotations))
	_ = tw.Flush()
	fmt.Fprintln(out)
	tw = tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "\trequests\terrors\tdropped\tachieved/s\tp50\tp90\tp99\tmax\t\n")
	row := func(label string, s latencySummary, dropped string) {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.0f\t%s\t%s\t%s\t%s\t\n", label, s.Requests, errorsCell(s), dropped, s.AchievedPerSecond,
			ms(s.P50Seconds), ms(s.P90Seconds), ms(s.P99Seconds), ms(s.MaxSeconds))
	}
	row(fmt.Sprintf("window %+.0fs..%+.0fs around the switch", rot.WindowFromSeconds, rot.WindowToSeconds), rot.Window, "-")
	row(fmt.Sprintf("whole load (%s)", seconds(rot.Whole.Seconds).Round(100e6)), rot.Whole.latencySummary, fmt.Sprint(rot.Whole.Dropped))
	_ = tw.Flush()
	fmt.Fprintf(out, "Over the whole load: operator CPU %.2f cores, bench %.2f cores, others %s.\n",
		rot.Whole.OperatorCPUSeconds/rot.Whole.Seconds, rot.Whole.BenchCPUSeconds/rot.Whole.Seconds, othersCell(rot.Whole))
	var p99s []string
	for _, s := range rot.BySecond {
		if float64(s.Second) >= rot.WindowFromSeconds && float64(s.Second) < rot.WindowToSeconds {
			p99s = append(p99s, fmt.Sprintf("%+d:%.1f", s.Second, s.P99Seconds*1000))
		}
	}
	fmt.Fprintf(out, "p99 in ms of each second of the window (second:p99, 0 starts at the switch):\n  %s\n", strings.Join(p99s, " "))
}

func stepRow(tw io.Writer, label string, s webhookStep) {
	_, writes, _ := tally(s.OperatorRequests)
	fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%d\t%s\t%d\t%s\t%s\t%s\t%s\t%.2f cores\t%.2f cores\t%s\t%d\t%s\t\n",
		label, s.OfferedPerSecond, s.AchievedPerSecond, s.Requests, errorsCell(s.latencySummary), s.Dropped,
		ms(s.P50Seconds), ms(s.P90Seconds), ms(s.P99Seconds), ms(s.MaxSeconds),
		s.OperatorCPUSeconds/s.Seconds, s.BenchCPUSeconds/s.Seconds, othersCell(s), writes, yesNo(s.Held))
}

// busyNeighbours is the CPU, in cores, beyond which the rest of the machine
// competed with the operator and its clients for the two cores: in this
// scenario kube-apiserver and etcd are all but idle, so that is other work.
const busyNeighbours = 0.25

// othersCell is the rest of the machine's CPU, marked when it competed.
func othersCell(s webhookStep) string {
	cores := s.OthersCPUSeconds / s.Seconds
	if cores > busyNeighbours {
		return fmt.Sprintf("%.2f cores *", cores)
	}
	return fmt.Sprintf("%.2f cores", cores)
}

// errorsCell is the error count, with the count of each kind when there are any.
func errorsCell(s latencySummary) string {
	if s.Errors == 0 {
		return "0"
	}
	var kinds []string
	for _, k := range slices.Sorted(maps.Keys(s.ErrorsByKind)) {
		kinds = append(kinds, fmt.Sprintf("%s %d", k, s.ErrorsByKind[k]))
	}
	return fmt.Sprintf("%d (%s)", s.Errors, strings.Join(kinds, ", "))
}

// describe is a one-line account of a stretch of load, for progress lines.
func describe(s latencySummary) string {
	return fmt.Sprintf("%d requests, achieved %.0f/s, p50 %s, p99 %s, max %s, errors %s, dropped %d",
		s.Requests, s.AchievedPerSecond, ms(s.P50Seconds), ms(s.P99Seconds), ms(s.MaxSeconds), errorsCell(s), s.Dropped)
}

func ms(s float64) string { return fmt.Sprintf("%.2fms", s*1000) }

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
