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
// them when namespaces is empty) and keeps only what the controllers read of
// each pod.
//
// Every pod of the watched namespaces is cached, not only those carrying a
// controller-revision-hash label: a pod a StatefulSet adopted without that label
// (made by hand, or by another tool) is one of its pods, and Echelon must see it
// to roll it instead of waiting forever for its ordinal. Memory stays small
// because stripPod keeps a few hundred bytes of each pod.
func CacheOptions(namespaces []string) cache.Options {
	co := cache.Options{
		DefaultTransform: cache.TransformStripManagedFields(),
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Pod{}: {Transform: stripPod},
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
