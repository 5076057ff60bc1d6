package rollout

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/echelon-operator/echelon/internal/podname"
)

// ordinalRange is the half-open range of ordinals the StatefulSet wants to exist.
func ordinalRange(sts *appsv1.StatefulSet) (start, end int) {
	return podname.Kept(podname.Start(sts), desiredReplicas(sts))
}

func desiredReplicas(sts *appsv1.StatefulSet) int32 {
	if sts.Spec.Replicas == nil {
		return 1 // the API default
	}
	return *sts.Spec.Replicas
}

// podRevision is the controller revision a pod was created from.
func podRevision(pod *corev1.Pod) string {
	return pod.Labels[appsv1.ControllerRevisionHashLabelKey]
}

// isTerminating reports whether a pod is going away: the API says so, or Echelon
// deleted it and the cache has not caught up yet.
func isTerminating(pod *corev1.Pod, deleting sets.Set[types.UID]) bool {
	return pod.DeletionTimestamp != nil || deleting.Has(pod.UID)
}

// readySince returns when the pod became Ready, or false when it is not Ready.
func readySince(pod *corev1.Pod) (time.Time, bool) {
	if pod.Status.Phase != corev1.PodRunning {
		return time.Time{}, false
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			if c.Status != corev1.ConditionTrue {
				return time.Time{}, false
			}
			return c.LastTransitionTime.Time, true
		}
	}
	return time.Time{}, false
}
