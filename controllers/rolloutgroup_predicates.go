package controllers

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
)

// groupChanged passes RolloutGroup updates that change what the planner reads:
// the spec (generation), a deletionTimestamp appearing (foreground deletion,
// a finalizer), after which the group deletes nothing more, or one of the
// annotations that control the analysis by hand (retry, skip-gate, abort).
// Status writes, Echelon's own, are not passed.
var groupChanged = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		if (e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil) {
			return true
		}
		old, next := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
		for _, key := range []string{v1alpha1.AnnotationRetry, v1alpha1.AnnotationSkipGate, v1alpha1.AnnotationAbort} {
			if old[key] != next[key] {
				return true
			}
		}
		return false
	},
})

// statefulSetChanged passes only the StatefulSet updates the planner reads:
// spec (generation), strategy, labels, deletion, the revisions the controller
// reports, and its replica and Ready counts, by which the planner sees a
// scale-down whose pods are still terminating.
var statefulSetChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*appsv1.StatefulSet)
		n, okNew := e.ObjectNew.(*appsv1.StatefulSet)
		if !okOld || !okNew {
			return true
		}
		return o.Generation != n.Generation ||
			o.Status.ObservedGeneration != n.Status.ObservedGeneration ||
			o.Status.UpdateRevision != n.Status.UpdateRevision ||
			o.Status.CurrentRevision != n.Status.CurrentRevision ||
			o.Status.Replicas != n.Status.Replicas ||
			o.Status.ReadyReplicas != n.Status.ReadyReplicas ||
			!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
	},
}

// podChanged passes only pod updates that change what the planner sees: its
// revision, readiness, phase or deletion.
var podChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*corev1.Pod)
		n, okNew := e.ObjectNew.(*corev1.Pod)
		if !okOld || !okNew {
			return true
		}
		return o.Labels[appsv1.ControllerRevisionHashLabelKey] != n.Labels[appsv1.ControllerRevisionHashLabelKey] ||
			o.Status.Phase != n.Status.Phase ||
			kube.PodReadyCondition(o) != kube.PodReadyCondition(n) ||
			(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
	},
}
