// Package podname reads what a StatefulSet pod's name says: its ordinal.
package podname

import (
	"strconv"
	"strings"
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
