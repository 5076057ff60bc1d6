/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"fmt"
	"slices"
	"strings"
	"syscall"
	"time"
)

// memberNames are the StatefulSets of the rolling group, in rollout order.
var memberNames = []string{"zone-a", "zone-b", "zone-c"}

// scenario is the shape of every group of a run: the rolling one and the idle ones.
type scenario struct {
	members        int
	replicas       int32
	maxUnavailable int32
}

func (s scenario) pods() int { return s.members * int(s.replicas) }

// batches is how many batches of maxUnavailable pods the rollout needs at least.
func (s scenario) batches() int {
	perMember := (int(s.replicas) + int(s.maxUnavailable) - 1) / int(s.maxUnavailable)
	return s.members * perMember
}

// floor is the least time the group's pods take to be replaced zone by zone
// at its budget, a rollout's or a drain's: batches of maxUnavailable pods one
// after the other, each taking batch, the time one batch of pods takes to be
// replaced with no operator at all.
func (s scenario) floor(batch time.Duration) time.Duration {
	return time.Duration(s.batches()) * batch
}

// deletedAfterBatches is how many pods the first n batches of a rollout at the
// floor delete: batches never span two members, so the last batch of a member
// may be short.
func (s scenario) deletedAfterBatches(n int) int {
	deleted := 0
	for range s.members {
		for left := int(s.replicas); left > 0; left -= int(s.maxUnavailable) {
			if n == 0 {
				return deleted
			}
			deleted += min(left, int(s.maxUnavailable))
			n--
		}
	}
	return deleted
}

// A benchCase is one measured run, on a control plane of its own.
type benchCase struct {
	kind     string
	podStart time.Duration
	// operators is 1, or 2 under leader election.
	operators int
	// handover, if set, is the signal the leader gets mid-rollout.
	handover syscall.Signal
	// idleGroups are groups of the same shape as the rolling one that do not roll.
	idleGroups int
	// apiServerOnly starts etcd and kube-apiserver and nothing else.
	apiServerOnly bool
	// nodes is the number of fake nodes; 0 means the default, nodes.
	nodes int
	// rollingUpdate makes the groups' members RollingUpdate StatefulSets,
	// rolled by their partition.
	rollingUpdate bool
	// podsPerStatefulSet, if set, replaces --replicas.
	podsPerStatefulSet int32
	// followers gives every group's followers ScalingPolicies and a third of
	// them DelayedDownscales (scale.go).
	followers bool
	// profile serves the operators' pprof, and measures the start-up to a
	// warm cache, the heap, the idle CPU and an operator without cache
	// transforms (scale.go).
	profile bool
}

// The kinds of run `--scenarios` selects from.
const (
	kindSingle = "single"
	// kindPartition is single with RollingUpdate members, rolled by their
	// partition (their own rollingUpdate.maxUnavailable set to the group's),
	// at the first --pod-start, beside the OnDelete figure.
	kindPartition = "partition"
	kindSIGTERM   = "sigterm"
	kindSIGKILL   = "sigkill"
	kindScale     = "scale"
	// kindFollow times ScalingPolicy followers tracking a leader (follow.go);
	// it rolls nothing.
	kindFollow = "follow"
	// kindWebhook loads the no-downscale admission webhook (webhook.go); it
	// needs no pods, so its control plane is etcd and kube-apiserver alone.
	kindWebhook = "webhook"
	// kindEviction loads the eviction webhook through the API server with
	// dry-run evictions, beside the no-downscale webhook at the same rate,
	// then evicts one zone's pods for real (eviction.go).
	kindEviction = "eviction"
	// kindDrain drains every node of a three-zone group at once with
	// `kubectl drain` and times it against the floor (drain.go).
	kindDrain = "drain"
	// kindDrainZones drains one node in each of two zones at once under
	// the group's budget, against the same zones drained one after the other
	// by Kubernetes alone under a PodDisruptionBudget per StatefulSet
	// (drain_zones.go).
	kindDrainZones = "drain-zones"
	// kindAnalysis times metric-gated rollouts against a real Prometheus
	// (analysis.go): a gate's failure to the rollback's first deletion, and
	// the queries of many pending gates.
	kindAnalysis = "analysis"
	// kindResize grows the claims of three zones of --resize-claims pods
	// with the stand-in storage driver and times it against the driver's
	// delays (resize.go).
	kindResize = "resize"
)

var allKinds = []string{kindSingle, kindPartition, kindSIGTERM, kindSIGKILL, kindScale, kindFollow, kindWebhook, kindEviction, kindDrain, kindDrainZones, kindAnalysis, kindResize}

