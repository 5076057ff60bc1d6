/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/test/nswatch"
)

// The follow scenario times how fast ScalingPolicies make follower zones
// track their leader: zone-b and zone-c follow zone-a (replicasFrom.leader, no
// zone delay, no RolloutGroup), and the bench changes zone-a's spec.replicas
// back and forth between followLow and followHigh.
const (
	followLow  = 2
	followHigh = 3
	// targetFollowP99 is the target for the 99th percentile.
	targetFollowP99 = 200 * time.Millisecond
	// grafanaReconcileInterval is the Grafana rollout-operator's reconcile
	// interval: it applies a leader's replicas to its followers on that tick.
	grafanaReconcileInterval = 5 * time.Second
)

// followers are the zones that follow memberNames[0].
var followers = memberNames[1:]

// followResult is what the follow scenario measured. Durations are in seconds.
type followResult struct {
	Changes   int `json:"changes"`
	Followers int `json:"followers"`
	// LatencySeconds runs, for each change, from sending the leader's patch to
	// the bench's watch delivering the last follower's new spec.replicas.
	LatencySeconds []float64 `json:"latencySeconds"`
	MedianSeconds  float64   `json:"medianSeconds"`
	P90Seconds     float64   `json:"p90Seconds"`
	P99Seconds     float64   `json:"p99Seconds"`
	MaxSeconds     float64   `json:"maxSeconds"`
	UpMedianSecs   float64   `json:"upscaleMedianSeconds"`
	DownMedianSecs float64   `json:"downscaleMedianSeconds"`
	// RequestsByVerb are the operator's requests over all changes, keyed with
	// the verbs of RBAC.
	RequestsByVerb  map[string]int `json:"operatorRequestsByVerb"`
	WritesPerChange float64        `json:"operatorWritesPerChange"`
	OperatorLogs    []string       `json:"operatorLogs"`
}

// runFollow measures the follow scenario on a fresh control plane whose pods
// are Ready as soon as they are scheduled: what it times is the operator, not
// pod start-up. Each change waits for the previous one to settle (every pod
// there and Ready, every policy Stable), so the samples do not overlap.
func runFollow(ctx context.Context, cfg runConfig, changes int) (_ *followResult, retErr error) {
	say := cfg.say
	began := time.Now()
	cp, ns, stop, err := startControlPlane(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer stop(&retErr)
	say("control plane up in %s", since(began))

	c := cp.Client()
	nw, err := nswatch.Start(ctx, cp.Config(), operator.NewScheme(), ns, &appsv1.StatefulSet{}, &corev1.Pod{}, &v1alpha1.ScalingPolicy{})
	if err != nil {
		return nil, err
	}
	defer nw.Close()
	w := &watcher{nw}
	seen := &replicasSeen{}
	if err := w.AddHandler(ctx, &appsv1.StatefulSet{}, seen.handler()); err != nil {
		return nil, err
	}

	for _, name := range memberNames {
		if err := c.Create(ctx, statefulSet(ns, name, followLow, oldImage)); err != nil {
			return nil, fmt.Errorf("create StatefulSet %s: %w", name, err)
		}
	}
	for _, name := range followers {
		sp := &v1alpha1.ScalingPolicy{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: v1alpha1.ScalingPolicySpec{
				TargetRef:    v1alpha1.PolicyTargetReference{Name: name},
				ReplicasFrom: &v1alpha1.ReplicasSource{Leader: &v1alpha1.LeaderReference{Name: memberNames[0]}},
			},
		}
		if err := c.Create(ctx, sp); err != nil {
			return nil, fmt.Errorf("create ScalingPolicy %s: %w", name, err)
		}
	}
	user, err := cp.NewOperatorUser(ctx, "echelon-operator")
	if err != nil {
		return nil, err
	}
	if err := cp.GrantLeaderElection(ctx, user.Name, ns); err != nil {
		return nil, err
	}
	ops, err := startOperators(ctx, cfg, user, ns)
	defer func() { retErr = errors.Join(retErr, ops.stop()) }()
	if err != nil {
		return nil, err
	}
	res := &followResult{Changes: changes, Followers: len(followers)}
	for _, in := range ops {
		res.OperatorLogs = append(res.OperatorLogs, in.LogFile)
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "every pod Ready and every policy Stable", followSettled(w, ns, followLow))
	}); err != nil {
		return nil, fmt.Errorf("%w\n%s", err, operatorLogs(ops))
	}
	say("%d StatefulSets of %d pods, %d following %s, operator started in %s", len(memberNames), followLow, len(followers), memberNames[0], since(began))

	countsBefore := ops.counts()
	var up, down []time.Duration
	for i := range changes {
		replicas := int32(followHigh)
		if i%2 == 1 {
			replicas = followLow
		}
		var latency time.Duration
		err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
			sent := time.Now()
			patch := fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas)
			leader := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: memberNames[0]}}
			if err := c.Patch(ctx, leader, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				return fmt.Errorf("scale %s to %d: %w", memberNames[0], replicas, err)
			}
			if err := w.waitUntil(ctx, fmt.Sprintf("the followers at %d replicas", replicas), func(context.Context) (bool, error) {
				var ok bool
				latency, ok = seen.allSince(followers, replicas, sent)
				return ok, nil
			}); err != nil {
				return err
			}
			return w.waitUntil(ctx, "every pod Ready and every policy Stable", followSettled(w, ns, replicas))
		})
		if err != nil {
			return nil, fmt.Errorf("change %d: %w\n%s", i+1, err, operatorLogs(ops))
		}
		res.LatencySeconds = append(res.LatencySeconds, latency.Seconds())
		if replicas == followHigh {
			up = append(up, latency)
		} else {
			down = append(down, latency)
		}
	}
	all := make([]time.Duration, len(res.LatencySeconds))
	for i, s := range res.LatencySeconds {
		all[i] = time.Duration(s * float64(time.Second))
	}
	res.MedianSeconds = median(all).Seconds()
	res.P90Seconds = percentile(all, 0.90).Seconds()
	res.P99Seconds = percentile(all, 0.99).Seconds()
	res.MaxSeconds = slices.Max(all).Seconds()
	res.UpMedianSecs, res.DownMedianSecs = median(up).Seconds(), median(down).Seconds()
	res.RequestsByVerb = diffCounts(ops.counts(), countsBefore)
	_, writes, _ := tally(res.RequestsByVerb)
	res.WritesPerChange = float64(writes) / float64(changes)
	say("%d changes: median %s, p99 %s", changes, seconds(res.MedianSeconds), seconds(res.P99Seconds))
	return res, nil
}

