/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package builders

import (
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

// DefaultImage is the image of a built StatefulSet's container until Image or
// Container changes it. Nothing pulls it: test pods run under kwok or not at all.
const DefaultImage = "registry.example/app:1"

// StatefulSetWrapper builds a StatefulSet.
type StatefulSetWrapper struct{ sts appsv1.StatefulSet }

// MakeStatefulSet starts a StatefulSet as the API server returns one after
// defaulting and after its controller observed it: one replica, the default
// RollingUpdate strategy, generation 1 observed, a selector app=<name> that its
// pod template carries, serviceName <name>, one container "app" running
// DefaultImage, and the UID "uid-<name>". Without a Revision it has no
// update revision yet. The API server replaces the UID, generation and status
// when the object is created.
func MakeStatefulSet(namespace, name string) *StatefulSetWrapper {
	labels := map[string]string{"app": name}
	return &StatefulSetWrapper{sts: appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{
			Namespace:  namespace,
			Name:       name,
			UID:        types.UID("uid-" + name),
			Generation: 1,
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas:       ptr.To[int32](1),
			ServiceName:    name,
			Selector:       &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: DefaultImage}}},
			},
		},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1},
	}}
}

// Obj returns a deep copy of the StatefulSet built so far.
func (w *StatefulSetWrapper) Obj() *appsv1.StatefulSet {
	return w.sts.DeepCopy()
}

// TypeMeta sets apiVersion apps/v1 and kind StatefulSet, which an object
// serialized into an admission request carries and a typed client drops.
func (w *StatefulSetWrapper) TypeMeta() *StatefulSetWrapper {
	w.sts.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"}
	return w
}

// UID sets metadata.uid, which pods' owner references name.
func (w *StatefulSetWrapper) UID(uid types.UID) *StatefulSetWrapper {
	w.sts.UID = uid
	return w
}

// Label sets a label on the StatefulSet itself (not on its pods).
func (w *StatefulSetWrapper) Label(key, value string) *StatefulSetWrapper {
	if w.sts.Labels == nil {
		w.sts.Labels = map[string]string{}
	}
	w.sts.Labels[key] = value
	return w
}

// PodLabel sets a label of the selector and of the pod template together, so
// that the selector keeps matching the pods.
func (w *StatefulSetWrapper) PodLabel(key, value string) *StatefulSetWrapper {
	w.sts.Spec.Selector.MatchLabels[key] = value
	w.sts.Spec.Template.Labels[key] = value
	return w
}

// TemplateAnnotation sets an annotation of the pod template; changing one makes
// a new revision.
func (w *StatefulSetWrapper) TemplateAnnotation(key, value string) *StatefulSetWrapper {
	if w.sts.Spec.Template.Annotations == nil {
		w.sts.Spec.Template.Annotations = map[string]string{}
	}
	w.sts.Spec.Template.Annotations[key] = value
	return w
}

// Image sets the image of the template's container.
func (w *StatefulSetWrapper) Image(image string) *StatefulSetWrapper {
	w.sts.Spec.Template.Spec.Containers[0].Image = image
	return w
}

// Container renames the template's container and sets its image.
func (w *StatefulSetWrapper) Container(name, image string) *StatefulSetWrapper {
	w.sts.Spec.Template.Spec.Containers[0] = corev1.Container{Name: name, Image: image}
	return w
}

// Toleration adds a toleration to the pod template, e.g. of kwok's node taint.
func (w *StatefulSetWrapper) Toleration(t corev1.Toleration) *StatefulSetWrapper {
	w.sts.Spec.Template.Spec.Tolerations = append(w.sts.Spec.Template.Spec.Tolerations, t)
	return w
}

// ServiceName sets spec.serviceName.
func (w *StatefulSetWrapper) ServiceName(name string) *StatefulSetWrapper {
	w.sts.Spec.ServiceName = name
	return w
}

// Replicas sets spec.replicas.
func (w *StatefulSetWrapper) Replicas(n int32) *StatefulSetWrapper {
	w.sts.Spec.Replicas = ptr.To(n)
	return w
}

