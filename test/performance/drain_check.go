/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/metrics"
)

// What the drain scenario judges, apart from the control plane: where the
// group's pods run, what the webhook and the kubectl drains said, and
// whether two zones were ever short at once.

// ownerOf is the member a pod of the group belongs to, and its ordinal when
// it is one of the member's wanted pods; "" for any other pod.
func ownerOf(pod string, s scenario) (string, int) {
	for _, m := range memberNames[:s.members] {
		if rest, ok := strings.CutPrefix(pod, m+"-"); ok {
			n := ordinal(pod)
			if fmt.Sprint(n) == rest && n < int(s.replicas) {
				return m, n
			}
		}
	}
	return "", -1
}

// onNodes keeps of zoneOf the nodes named.
func onNodes(zoneOf map[string]string, nodes []string) map[string]string {
	out := map[string]string{}
	for _, n := range nodes {
		out[n] = zoneOf[n]
	}
	return out
}

// checkPlacement counts the group's pods (where: pod to node) on each of
// allowed's nodes, and fails when a pod runs on a node that allowed does
// not hold or that is in another zone (allowed: node to member).
func checkPlacement(where, allowed map[string]string, s scenario) (map[string]int, error) {
	perNode := map[string]int{}
	for n := range allowed {
		perNode[n] = 0
	}
	for _, pod := range slices.Sorted(maps.Keys(where)) {
		node := where[pod]
		owner, _ := ownerOf(pod, s)
		zone, ok := allowed[node]
		switch {
		case node == "":
			return nil, fmt.Errorf("pod %s is not scheduled", pod)
		case !ok:
			return nil, fmt.Errorf("pod %s runs on node %s, which it should not", pod, node)
		case zone != owner:
			return nil, fmt.Errorf("pod %s runs on node %s, in the zone of %s", pod, node, zone)
		}
		perNode[node]++
	}
	return perNode, nil
}

// byDecision sums decision/reason counts by decision: admitted (allowed),
// refused (denied) and errors (error, e.g. a hold contended).
func byDecision(d map[string]float64) (admitted, refused, errs int) {
	for k, v := range d {
		decision, _, _ := strings.Cut(k, "/")
		switch decision {
		case metrics.DecisionAllowed:
			admitted += int(v)
		case metrics.DecisionDenied:
			refused += int(v)
		default:
			errs += int(v)
		}
	}
	return admitted, refused, errs
}

// drainRestartMarker starts the line the bench adds to a kubectl drain's
// log when it runs the drain again.
const drainRestartMarker = "--- bench:"

// drainLog is what `kubectl drain` printed.
type drainLog struct {
	// evicted pods ("pod/x evicted").
	evicted int
	// retries are refused evictions it retried ("error when evicting ...
	// (will retry after 5s)").
	retries int
	// evictionErrors are evictions answered with an error other than 429,
	// on which kubectl gives up (the webhook's call timed out, or it could
	// not judge): "error when evicting ..." without "will retry after".
	evictionErrors int
	// firstFailure is the first error that ended a drain ("error: unable to
	// drain node ..."), cut short.
	firstFailure string
}

func drainOutput(out string) drainLog {
	var l drainLog
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		switch {
		case strings.HasPrefix(line, "pod/") && strings.HasSuffix(line, " evicted"):
			l.evicted++
		case strings.HasPrefix(line, "error when evicting") && strings.Contains(line, "will retry after"):
			l.retries++
		case strings.HasPrefix(line, "error when evicting"):
			l.evictionErrors++
		case strings.HasPrefix(line, "error: ") && l.firstFailure == "":
			l.firstFailure = truncate([]byte(line), 400)
		}
	}
	return l
}

// zonesShort lists the zones that have a wanted pod missing, terminating or
// not Ready, each with its first such pod, e.g. "zone-a (zone-a-3
// terminating)".
func zonesShort(pods map[string]*corev1.Pod, s scenario) []string {
	var out []string
	for _, m := range memberNames[:s.members] {
		for i := range int(s.replicas) {
			name := fmt.Sprintf("%s-%d", m, i)
			pod := pods[name]
			why := ""
			switch {
			case pod == nil:
				why = "missing"
			case pod.DeletionTimestamp != nil:
				why = "terminating"
			case !kube.PodReady(pod):
				why = "not Ready"
			}
			if why != "" {
				out = append(out, fmt.Sprintf("%s (%s %s)", m, name, why))
				break
			}
		}
	}
	return out
}

// shortStretch is a stretch of time in which two zones or more were short.
type shortStretch struct {
	From    time.Time `json:"from"`
	Seconds float64   `json:"seconds"`
	// Zones are those short when it began, each with its first short pod.
	Zones []string `json:"zones"`
}

// shortZones follows the group's pods through every event of one watch,
// which shows them in the order the API server changed them, and records
// each stretch of time in which two zones or more were short at once. It
// judges nothing until it has seen every zone whole: a watch's first events
// add the pods one by one.
type shortZones struct {
	s scenario

	mu    sync.Mutex
	pods  map[string]*corev1.Pod
	armed bool
	open  *shortStretch
	done  []shortStretch
}

func newShortZones(s scenario) *shortZones {
	return &shortZones{s: s, pods: map[string]*corev1.Pod{}}
}

func (z *shortZones) handler() toolscache.ResourceEventHandler {
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { z.observe(obj, false, time.Now()) },
		UpdateFunc: func(_, obj any) { z.observe(obj, false, time.Now()) },
		DeleteFunc: func(obj any) { z.observe(obj, true, time.Now()) },
	}
}

func (z *shortZones) observe(obj any, deleted bool, now time.Time) {
	pod, ok := podOf(obj)
	if !ok {
		return
	}
	if owner, _ := ownerOf(pod.Name, z.s); owner == "" {
		return
	}
	z.mu.Lock()
	defer z.mu.Unlock()
	if deleted {
		if prev := z.pods[pod.Name]; prev != nil && prev.UID == pod.UID {
			delete(z.pods, pod.Name)
		}
	} else {
		z.pods[pod.Name] = pod
	}
	short := zonesShort(z.pods, z.s)
	if !z.armed {
		z.armed = len(short) == 0
		return
	}
	switch {
	case len(short) >= 2 && z.open == nil:
		z.open = &shortStretch{From: now, Zones: short}
	case len(short) < 2 && z.open != nil:
		z.open.Seconds = now.Sub(z.open.From).Seconds()
		z.done = append(z.done, *z.open)
		z.open = nil
	}
}

// stretches are the stretches seen so far, one still open ending now.
func (z *shortZones) stretches(now time.Time) []shortStretch {
	z.mu.Lock()
	defer z.mu.Unlock()
	out := slices.Clone(z.done)
	if z.open != nil {
		open := *z.open
		open.Seconds = now.Sub(open.From).Seconds()
		out = append(out, open)
	}
	return out
}
