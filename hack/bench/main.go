/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Command bench measures a RolloutGroup rollout against the fastest rollout the
// control plane allows: `make bench`, or
//
//	go run ./hack/bench [--pod-start=1s,5s] [--json=bench.json]
//
// For each pod start time (creation to Ready, played by kwok with no jitter) it
// starts a fresh local control plane, runs the echelon binary as its own user
// bound to the generated RBAC, rolls 3 StatefulSets x 30 pods with
// maxUnavailable 5, and reports:
//
//   - wall time from the template change to the group's Complete, seen through
//     a watch on the group;
//   - the floor: the batches the rollout needs at least, times the median time
//     one batch of pods takes to be replaced with no operator at all, measured
//     on an identical StatefulSet of the same control plane;
//   - the operator's API requests per pod rolled, from its own
//     rest_client_requests_total, and by verb and resource from a proxy in
//     front of it (which tells LIST and WATCH from GET);
//   - the operator's CPU time and peak resident memory, from /proc.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/controlplane"
)

func main() {
	var (
		podStarts      durationList = []time.Duration{time.Second, 5 * time.Second}
		jsonPath       string
		floorRepeats   int
		replicas       int
		maxUnavailable int
		logLevel       string
		timeout        time.Duration
	)
	flag.Var(&podStarts, "pod-start", "Comma-separated pod start times (creation to Ready) to measure, one control plane each.")
	flag.StringVar(&jsonPath, "json", "", "Also write the results as JSON to this file.")
	flag.IntVar(&floorRepeats, "floor-repeats", 5, "How many batches to time with no operator; the floor uses their median.")
	flag.IntVar(&replicas, "replicas", 30, "Pods per StatefulSet.")
	flag.IntVar(&maxUnavailable, "max-unavailable", 5, "maxUnavailable of the RolloutGroup, and the size of a floor batch.")
	flag.StringVar(&logLevel, "operator-log-level", "info", "The operator's --log-level; debug explains every reconcile but costs CPU.")
	flag.DurationVar(&timeout, "timeout", 10*time.Minute, "Bound on each wait.")
	flag.Parse()
	if floorRepeats < 1 || replicas < 1 || maxUnavailable < 1 || replicas < maxUnavailable {
		fmt.Fprintln(os.Stderr, "bench: --floor-repeats, --replicas and --max-unavailable must be at least 1, and --replicas at least --max-unavailable")
		os.Exit(2)
	}
	// Only the bench's own lines on the terminal; the operator and the
	// components log to files.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := bench(ctx, podStarts, jsonPath, floorRepeats, scenario{
		members: len(memberNames), replicas: int32(replicas), maxUnavailable: int32(maxUnavailable),
	}, logLevel, timeout); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func bench(ctx context.Context, podStarts []time.Duration, jsonPath string, floorRepeats int, s scenario, logLevel string, timeout time.Duration) error {
	root, err := controlplane.RepoRoot()
	if err != nil {
		return err
	}
	if _, err := controlplane.FindAssets(); err != nil {
		return err
	}
	workDir, err := os.MkdirTemp("", "echelon-bench-")
	if err != nil {
		return err
	}
	binDir := filepath.Join(workDir, "bin")
	if err := os.Mkdir(binDir, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(binDir)

	began := time.Now()
	fmt.Printf("Building the echelon binary ... ")
	binary, err := framework.BuildOperator(root, binDir)
	if err != nil {
		return err
	}
	fmt.Printf("done (%s)\n", since(began))

	var results []*result
	for _, podStart := range podStarts {
		fmt.Printf("Measuring with a pod start of %s:\n", podStart)
		r, err := run(ctx, runConfig{
			scenario:        s,
			podStart:        podStart,
			floorRepeats:    floorRepeats,
			binary:          binary,
			workDir:         workDir,
			operatorLogDir:  workDir,
			operatorLogArgs: []string{"--log-level=" + logLevel},
			timeout:         timeout,
			progress:        os.Stdout,
		})
		if err != nil {
			return fmt.Errorf("pod start %s: %w", podStart, err)
		}
		results = append(results, r)
	}
	printTable(os.Stdout, s, results)
	fmt.Printf("\nOperator logs and request logs: %s (took %s in all)\n", workDir, since(began))
	if jsonPath != "" {
		if err := writeJSON(jsonPath, s, results); err != nil {
			return err
		}
		fmt.Printf("Results written to %s\n", jsonPath)
	}
	return nil
}

// durationList is a flag of comma-separated durations.
type durationList []time.Duration

func (l *durationList) String() string {
	parts := make([]string, len(*l))
	for i, d := range *l {
		parts[i] = d.String()
	}
	return strings.Join(parts, ",")
}

func (l *durationList) Set(v string) error {
	var out []time.Duration
	for _, p := range strings.Split(v, ",") {
		d, err := time.ParseDuration(strings.TrimSpace(p))
		if err != nil {
			return err
		}
		if d <= 0 {
			return errors.New("pod start times must be positive")
		}
		out = append(out, d)
	}
	*l = out
	return nil
}
