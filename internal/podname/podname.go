// Package podname reads what a StatefulSet pod's name says, its ordinal, and
// says which ordinals a StatefulSet keeps and which a downscale removes.
package podname

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
)

// Ordinal returns the ordinal of a StatefulSet pod from its name
// ("<set>-<ordinal>"), or false when the name does not belong to the set.
func Ordinal(set, pod string) (int, bool) {
	suffix, found := strings.CutPrefix(pod, set+"-")
	if !found || suffix == "" {
		return 0, false
	}
	n, err := strconv.Atoi(suffix)
	if err != nil || n < 0 || strconv.Itoa(n) != suffix {
		return 0, false
	}
	return n, true
}

// Start is the first ordinal of sts's pods: spec.ordinals.start, or 0.
func Start(sts *appsv1.StatefulSet) int32 {
	if sts.Spec.Ordinals == nil {
		return 0
	}
	return sts.Spec.Ordinals.Start
}

// Kept is the half-open range [lo, hi) of the ordinals a StatefulSet whose
// ordinals begin at start has at the given replicas.
func Kept(start, replicas int32) (lo, hi int) {
	return int(start), int(start) + int(max(replicas, 0))
}

// Removed is the half-open range [lo, hi) of the ordinals a StatefulSet whose
// ordinals begin at start loses when its replicas go from from down to to:
// the highest ones. It is empty (lo == hi) when to is not below from.
func Removed(start, from, to int32) (lo, hi int) {
	_, hi = Kept(start, from)
	_, lo = Kept(start, min(to, from))
	return lo, hi
}
