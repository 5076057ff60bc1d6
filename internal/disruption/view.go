package disruption

import (
	"fmt"
	"regexp"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/podname"
)

// ZoneOptions say how a zone's pods are judged.
type ZoneOptions struct {
	MaxUnavailable  int32
	MinReadySeconds int32
	Now             time.Time
	// Deleting holds the UIDs of pods this process deleted that the view
	// does not show terminating yet.
	Deleting sets.Set[types.UID]
	// Partition gives a pod name's partition; nil when the budget is not
	// partition-aware.
	Partition func(podName string) string
}

// ZoneOf is the zone of a StatefulSet and the pods it controls: each wanted
// ordinal with its pod (or Missing), and the pods outside the wanted
// ordinals as leaving.
func ZoneOf(sts *appsv1.StatefulSet, pods []*corev1.Pod, o ZoneOptions) Zone {
	z := Zone{Name: sts.Name, Replicas: kube.Replicas(sts), StatusReplicas: sts.Status.Replicas,
		StatusReady: sts.Status.ReadyReplicas, MaxUnavailable: o.MaxUnavailable}
	lo, hi := podname.Kept(podname.Start(sts), z.Replicas)
	seen := map[int]bool{}
	for _, pod := range pods {
		ord, ok := podname.Ordinal(sts.Name, pod.Name)
		if !ok {
			continue
		}
		p := Pod{Name: pod.Name, UID: pod.UID, Wanted: ord >= lo && ord < hi, Created: pod.CreationTimestamp.Time,
			Terminating: pod.DeletionTimestamp != nil || o.Deleting.Has(pod.UID)}
		if p.Wanted {
			seen[ord] = true
		}
		if since, ok := kube.PodReadySince(pod); ok && !p.Terminating && !released(sts, pod, ord) {
			since = since.Add(time.Duration(o.MinReadySeconds) * time.Second)
			if o.Now.Before(since) {
				p.AvailableAt = since
			} else {
				p.Available, p.AvailableSince = true, since
			}
		}
		z.Pods = append(z.Pods, withPartition(p, o.Partition))
	}
	for ord := lo; ord < hi; ord++ {
		if !seen[ord] {
			z.Pods = append(z.Pods, withPartition(Pod{Name: fmt.Sprintf("%s-%d", sts.Name, ord), Wanted: true, Missing: true}, o.Partition))
		}
	}
	return z
}

func withPartition(p Pod, partition func(string) string) Pod {
	if partition != nil {
		p.Partition = partition(p.Name)
	}
	return p
}

// PartitionFunc returns the function that gives a pod name's partition: the
// regex's group-th submatch, "" when the name does not match. An empty regex
// gives nil: the budget is not partition-aware.
func PartitionFunc(regex string, group int32) (func(string) string, error) {
	if regex == "" {
		return nil, nil
	}
	re, err := regexp.Compile(regex)
	if err != nil {
		return nil, fmt.Errorf("podNamePartitionRegex: %w", err)
	}
	// The API validates the group, but a negative one reaching here would
	// panic in every admission that reads a pod name.
	if group < 0 || int(group) > re.NumSubexp() {
		return nil, fmt.Errorf("podNamePartitionGroup %d: the regex has %d groups", group, re.NumSubexp())
	}
	return func(name string) string {
		m := re.FindStringSubmatch(name)
		if m == nil {
			return ""
		}
		return m[group]
	}, nil
}

// IntentsOf is the intents recorded in an object's status.disruption.
func IntentsOf(h *v1alpha1.DisruptionHold) []Intent {
	if h == nil {
		return nil
	}
	out := make([]Intent, 0, len(h.Intents))
	for _, r := range h.Intents {
		in := Intent{Zone: r.Zone, Reason: r.Reason, Holder: r.Holder, Decided: r.DecidedAt.Time, Expires: r.ExpiresAt.Time, MaxAtOnce: r.MaxAtOnce}
		for _, p := range r.Pods {
			in.Pods = append(in.Pods, IntentPod{Name: p.Name, UID: types.UID(p.UID)})
		}
		out = append(out, in)
	}
	return out
}

// RecordOf is intents as written into an object's status.disruption; nil
// when there are none. Times are stored to the second: a decision is
// recorded as made at the start of its second (so that a replacement
// created within it is not taken for one created after it), and its
// expiry rounded up.
func RecordOf(intents []Intent) *v1alpha1.DisruptionHold {
	if len(intents) == 0 {
		return nil
	}
	h := &v1alpha1.DisruptionHold{}
	for _, in := range intents {
		r := v1alpha1.DisruptionIntent{Zone: in.Zone, Reason: in.Reason, Holder: in.Holder,
			DecidedAt: metav1.NewTime(in.Decided.Truncate(time.Second)), ExpiresAt: metav1.NewTime(ceilSecond(in.Expires)), MaxAtOnce: in.MaxAtOnce}
		for _, p := range in.Pods {
			r.Pods = append(r.Pods, v1alpha1.IntentPod{Name: p.Name, UID: string(p.UID)})
		}
		h.Intents = append(h.Intents, r)
	}
	return h
}

func ceilSecond(t time.Time) time.Time {
	if c := t.Truncate(time.Second); !c.Equal(t) {
		return c.Add(time.Second)
	}
	return t
}

// ResolveBudget turns a zone budget value into a pod count for a zone of
// replicas pods: percentages round down and may give 0; nil gives def.
func ResolveBudget(v *intstr.IntOrString, replicas int32, def int32) int32 {
	if v == nil {
		return def
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(replicas), false)
	if err != nil || n < 0 {
		return 0
	}
	return int32(min(n, 1<<30))
}

// released reports whether the StatefulSet controller may take pod down at
// any moment to roll it: a RollingUpdate StatefulSet's pod at or above its
// partition, not on its update revision. Such a pod counts as not
// available: a RolloutGroup released it within its zone's maxUnavailable (or
// nothing holds the StatefulSet's rollout back), and an eviction must not
// count on it.
func released(sts *appsv1.StatefulSet, pod *corev1.Pod, ord int) bool {
	if sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType || sts.Status.UpdateRevision == "" ||
		pod.Labels[appsv1.ControllerRevisionHashLabelKey] == sts.Status.UpdateRevision {
		return false
	}
	partition := 0
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = int(*ru.Partition)
	}
	return ord >= int(podname.Start(sts))+partition
}

// Withdrawn is intents with pods removed from the one that is in (the same
// zone, reason and holder, decided in the same second: as recorded), and
// that intent dropped if no pod is left; changed says whether any was.
func Withdrawn(intents []Intent, in Intent, pods []string) (_ []Intent, changed bool) {
	out := make([]Intent, 0, len(intents))
	for _, r := range intents {
		if r.Zone == in.Zone && r.Reason == in.Reason && r.Holder == in.Holder && r.Decided.Truncate(time.Second).Equal(in.Decided.Truncate(time.Second)) {
			n := len(r.Pods)
			r.Pods = slices.DeleteFunc(slices.Clone(r.Pods), func(p IntentPod) bool { return slices.Contains(pods, p.Name) })
			changed = changed || len(r.Pods) != n
			if len(r.Pods) == 0 && n > 0 {
				continue
			}
		}
		out = append(out, r)
	}
	return out, changed
}