// NilReplicas leaves spec.replicas unset, which the API defaults to 1.
func (w *StatefulSetWrapper) NilReplicas() *StatefulSetWrapper {
	w.sts.Spec.Replicas = nil
	return w
}

// OrdinalsStart sets spec.ordinals.start: the pods are numbered from start.
func (w *StatefulSetWrapper) OrdinalsStart(start int32) *StatefulSetWrapper {
	w.sts.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: start}
	return w
}

// Parallel sets podManagementPolicy Parallel, so that the StatefulSet
// controller creates and deletes pods without waiting for each other.
func (w *StatefulSetWrapper) Parallel() *StatefulSetWrapper {
	w.sts.Spec.PodManagementPolicy = appsv1.ParallelPodManagement
	return w
}

// OnDelete sets the OnDelete update strategy: only Echelon replaces pods.
func (w *StatefulSetWrapper) OnDelete() *StatefulSetWrapper {
	return w.Strategy(appsv1.OnDeleteStatefulSetStrategyType)
}

// RollingUpdate sets the RollingUpdate update strategy, the API's default.
func (w *StatefulSetWrapper) RollingUpdate() *StatefulSetWrapper {
	return w.Strategy(appsv1.RollingUpdateStatefulSetStrategyType)
}

// Partition sets the RollingUpdate strategy with rollingUpdate.partition p.
func (w *StatefulSetWrapper) Partition(p int32) *StatefulSetWrapper {
	w.sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
		RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &p}}
	return w
}

// Strategy sets the update strategy type verbatim; "" is what an object that
// bypassed defaulting looks like.
func (w *StatefulSetWrapper) Strategy(t appsv1.StatefulSetUpdateStrategyType) *StatefulSetWrapper {
	w.sts.Spec.UpdateStrategy.Type = t
	return w
}

// Generation sets metadata.generation and an up-to-date status.observedGeneration.
func (w *StatefulSetWrapper) Generation(g int64) *StatefulSetWrapper {
	w.sts.Generation = g
	w.sts.Status.ObservedGeneration = g
	return w
}

// NotObserved makes the status lag one generation behind the spec, as right
// after a template change.
func (w *StatefulSetWrapper) NotObserved() *StatefulSetWrapper {
	w.sts.Status.ObservedGeneration = w.sts.Generation - 1
	return w
}

// Revision sets status.updateRevision, the revision every pod should run.
func (w *StatefulSetWrapper) Revision(update string) *StatefulSetWrapper {
	w.sts.Status.UpdateRevision = update
	return w
}

// CurrentRevision sets status.currentRevision, which with OnDelete Kubernetes
// does not advance by itself.
func (w *StatefulSetWrapper) CurrentRevision(current string) *StatefulSetWrapper {
	w.sts.Status.CurrentRevision = current
	return w
}

// StatusReplicas sets the StatefulSet controller's counts: status.replicas
// (pods that exist, terminating ones included) and status.readyReplicas, with
// status.updatedReplicas counting every pod (StatusUpdated sets it apart).
func (w *StatefulSetWrapper) StatusReplicas(replicas, ready int32) *StatefulSetWrapper {
	w.sts.Status.Replicas = replicas
	w.sts.Status.ReadyReplicas = ready
	w.sts.Status.UpdatedReplicas = replicas
	return w
}

// StatusUpdated sets status.updatedReplicas: the pods the StatefulSet
// controller counted on the update revision.
func (w *StatefulSetWrapper) StatusUpdated(updated int32) *StatefulSetWrapper {
	w.sts.Status.UpdatedReplicas = updated
	return w
}

// Deleting sets a deletionTimestamp, as the API server does on delete while a
// finalizer (orphan, foreground) holds the object.
func (w *StatefulSetWrapper) Deleting(at time.Time) *StatefulSetWrapper {
	w.sts.DeletionTimestamp = ptr.To(metav1.NewTime(at))
	return w
}
