package render

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/podname"
)

// PodState is what a pod of a member is doing, as the tree shows it.
type PodState string

const (
	// PodTerminating: deleted (by the rollout or anyone), not gone yet.
	PodTerminating PodState = "Terminating"
	// PodLeaving: above (or below) the StatefulSet's wanted ordinals, a
	// scale-down's pod still there, or a pod left behind: it uses
	// availability until it is gone.
	PodLeaving PodState = "Leaving"
	// PodNotReady: wanted, not Ready.
	PodNotReady PodState = "NotReady"
	// PodUnavailable: Ready for less than spec.minReadySeconds.
	PodUnavailable PodState = "Unavailable"
	// PodOutdated: Ready, on another revision than the member's update revision.
	PodOutdated PodState = "Outdated"
	// PodUpdated: Ready and available on the update revision.
	PodUpdated PodState = "Updated"
)

// podLine is one pod as classified.
type podLine struct {
	name     string
	ordinal  int
	state    PodState
	revision string
	detail   string
}

// classifyPods sorts a member's pods into the states above, by ordinal.
// Outdated is judged as the operator judges it: the pod's
// controller-revision-hash label against the StatefulSet's
// status.updateRevision.
func classifyPods(sts *appsv1.StatefulSet, pods []*corev1.Pod, minReadySeconds int32, now time.Time) []podLine {
	update := sts.Status.UpdateRevision
	start := int(podname.Start(sts))
	end := start + int(kube.Replicas(sts))
	lines := make([]podLine, 0, len(pods))
	for _, pod := range pods {
		ord, ok := podname.Ordinal(sts.Name, pod.Name)
		if !ok {
			ord = -1
		}
		l := podLine{name: pod.Name, ordinal: ord, revision: pod.Labels[appsv1.ControllerRevisionHashLabelKey]}
		since, ready := kube.PodReadySince(pod)
		switch {
		case pod.DeletionTimestamp != nil:
			l.state = PodTerminating
			l.detail = "deleted " + ago(now, pod.DeletionTimestamp.Time)
		case ord < start || ord >= end:
			l.state = PodLeaving
			l.detail = fmt.Sprintf("outside ordinals %d..%d", start, end-1)
		case !ready:
			l.state = PodNotReady
			l.detail = notReadyDetail(pod)
		case !podAvailable(pod, minReadySeconds, now):
			l.state = PodUnavailable
			l.detail = fmt.Sprintf("Ready %s, minReadySeconds %d", ago(now, since), minReadySeconds)
		case l.revision != update:
			l.state = PodOutdated
		default:
			l.state = PodUpdated
		}
		lines = append(lines, l)
	}
	slices.SortFunc(lines, func(a, b podLine) int {
		if a.ordinal != b.ordinal {
			return a.ordinal - b.ordinal
		}
		return strings.Compare(a.name, b.name)
	})
	return lines
}

// notReadyDetail says why a pod is not Ready: its phase, or the reason of its
// Ready condition when it has one.
func notReadyDetail(pod *corev1.Pod) string {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady && c.Reason != "" {
			return string(pod.Status.Phase) + ", " + c.Reason
		}
	}
	if pod.Status.Phase == "" {
		return "no status yet"
	}
	return string(pod.Status.Phase)
}

// ordinalRanges writes ordinals compactly: 0-3,5,7-9.
func ordinalRanges(ords []int) string {
	slices.Sort(ords)
	var parts []string
	for i := 0; i < len(ords); {
		j := i
		for j+1 < len(ords) && ords[j+1] == ords[j]+1 {
			j++
		}
		if j == i {
			parts = append(parts, strconv.Itoa(ords[i]))
		} else {
			parts = append(parts, fmt.Sprintf("%d-%d", ords[i], ords[j]))
		}
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// podAvailable reports whether the pod has been Ready for minReadySeconds,
// as the planner counts availability.
func podAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	since, ok := kube.PodReadySince(pod)
	return ok && !now.Before(since.Add(time.Duration(minReadySeconds)*time.Second))
}

// podCounts are a member's pods counted as the planner counts them.
type podCounts struct {
	replicas, updated, ready, available int32
}

// countPods counts the wanted pods (within the StatefulSet's ordinals): those
// on the update revision, terminating or not, and those Ready and available
// that are not terminating.
func countPods(sts *appsv1.StatefulSet, pods []podLine) podCounts {
	c := podCounts{replicas: kube.Replicas(sts)}
	for _, p := range pods {
		if p.state == PodLeaving {
			continue
		}
		if p.revision == sts.Status.UpdateRevision {
			c.updated++
		}
		switch p.state {
		case PodUpdated, PodOutdated:
			c.ready++
			c.available++
		case PodUnavailable:
			c.ready++
		}
	}
	return c
}
