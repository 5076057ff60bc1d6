/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package builders

import (
	"fmt"
	"maps"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// podUIDs makes every built pod's UID unique, even for two pods of the same
// name: a pod and its replacement must not look like one pod.
var podUIDs atomic.Int64

// PodWrapper builds a pod of a StatefulSet.
type PodWrapper struct{ pod corev1.Pod }

// MakePod starts the pod of statefulSet at ordinal, named
// "<statefulSet>-<ordinal>" with the StatefulSet controller's pod-name and
// pod-index labels and a UID no other built pod has. It is Running and Ready
// since a time left unset (the zero time): available under any
// minReadySeconds. It has no revision label, owner or container until
// Revision, ControlledBy or FromTemplate, and Container give it one.
func MakePod(namespace, statefulSet string, ordinal int) *PodWrapper {
	name := fmt.Sprintf("%s-%d", statefulSet, ordinal)
	w := &PodWrapper{pod: corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: namespace,
			Name:      name,
			UID:       types.UID(fmt.Sprintf("%s-uid-%d", name, podUIDs.Add(1))),
			Labels: map[string]string{
				appsv1.StatefulSetPodNameLabel: name,
				appsv1.PodIndexLabel:           fmt.Sprint(ordinal),
			},
		},
	}}
	return w.Ready(time.Time{})
}

// Obj returns a deep copy of the pod built so far.
func (w *PodWrapper) Obj() *corev1.Pod {
	return w.pod.DeepCopy()
}

// UID sets metadata.uid, e.g. to keep one UID across events about one pod.
func (w *PodWrapper) UID(uid types.UID) *PodWrapper {
	w.pod.UID = uid
	return w
}

// Label sets a label.
func (w *PodWrapper) Label(key, value string) *PodWrapper {
	w.pod.Labels[key] = value
	return w
}

// ControlledBy makes the pod sts's, as the StatefulSet controller creates it:
// a controller reference to sts and the labels of its selector.
func (w *PodWrapper) ControlledBy(sts *appsv1.StatefulSet) *PodWrapper {
	w.pod.OwnerReferences = []metav1.OwnerReference{*metav1.NewControllerRef(sts, appsv1.SchemeGroupVersion.WithKind("StatefulSet"))}
	if sts.Spec.Selector != nil {
		maps.Copy(w.pod.Labels, sts.Spec.Selector.MatchLabels)
	}
	return w
}

// FromTemplate gives the pod the labels, annotations and spec of a pod
// template, as a pod made by hand to look like a StatefulSet's.
func (w *PodWrapper) FromTemplate(t corev1.PodTemplateSpec) *PodWrapper {
	maps.Copy(w.pod.Labels, t.Labels)
	if len(t.Annotations) > 0 {
		w.pod.Annotations = maps.Clone(t.Annotations)
	}
	w.pod.Spec = *t.Spec.DeepCopy()
	return w
}

// Container sets the pod's only container.
func (w *PodWrapper) Container(name, image string) *PodWrapper {
	w.pod.Spec.Containers = []corev1.Container{{Name: name, Image: image}}
	return w
}

// NodeName binds the pod to a node.
func (w *PodWrapper) NodeName(node string) *PodWrapper {
	w.pod.Spec.NodeName = node
	return w
}

// Revision sets the controller-revision-hash label: the revision of the
// StatefulSet the pod was made from.
func (w *PodWrapper) Revision(rev string) *PodWrapper {
	w.pod.Labels[appsv1.ControllerRevisionHashLabelKey] = rev
	return w
}

// NoRevision removes the controller-revision-hash label, as on a pod made by
// hand (or by another tool) that a StatefulSet adopted.
func (w *PodWrapper) NoRevision() *PodWrapper {
	delete(w.pod.Labels, appsv1.ControllerRevisionHashLabelKey)
	return w
}

// Ready makes the pod Running and Ready since the given time.
func (w *PodWrapper) Ready(since time.Time) *PodWrapper {
	w.pod.Status.Phase = corev1.PodRunning
	return w.readyCondition(corev1.ConditionTrue, since)
}

// NotReady keeps the pod's phase with a Ready condition that is False.
func (w *PodWrapper) NotReady() *PodWrapper {
	return w.readyCondition(corev1.ConditionFalse, time.Time{})
}

// Phase sets status.phase and leaves the Ready condition as it was; a pod
// that is not Running is never Ready, whatever the condition says.
func (w *PodWrapper) Phase(phase corev1.PodPhase) *PodWrapper {
	w.pod.Status.Phase = phase
	return w
}

// IP sets status.podIP and status.podIPs to ip.
func (w *PodWrapper) IP(ip string) *PodWrapper {
	w.pod.Status.PodIP = ip
	w.pod.Status.PodIPs = []corev1.PodIP{{IP: ip}}
	return w
}

// Terminating sets a deletionTimestamp, as the API server does on delete.
func (w *PodWrapper) Terminating(at time.Time) *PodWrapper {
	w.pod.DeletionTimestamp = ptr.To(metav1.NewTime(at))
	return w
}

func (w *PodWrapper) readyCondition(status corev1.ConditionStatus, since time.Time) *PodWrapper {
	cond := corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(since)}
	for i, c := range w.pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			w.pod.Status.Conditions[i] = cond
			return w
		}
	}
	w.pod.Status.Conditions = append(w.pod.Status.Conditions, cond)
	return w
}
