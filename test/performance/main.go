/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Command bench measures a RolloutGroup rollout against the fastest rollout the
// control plane allows: `make bench`, or
//
//	go run ./test/performance [--scenarios=single,sigterm,sigkill,scale,follow,webhook,eviction,drain,analysis] [--pod-start=1s,5s] [--json=bench.json]
//
// Every run starts a fresh local control plane whose pods take a fixed time
// from creation to Ready (played by kwok with no jitter), runs the echelon
// binary as its own user bound to the generated RBAC, and rolls one group of
// 3 StatefulSets x 30 pods with maxUnavailable 5. The scenarios:
//
//   - single: one operator, at each --pod-start;
//   - sigterm, sigkill: two operators under leader election; once the leader
//     has deleted half the rollout's pods it gets SIGTERM (it releases its
//     Lease) or SIGKILL (its Lease must expire), at --failover-pod-start;
//   - scale: one operator and --scale-groups groups of 3 StatefulSets x
//     --scale-replicas pods, of which one rolls, at --scale-pod-start; every
//     group's zone-b and zone-c follow zone-a through ScalingPolicies, a third
//     of them with DelayedDownscales; besides the rollout, the start-up to a
//     warm cache, a heap profile summary, the CPU over --scale-idle with every
//     group idle, and an operator without cache transforms beside it
//     (scale.go). One run per size of --scale-groups (e.g. 100,300,1000);
//   - follow: no rollout; two StatefulSets follow a third through
//     ScalingPolicies, and the bench times --follow-changes changes of the
//     leader's replicas until both followers have them (median and p99);
//   - webhook: no pods; --webhook-clients HTTPS clients send AdmissionReviews
//     of /scale updates straight to the operator's no-downscale webhook at a
//     fixed offered rate (open loop): latency at --webhook-rate, each step of
//     --webhook-steps and the highest step with p99 <= 10ms, then the same
//     rate across a rotation of the self-signed certificate (webhook.go);
//   - eviction: a three-zone group with pods and StatefulSets guarded by
//     ScalingPolicies; --eviction-clients clients send dry-run evictions of
//     the group's pods and dry-run scales of the guarded StatefulSets through
//     the API server, which calls the eviction and the no-downscale webhooks
//     of one operator, at --eviction-rate each, in --eviction-rounds
//     alternating rounds: p50/p99/max of each, end to end and from the
//     webhook's own histogram, their ratio, and the decisions; then every pod
//     of one zone evicted for real at that rate (eviction.go);
//   - drain: the group's 3 x --replicas pods on 3 fake nodes per zone, one
//     `kubectl drain` per node, all 9 at once, timed to every pod Ready again
//     against the floor (--max-unavailable pods replaced at a time, zone by
//     zone), with the evictions admitted and refused and every moment two
//     zones were short, at --disruption-pod-start (drain.go);
//   - drain-zones: one node in each of two zones drained at once, judged by
//     the eviction webhook, against the same zones drained one after the
//     other by Kubernetes alone under a PodDisruptionBudget per
//     StatefulSet; fails on a breach or an eviction refused because the
//     budget's record stayed contended (drain_zones.go);
//   - analysis: a real Prometheus (`make prometheus`) scrapes an exporter the
//     bench sets; the time from a gate's metric turning bad to the rollback's
//     first pod deletion, at each --analysis-intervals, and the queries
//     --analysis-groups groups with a pending gate send per check interval
//     (analysis.go).
//
// Runs run one after the other in one invocation and print side by side. Each
// reports:
//
//   - setup: creating every object, createWorkers at a time, until every pod
//     is Ready; then the operators' start-up until every group is Complete, with
//     their CPU time and peak memory by then;
//   - wall time from the template change to the group's Complete, seen through
//     a watch on the group;
//   - the floor: the batches the rollout needs at least, times the median time
//     one batch of pods takes to be replaced with no operator at all, measured
//     on an identical StatefulSet of the same control plane;
//   - for a handover, the time from the signal to the new leader's first Lease
//     write and to its first pod deletion;
//   - the API requests per pod rolled of every operator process, by verb and
//     resource, from a proxy in front of each (which tells LIST and WATCH from
//     GET and keeps counting what a killed process sent);
//   - the operators' CPU time during the rollout and peak resident memory,
//     from /proc.
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
		opts = caseOptions{
			kinds:            allKinds,
			podStarts:        []time.Duration{time.Second, 5 * time.Second},
			failoverPodStart: time.Second,
			scalePodStart:    time.Second,
		}
		jsonPath       string
		floorRepeats   int
		replicas       int
		maxUnavailable int
		logLevel       string
		timeout        time.Duration
		cpuProfile     bool
	)
	flag.Func("scenarios", "Comma-separated scenarios to run: "+strings.Join(allKinds, ",")+" (default all).", func(v string) error {
		opts.kinds = strings.Split(v, ",")
		return nil
	})
	flag.Var((*durationList)(&opts.podStarts), "pod-start", "Comma-separated pod start times (creation to Ready) of the single-operator scenario, one control plane each.")
	flag.DurationVar(&opts.failoverPodStart, "failover-pod-start", opts.failoverPodStart, "Pod start time of the sigterm and sigkill scenarios.")
	flag.DurationVar(&opts.scalePodStart, "scale-pod-start", opts.scalePodStart, "Pod start time of the scale scenario.")
	bindScaleFlags(flag.CommandLine, &opts.scale)
	flag.IntVar(&opts.followChanges, "follow-changes", 50, "Changes of the leader's replicas the follow scenario times.")
	bindWebhookFlags(flag.CommandLine, &opts.webhook)
	flag.DurationVar(&opts.disruptionPodStart, "disruption-pod-start", time.Second, "Pod start time of the eviction and drain scenarios.")
	bindEvictionFlags(flag.CommandLine, &opts.eviction)
	bindDrainFlags(flag.CommandLine, &opts.drain)
	bindAnalysisFlags(flag.CommandLine, &opts.analysis)
	flag.IntVar(&opts.resize.claims, "resize-claims", 30, "Pods (each with one claim) per zone of the resize scenario.")
	flag.DurationVar(&opts.resize.delay, "resize-delay", 2*time.Second, "How long the stand-in storage driver takes to grow a claim in the resize scenario.")
	flag.StringVar(&jsonPath, "json", "", "Also write the results as JSON to this file.")
	flag.IntVar(&floorRepeats, "floor-repeats", 5, "How many batches to time with no operator; the floor uses their median.")
	flag.IntVar(&replicas, "replicas", 30, "Pods per StatefulSet.")
	flag.IntVar(&maxUnavailable, "max-unavailable", 5, "maxUnavailable of the RolloutGroup, and the size of a floor batch.")
	flag.StringVar(&logLevel, "operator-log-level", "info", "The operator's --log-level; debug explains every reconcile but costs CPU.")
	flag.DurationVar(&timeout, "timeout", 10*time.Minute, "Bound on each wait.")
	flag.BoolVar(&cpuProfile, "cpu-profile", false, "Save the leader's CPU profile over each rollout in the run's directory (cpu-<operator>.pprof), for go tool pprof.")
	flag.Parse()
	if floorRepeats < 1 || replicas < 1 || maxUnavailable < 1 || replicas < maxUnavailable || opts.followChanges < 1 {
		fmt.Fprintln(os.Stderr, "bench: --floor-repeats, --replicas, --max-unavailable and --follow-changes must be at least 1, and --replicas at least --max-unavailable")
		os.Exit(2)
	}
	if opts.scale.replicas < maxUnavailable {
		fmt.Fprintln(os.Stderr, "bench: --scale-replicas must be at least --max-unavailable")
		os.Exit(2)
	}
	if err := opts.webhook.validate(); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	for _, validate := range []func() error{opts.scale.validate, opts.eviction.validate, opts.drain.validate, opts.analysis.validate} {
		if err := validate(); err != nil {
			fmt.Fprintf(os.Stderr, "bench: %v\n", err)
			os.Exit(2)
		}
	}
	runs, err := cases(opts)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: --scenarios: %v\n", err)
		os.Exit(2)
	}
	// Only the bench's own lines on the terminal; the operator and the
	// components log to files.
	ctrllog.SetLogger(logr.Discard())
	klog.SetLogger(logr.Discard())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s := scenario{members: len(memberNames), replicas: int32(replicas), maxUnavailable: int32(maxUnavailable)}
	if err := bench(ctx, runs, jsonPath, floorRepeats, opts, s, logLevel, timeout, cpuProfile); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func bench(ctx context.Context, runs []benchCase, jsonPath string, floorRepeats int, opts caseOptions, s scenario, logLevel string, timeout time.Duration, cpuProfile bool) error {
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

	var (
		results    []*result
		scales     []*result
		follows    []*followResult
		webhooks   []*webhookResult
		evicts     []*evictionResult
		drains     []*drainResult
		drainZones []*drainZonesResult
		analyses   []*analysisResult
		resizes    []*resizeResult
		failed     []error
	)
	for _, c := range runs {
		cfg := runConfig{
			benchCase:       c,
			scenario:        c.shape(s),
			scale:           opts.scale,
			floorRepeats:    floorRepeats,
			binary:          binary,
			workDir:         workDir,
			operatorLogDir:  workDir,
			operatorLogArgs: []string{"--log-level=" + logLevel},
			timeout:         timeout,
			progress:        os.Stdout,
			cpuProfile:      cpuProfile,
		}
		if c.kind == kindFollow {
			fmt.Printf("Measuring %s:\n", c.title(s))
			f, err := runFollow(ctx, cfg, opts.followChanges)
			if err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", c.slug(), err))
				fmt.Printf("  [%s] failed: %v\n", c.slug(), err)
				continue
			}
			follows = append(follows, f)
			continue
		}
		if c.kind == kindWebhook {
			fmt.Printf("Measuring the %s:\n", c.title(s))
			wr, err := runWebhook(ctx, cfg, opts.webhook)
			if err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", c.slug(), err))
				fmt.Printf("  [%s] failed: %v\n", c.slug(), err)
				continue
			}
			webhooks = append(webhooks, wr)
			continue
		}
		if c.kind == kindEviction {
			fmt.Printf("Measuring the %s, pod start %s:\n", c.title(s), c.podStart)
			er, err := runEviction(ctx, cfg, opts.eviction)
			if err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", c.slug(), err))
				fmt.Printf("  [%s] failed: %v\n", c.slug(), err)
				continue
			}
			evicts = append(evicts, er)
			continue
		}
		if c.kind == kindDrain {
			fmt.Printf("Measuring a %s, pod start %s:\n", c.title(s), c.podStart)
			dr, err := runDrain(ctx, cfg, opts.drain)
			if err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", c.slug(), err))
				fmt.Printf("  [%s] failed: %v\n", c.slug(), err)
				continue
			}
			drains = append(drains, dr)
			if len(dr.Breaches) > 0 {
				// The figures are printed, and the bench fails.
				failed = append(failed, fmt.Errorf("%s: %d breaches of the guarantees: %v", c.slug(), len(dr.Breaches), dr.Breaches))
			}
			continue
		}
		if c.kind == kindDrainZones {
			fmt.Printf("Measuring a %s, pod start %s:\n", c.title(s), c.podStart)
			dz, err := runDrainZones(ctx, cfg, opts.drain)
			if err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", c.slug(), err))
				fmt.Printf("  [%s] failed: %v\n", c.slug(), err)
				continue
			}
			drainZones = append(drainZones, dz)
			// The figures are printed, and the bench fails.
			if n := len(dz.AtOnce.Breaches) + len(dz.Sequential.Breaches); n > 0 {
				failed = append(failed, fmt.Errorf("%s: %d breaches of the guarantees: %v %v", c.slug(), n, dz.Sequential.Breaches, dz.AtOnce.Breaches))
			}
			if dz.Contended > 0 {
				failed = append(failed, fmt.Errorf("%s: %d evictions answered 429 because the budget's record stayed contended", c.slug(), dz.Contended))
			}
			continue
		}
		if c.kind == kindResize {
			fmt.Printf("Measuring %s:\n", c.title(s))
			rr, err := runResize(ctx, cfg, opts.resize)
			if err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", c.slug(), err))
				fmt.Printf("  [%s] failed: %v\n", c.slug(), err)
				continue
			}
			resizes = append(resizes, rr)
			if rr.PodsDeleted > 0 {
				failed = append(failed, fmt.Errorf("%s: %d pods deleted by an online resize", c.slug(), rr.PodsDeleted))
			}
			continue
		}
		if c.kind == kindAnalysis {
			fmt.Printf("Measuring %s:\n", c.title(s))
			ar, err := runAnalysis(ctx, cfg, opts.analysis)
			if err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", c.slug(), err))
				fmt.Printf("  [%s] failed: %v\n", c.slug(), err)
				continue
			}
			analyses = append(analyses, ar)
			continue
		}
		fmt.Printf("Measuring %s with a pod start of %s:\n", c.title(s), c.podStart)
		r, err := run(ctx, cfg)
		if err != nil {
			// The other runs still tell something; say what failed at the end.
			failed = append(failed, fmt.Errorf("%s: %w", c.slug(), err))
			fmt.Printf("  [%s] failed: %v\n", c.slug(), err)
			continue
		}
		if r.Scale != nil {
			scales = append(scales, r)
			continue
		}
		results = append(results, r)
	}
	if len(results) > 0 {
		printTable(os.Stdout, s, results)
	}
	printScale(os.Stdout, s, opts.scale, scales)
	printFollow(os.Stdout, follows)
	printWebhook(os.Stdout, webhooks)
	printEviction(os.Stdout, evicts)
	printDrain(os.Stdout, drains)
	printDrainZones(os.Stdout, drainZones)
	printAnalysis(os.Stdout, analyses)
	printResize(os.Stdout, resizes)
	fmt.Printf("\nOperator logs and request logs: %s (took %s in all)\n", workDir, since(began))
	if jsonPath != "" && len(results)+len(scales)+len(follows)+len(webhooks)+len(evicts)+len(drains)+len(drainZones)+len(resizes) > 0 {
		if err := writeJSON(jsonPath, s, report{Results: results, Scale: scales, Follow: follows, Webhook: webhooks, Eviction: evicts, Drain: drains, DrainZones: drainZones, Resize: resizes}); err != nil {
			return err
		}
		fmt.Printf("Results written to %s\n", jsonPath)
	}
	if jsonPath != "" && len(analyses) > 0 {
		path, err := writeAnalysisJSON(jsonPath, analyses)
		if err != nil {
			return err
		}
		fmt.Printf("Analysis results written to %s\n", path)
	}
	return errors.Join(failed...)
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