// caseOptions are the flags that decide the cases of an invocation.
type caseOptions struct {
	kinds            []string
	podStarts        []time.Duration // of the single-operator run
	failoverPodStart time.Duration
	scalePodStart    time.Duration
	scale            scaleOptions
	followChanges    int // changes of the leader the follow scenario times
	webhook          webhookOptions
	// disruptionPodStart is the pod start time of the eviction and drain
	// scenarios.
	disruptionPodStart time.Duration
	eviction           evictionOptions
	drain              drainOptions
	analysis           analysisOptions
	resize             resizeOptions
}

// cases lists the runs of an invocation in the order of allKinds, so that
// scenarios measured side by side print side by side.
func cases(o caseOptions) ([]benchCase, error) {
	for _, k := range o.kinds {
		if !slices.Contains(allKinds, k) {
			return nil, fmt.Errorf("unknown scenario %q; known: %s", k, strings.Join(allKinds, ","))
		}
	}
	var out []benchCase
	for _, k := range allKinds {
		if !slices.Contains(o.kinds, k) {
			continue
		}
		switch k {
		case kindSingle:
			for _, d := range o.podStarts {
				out = append(out, benchCase{kind: k, podStart: d, operators: 1})
			}
		case kindPartition:
			out = append(out, benchCase{kind: k, podStart: o.podStarts[0], operators: 1, rollingUpdate: true})
		case kindSIGTERM:
			out = append(out, benchCase{kind: k, podStart: o.failoverPodStart, operators: 2, handover: syscall.SIGTERM})
		case kindSIGKILL:
			out = append(out, benchCase{kind: k, podStart: o.failoverPodStart, operators: 2, handover: syscall.SIGKILL})
		case kindScale:
			for _, g := range slices.Sorted(slices.Values(o.scale.groups)) {
				out = append(out, benchCase{kind: k, podStart: o.scalePodStart, operators: 1, idleGroups: g - 1,
					podsPerStatefulSet: int32(o.scale.replicas), followers: true, profile: true})
			}
		case kindFollow:
			out = append(out, benchCase{kind: k, operators: 1})
		case kindWebhook:
			out = append(out, benchCase{kind: k, operators: 1, apiServerOnly: true})
		case kindEviction:
			out = append(out, benchCase{kind: k, podStart: o.disruptionPodStart, operators: 1})
		case kindDrain:
			out = append(out, benchCase{kind: k, podStart: o.disruptionPodStart, operators: 1, nodes: drainNodes})
		case kindDrainZones:
			out = append(out, benchCase{kind: k, podStart: o.disruptionPodStart, operators: 1, nodes: drainNodes})
		case kindAnalysis:
			out = append(out, benchCase{kind: k, operators: 1})
		case kindResize:
			out = append(out, benchCase{kind: k, operators: 1})
		}
	}
	return out, nil
}

// groups is how many RolloutGroups the run holds.
func (c benchCase) groups() int { return 1 + c.idleGroups }

// shape is the scenario of the case's groups: s, with the case's own
// replicas if it has them.
func (c benchCase) shape(s scenario) scenario {
	if c.podsPerStatefulSet > 0 {
		s.replicas = c.podsPerStatefulSet
	}
	return s
}

// slug names the run's files.
func (c benchCase) slug() string {
	if c.kind == kindFollow || c.kind == kindWebhook || c.kind == kindEviction || c.kind == kindDrain || c.kind == kindDrainZones || c.kind == kindAnalysis || c.kind == kindResize {
		return c.kind
	}
	if c.kind == kindScale {
		return fmt.Sprintf("%s-%d-groups-pod-start-%s", c.kind, c.groups(), c.podStart)
	}
	return fmt.Sprintf("%s-pod-start-%s", c.kind, c.podStart)
}

// title heads the run's column.
func (c benchCase) title(s scenario) string {
	switch {
	case c.handover != 0:
		return fmt.Sprintf("2 operators, %s handover", signalName(c.handover))
	case c.idleGroups > 0:
		return fmt.Sprintf("%d groups, %d pods", c.groups(), c.groups()*c.shape(s).pods())
	case c.kind == kindFollow:
		return fmt.Sprintf("%d zones following %s", len(followers), memberNames[0])
	case c.kind == kindWebhook:
		return "no-downscale webhook, 1 operator"
	case c.kind == kindEviction:
		return "eviction and no-downscale webhooks through the API server, 1 operator"
	case c.kind == kindDrain:
		return fmt.Sprintf("kubectl drain of %d nodes in %d zones at once, 1 operator", drainNodes/2, len(memberNames))
	case c.kind == kindDrainZones:
		return fmt.Sprintf("kubectl drain of a node in each of %d zones at once, 1 operator, against one after the other with PodDisruptionBudgets", len(drainedZones))
	case c.kind == kindAnalysis:
		return "analysis gates against Prometheus, 1 operator"
	case c.kind == kindResize:
		return fmt.Sprintf("a volume resize of %d zones, 1 operator", len(memberNames))
	case c.rollingUpdate:
		return "1 operator, RollingUpdate members (partition)"
	default:
		return "1 operator"
	}
}

func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	default:
		return sig.String()
	}
}
