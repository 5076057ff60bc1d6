package rollout

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/podname"
)

// A leaked pod is a pod of an OnDelete member that came back on the update
// revision, during a rollout that has not reached it, although Echelon did
// not remove it: a node drain, an eviction, a crash or a person deleted the
// pod, and the StatefulSet controller, which always recreates an OnDelete
// pod from the update revision, brought it back there. It is drift a user
// must see, most of all while a rollout is paused, held by a step or a failed
// gate.
//
// What tells a leak apart must outlive the operator, so it lives in the
// group's status (v1alpha1.LeakRecord), one record per member and update
// revision: when the record began (only pods created since can have leaked),
// the ordinals the member wanted then (a scale-up adds pods on the update
// revision: not leaks), the ordinals Echelon removed, written before it
// removes them, and the ordinals already counted. Ordinals are kept as ranges
// ("0-3,7"), so the record stays small.
//
// A RollingUpdate member cannot leak: the StatefulSet controller recreates a
// pod below the partition on its current revision. Its record is dropped.

// maxOrdinalsText bounds a record's ordinal lists, as the API does.
const maxOrdinalsText = 1024

// FormatOrdinals writes ordinals as sorted ranges: "0-3,7". When that is
// longer than maxOrdinalsText, the single range from the lowest to the
// highest is written instead, which holds them all and more: a record that
// overflows may miss a leak in its gaps, never count one that is not.
func FormatOrdinals(ords sets.Set[int]) string {
	sorted := sets.List(ords)
	var parts []string
	for i := 0; i < len(sorted); {
		j := i
		for j+1 < len(sorted) && sorted[j+1] == sorted[j]+1 {
			j++
		}
		if i == j {
			parts = append(parts, strconv.Itoa(sorted[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", sorted[i], sorted[j]))
		}
		i = j + 1
	}
	s := strings.Join(parts, ",")
	if len(s) > maxOrdinalsText {
		s = fmt.Sprintf("%d-%d", sorted[0], sorted[len(sorted)-1])
	}
	return s
}

// ParseOrdinals reads what FormatOrdinals writes.
func ParseOrdinals(s string) (sets.Set[int], error) {
	out := sets.New[int]()
	if s == "" {
		return out, nil
	}
	for part := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		from, err := strconv.Atoi(lo)
		if err != nil || from < 0 {
			return nil, fmt.Errorf("ordinals %q: bad %q", s, part)
		}
		to := from
		if isRange {
			if to, err = strconv.Atoi(hi); err != nil || to < from || to-from > 1<<20 {
				return nil, fmt.Errorf("ordinals %q: bad range %q", s, part)
			}
		}
		for o := from; o <= to; o++ {
			out.Insert(o)
		}
	}
	return out, nil
}

// mustOrdinals is ParseOrdinals for a record Echelon wrote; text it cannot
// read (edited by hand) counts as no ordinal.
func mustOrdinals(s string) sets.Set[int] {
	ords, err := ParseOrdinals(s)
	if err != nil {
		return sets.New[int]()
	}
	return ords
}

// Leak is a pod newly counted as leaked.
type Leak struct {
	Member   string
	Pod      *corev1.Pod
	Revision string
}

// TrackLeaks is the member's leak record after this pass, and the pods it
// newly counts as leaked. prev is the member's record, nil when none. A
// record begins when the member is seen with pods to roll to an update
// revision it has no record of; a record of an older revision is kept (it
// tells the last rollout's leaks) until then. Pods are counted only while
// the member still has pods to roll: once every pod runs the update
// revision, a recreated pod is no drift.
func TrackLeaks(prev *v1alpha1.LeakRecord, m Member, ms *MemberState, now time.Time) (*v1alpha1.LeakRecord, []Leak) {
	if m.StatefulSet == nil || ms.Partitioned || ms.UpdateRevision == "" {
		return nil, nil
	}
	rolling := ms.ToRoll > 0 || len(ms.Outdated) > 0
	rec := prev.DeepCopy()
	if rec == nil || rec.Revision != ms.UpdateRevision {
		if !rolling {
			return rec, nil
		}
		start, end := ordinalRange(m.StatefulSet)
		wanted := sets.New[int]()
		for o := start; o < end; o++ {
			wanted.Insert(o)
		}
		// Whole seconds, as the API stores it: a record read back after a
		// restart judges pods as the one in memory did.
		rec = &v1alpha1.LeakRecord{Member: m.Name, Revision: ms.UpdateRevision,
			Since: metav1.NewTime(now.Truncate(time.Second)), Ordinals: FormatOrdinals(wanted)}
	}
	if !rolling {
		return rec, nil
	}
	wanted, removed, leaked := mustOrdinals(rec.Ordinals), mustOrdinals(rec.Removed), mustOrdinals(rec.Leaked)
	var leaks []Leak
	pods := slices.Clone(m.Pods)
	slices.SortFunc(pods, func(a, b *corev1.Pod) int { return strings.Compare(a.Name, b.Name) })
	for _, pod := range pods {
		ord, ok := podname.Ordinal(m.Name, pod.Name)
		if !ok || !wanted.Has(ord) || removed.Has(ord) || leaked.Has(ord) ||
			podRevision(pod) != rec.Revision || pod.CreationTimestamp.Time.Before(rec.Since.Time) {
			continue
		}
		leaked.Insert(ord)
		leaks = append(leaks, Leak{Member: m.Name, Pod: pod, Revision: rec.Revision})
	}
	if len(leaks) > 0 {
		rec.Leaked = FormatOrdinals(leaked)
		rec.LeakedPods += int32(len(leaks))
	}
	return rec, leaks
}

// RecordRemovals is the member's record with the ordinals of pods Echelon is
// about to remove added, and whether it changed. A record begins here when
// the pass has none yet (the first batch of a rollout).
func RecordRemovals(prev *v1alpha1.LeakRecord, m Member, ms *MemberState, pods []*corev1.Pod, now time.Time) (*v1alpha1.LeakRecord, bool) {
	rec, _ := TrackLeaks(prev, m, ms, now)
	if rec == nil || rec.Revision != ms.UpdateRevision {
		return prev, false
	}
	removed := mustOrdinals(rec.Removed)
	n := removed.Len()
	for _, pod := range pods {
		if ord, ok := podname.Ordinal(m.Name, pod.Name); ok {
			removed.Insert(ord)
		}
	}
	if removed.Len() == n && prev != nil && prev.Revision == rec.Revision {
		return prev, false
	}
	rec.Removed = FormatOrdinals(removed)
	// Leaks found here are found again, and announced, after the act.
	if prev != nil && prev.Revision == rec.Revision {
		rec.Leaked, rec.LeakedPods = prev.Leaked, prev.LeakedPods
	} else {
		rec.Leaked, rec.LeakedPods = "", 0
	}
	return rec, true
}
