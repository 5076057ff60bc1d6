package rollout

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/podname"
)

// ordinalRange is the half-open range of ordinals the StatefulSet wants to exist.
func ordinalRange(sts *appsv1.StatefulSet) (start, end int) {
	return podname.Kept(podname.Start(sts), kube.Replicas(sts))
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
