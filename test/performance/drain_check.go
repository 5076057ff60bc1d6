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

	"github.com/echelon-operator/echelon/internal/metrics"
)

// What the drain scenario judges, apart from the control plane: where the
// group's pods run, and what the webhook and the kubectl drains said.

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
