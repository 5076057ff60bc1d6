package lookup

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// CacheOptions scopes the manager's caches to the watched namespaces (all of
// them when namespaces is empty) and keeps only what the controllers and the
// webhooks read of each pod and StatefulSet.
//
// Every pod of the watched namespaces is cached, not only those carrying a
// controller-revision-hash label: a pod a StatefulSet adopted without that label
// (made by hand, or by another tool) is one of its pods, and Echelon must see it
// to roll it instead of waiting forever for its ordinal. Memory stays small
// because stripPod keeps a few hundred bytes of each pod; stripStatefulSet
// drops the pod template's spec, which only the API server and the StatefulSet
// controller read.
//
// Nothing Echelon writes is built from a cached object's stripped fields: its
// writes are merge patches computed between a cached object and a copy of it
// (the stripped fields are absent from both, so the patch leaves them alone),
// and the rollback reads the template it restores from the ControllerRevision
// on the API server.
func CacheOptions(namespaces []string) cache.Options {
	co := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}:         {Transform: stripPod},
			&appsv1.StatefulSet{}: {Transform: stripStatefulSet},
		},
	}
	if len(namespaces) > 0 {
		co.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range namespaces {
			co.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return co
}

// stripPod reduces a cached pod to what the controllers read: identity, labels,
// owner, deletion, phase, the Ready condition, IPs and the echelon.dev/rotate
// annotation. Specs, container statuses and other annotations are most of a
// pod's size and are never read from the cache (a deletion needs only name,
// namespace and UID).
func stripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a tombstone (cache.DeletedFinalStateUnknown) passes as it is
	}
	stripped := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name:                       pod.Name,
			Namespace:                  pod.Namespace,
			UID:                        pod.UID,
			ResourceVersion:            pod.ResourceVersion,
			Generation:                 pod.Generation,
			CreationTimestamp:          pod.CreationTimestamp,
			DeletionTimestamp:          pod.DeletionTimestamp,
			DeletionGracePeriodSeconds: pod.DeletionGracePeriodSeconds,
			Labels:                     pod.Labels,
			OwnerReferences:            pod.OwnerReferences,
		},
		Status: corev1.PodStatus{
			Phase:  pod.Status.Phase,
			PodIP:  pod.Status.PodIP,
			PodIPs: pod.Status.PodIPs,
		},
	}
	// The one annotation read from the cache: a node cycler's request to
	// replace the pod.
	if v, ok := pod.Annotations[v1alpha1.AnnotationRotate]; ok {
		stripped.Annotations = map[string]string{v1alpha1.AnnotationRotate: v}
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			stripped.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status, LastTransitionTime: c.LastTransitionTime}}
		}
	}
	return stripped, nil
}

// WithoutTransforms returns co caching whole objects: for measuring what the
// transforms save (--cache-transforms=false), never for running.
func WithoutTransforms(co cache.Options) cache.Options {
	co.DefaultTransform = nil
	co.ByObject = nil
	return co
}

// lastAppliedAnnotation is kubectl's copy of the whole object as last applied:
// often the largest field of a StatefulSet, and never read.
const lastAppliedAnnotation = corev1.LastAppliedConfigAnnotation

// stripStatefulSet reduces a cached StatefulSet to what the controllers and
// webhooks read: its metadata (labels and annotations, which the Grafana
// compatibility mode translates, without managed fields and kubectl's
// last-applied copy), its spec but for the pod template's spec and the volume
// claim templates (of the template, only its labels, which PodDisruptionBudgets
// select, and annotations, where echelon.dev/rotate may be templated), and its
// whole status.
func stripStatefulSet(obj any) (any, error) {
	sts, ok := obj.(*appsv1.StatefulSet)
	if !ok {
		return obj, nil // a tombstone passes as it is
	}
	// In place, as the informer hands the decoded object over to the cache.
	sts.ManagedFields = nil
	delete(sts.Annotations, lastAppliedAnnotation)
	sts.Spec.Template = corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{
		Labels:      sts.Spec.Template.Labels,
		Annotations: sts.Spec.Template.Annotations,
	}}
	sts.Spec.VolumeClaimTemplates = nil
	return sts, nil
}

// WarmCaches registers the informer of every type the controllers and the
// webhooks read before the manager starts. The manager starts caches on every replica, but creates an
// informer only on first use, and controllers (which use them) start only on the
// leader; without this a standby would start its StatefulSet informer only after
// winning the election, and act later than it could.
func WarmCaches(ctx context.Context, c cache.Cache) error {
	for _, obj := range []client.Object{&v1alpha1.RolloutGroup{}, &v1alpha1.ScalingPolicy{}, &v1alpha1.DelayedDownscale{}, &v1alpha1.ZoneDisruptionBudget{},
		&appsv1.StatefulSet{}, &corev1.Pod{}, &policyv1.PodDisruptionBudget{}} {
		if _, err := c.GetInformer(ctx, obj); err != nil {
			return fmt.Errorf("register informer for %T: %w", obj, err)
		}
	}
	return nil
}