// followSettled holds when every StatefulSet wants replicas and has them all
// Ready, and every follower's policy reports Stable for its current spec.
func followSettled(w client.Reader, ns string, replicas int32) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		for _, name := range memberNames {
			sts, err := statefulSetAt(ctx, w, ns, name, oldImage)
			if sts == nil || err != nil {
				return false, err
			}
			if ptr.Deref(sts.Spec.Replicas, 1) != replicas || sts.Status.Replicas != replicas || sts.Status.ReadyReplicas != replicas {
				return false, nil
			}
		}
		for _, name := range followers {
			sp := &v1alpha1.ScalingPolicy{}
			if err := w.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sp); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if sp.Status.ObservedGeneration != sp.Generation || sp.Status.Phase != v1alpha1.ScalingPhaseStable || sp.Status.Replicas != replicas {
				return false, nil
			}
		}
		return true, nil
	}
}

// replicasSeen records when the bench's watch delivered each spec.replicas of
// each StatefulSet: the moment the bench learns of a follower's patch, with no
// wait for a waiter to wake.
type replicasSeen struct {
	mu     sync.Mutex
	events []replicasEvent
}

type replicasEvent struct {
	at       time.Time
	name     string
	replicas int32
}

func (s *replicasSeen) handler() toolscache.ResourceEventHandler {
	record := func(obj any) {
		at := time.Now()
		if sts, ok := obj.(*appsv1.StatefulSet); ok {
			s.mu.Lock()
			s.events = append(s.events, replicasEvent{at: at, name: sts.Name, replicas: ptr.Deref(sts.Spec.Replicas, 1)})
			s.mu.Unlock()
		}
	}
	return toolscache.ResourceEventHandlerFuncs{AddFunc: record, UpdateFunc: func(_, obj any) { record(obj) }}
}

// allSince reports whether every named StatefulSet was seen at replicas after
// since, and how long after since the last of them first was.
func (s *replicasSeen) allSince(names []string, replicas int32, since time.Time) (time.Duration, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var last time.Duration
	for _, name := range names {
		i := slices.IndexFunc(s.events, func(e replicasEvent) bool {
			return e.name == name && e.replicas == replicas && e.at.After(since)
		})
		if i < 0 {
			return 0, false
		}
		last = max(last, s.events[i].at.Sub(since))
	}
	return last, true
}

// percentile is the nearest-rank percentile p (0 < p <= 1) of a non-empty
// list: of 50 samples, p99 is the largest.
func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p * float64(len(s))))
	return s[max(rank, 1)-1]
}

// printFollow prints the follow scenario's figures.
func printFollow(out io.Writer, results []*followResult) {
	for _, r := range results {
		fmt.Fprintf(out, "\nLeader following: %d changes of %s's spec.replicas (%d <-> %d), %d followers (%v), no zone delay, no RolloutGroup,\n"+
			"one operator; each sample runs from sending the leader's patch to the bench's watch delivering the last follower's new spec.replicas.\n\n",
			r.Changes, memberNames[0], followLow, followHigh, r.Followers, followers)
		tw := tabwriter.NewWriter(out, 0, 0, 3, ' ', 0)
		row := func(label, value string) { fmt.Fprintf(tw, "%s\t%s\n", label, value) }
		row("median", seconds(r.MedianSeconds).String())
		row("p90", seconds(r.P90Seconds).String())
		row(fmt.Sprintf("p99 (target < %s)", targetFollowP99), verdict(seconds(r.P99Seconds).String(), seconds(r.P99Seconds) < targetFollowP99))
		row("max", seconds(r.MaxSeconds).String())
		row("median of upscales / of downscales", fmt.Sprintf("%s / %s", seconds(r.UpMedianSecs), seconds(r.DownMedianSecs)))
		row("Grafana rollout-operator: one reconcile interval", fmt.Sprintf("%s (a change waits up to that long)", grafanaReconcileInterval))
		row("operator writes per change", fmt.Sprintf("%.2f", r.WritesPerChange))
		for _, key := range verbs([]*result{{RequestsByVerb: r.RequestsByVerb}}) {
			if !isRead(methodOf(key)) && !isLeaseWrite(key) {
				row("  "+strings.ToLower(key)+" per change", fmt.Sprintf("%.2f", float64(r.RequestsByVerb[key])/float64(r.Changes)))
			}
		}
		_ = tw.Flush()
	}
}
