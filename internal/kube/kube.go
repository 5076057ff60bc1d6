// Package kube holds the facts about Kubernetes objects that the controllers,
// the webhooks and the planners all read: a StatefulSet's replicas with the
// API's default, and whether a pod or a StatefulSet is Ready. Each fact is
// computed here once, so two callers cannot drift apart on what "Ready" means.
package kube

import (
	"errors"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Replicas is a StatefulSet's spec.replicas, which the API defaults to 1.
func Replicas(sts *appsv1.StatefulSet) int32 {
	if sts.Spec.Replicas == nil {
		return 1
	}
	return *sts.Spec.Replicas
}

// StatefulSetReady reports whether every replica the StatefulSet wants exists
// and is Ready, by its controller's own status, for the spec it last observed.
func StatefulSetReady(sts *appsv1.StatefulSet) bool {
	n := Replicas(sts)
	return sts.Status.ObservedGeneration >= sts.Generation && sts.Status.Replicas == n && sts.Status.ReadyReplicas == n
}

// PodReadyCondition is the status of the pod's Ready condition, Unknown when
// the pod has none.
func PodReadyCondition(pod *corev1.Pod) corev1.ConditionStatus {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status
		}
	}
	return corev1.ConditionUnknown
}

// PodReady reports whether the pod's Ready condition is True.
func PodReady(pod *corev1.Pod) bool {
	return PodReadyCondition(pod) == corev1.ConditionTrue
}

// PodReadySince returns when a running pod became Ready, or false when it is
// not running and Ready.
func PodReadySince(pod *corev1.Pod) (time.Time, bool) {
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

// ControlledBy returns the pods whose controller is sts, by UID, so that a
// deleted and recreated StatefulSet of the same name does not inherit pods it
// has not adopted.
func ControlledBy(items []corev1.Pod, sts *appsv1.StatefulSet) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, len(items))
	for i := range items {
		if owner := metav1.GetControllerOf(&items[i]); owner != nil && owner.UID == sts.UID {
			pods = append(pods, &items[i])
		}
	}
	return pods
}

// APIMessage is the message of an API error as the API server wrote it,
// without the client's wrapping; other errors as they are.
func APIMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}
