package delayeddownscale

import (
	"context"

	"github.com/echelon-operator/echelon/controllers/internal/predicates"

	ctrl "sigs.k8s.io/controller-runtime"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/lookup"
)

// requestsForTarget maps an event of a StatefulSet, a ScalingPolicy or a
// DelayedDownscale to the DelayedDownscales of the StatefulSet it is about:
// a DelayedDownscale created, retargeted or deleted makes or ends a
// duplicate for the others of its target.
func (r *Reconciler) requestsForTarget(ctx context.Context, o client.Object) []reconcile.Request {
	name := o.GetName()
	switch t := o.(type) {
	case *v1alpha1.ScalingPolicy:
		name = t.Spec.TargetRef.Name
	case *v1alpha1.DelayedDownscale:
		name = t.Spec.TargetRef.Name
	}
	return r.requestsForStatefulSet(ctx, o.GetNamespace(), name)
}

// requestsForStatefulSet names the DelayedDownscales of a StatefulSet.
func (r *Reconciler) requestsForStatefulSet(ctx context.Context, namespace, name string) []reconcile.Request {
	items, err := lookup.DelayedFor(ctx, r.Client, namespace, name)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map to DelayedDownscales", "statefulset", name)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(items))
	for _, dd := range items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: dd.Namespace, Name: dd.Name}})
	}
	return reqs
}

// requestsForPod maps an event of a pod to the DelayedDownscales of the
// StatefulSet that controls it.
func (r *Reconciler) requestsForPod(ctx context.Context, o client.Object) []reconcile.Request {
	owner := lookup.OwnerStatefulSet(o)
	if owner == "" {
		return nil
	}
	return r.requestsForStatefulSet(ctx, o.GetNamespace(), owner)
}

// podReplaced passes the pod events that change what a downscale knows of its
// pods: a pod created (perhaps again, under a name whose record is of the pod
// before), deleted or terminating, or given another address. A recreated pod is
// not prepared, whatever its record says.
var podReplaced = predicates.NoGeneric(predicates.UpdatedWhen(func(o, n *corev1.Pod) bool {
	return o.UID != n.UID || (o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
		o.Status.PodIP != n.Status.PodIP
}))

// policyDesiredChanged passes ScalingPolicy updates that change the desired
// replicas as observe reads them: their value, or whether the status is of
// the current spec (it may catch up without a new value).
var policyDesiredChanged = predicates.UpdatedWhen(func(o, n *v1alpha1.ScalingPolicy) bool {
	oldDesired, oldCurrent := policyDesired(o)
	newDesired, newCurrent := policyDesired(n)
	return !equality.Semantic.DeepEqual(oldDesired, newDesired) || oldCurrent != newCurrent ||
		o.Spec.TargetRef != n.Spec.TargetRef
})

// targetChanged passes the DelayedDownscale events that can make or end a
// duplicate: creations, deletions and changes of spec.targetRef (mapped
// from both the old and the new object).
var targetChanged = predicates.NoGeneric(predicates.UpdatedWhen(func(o, n *v1alpha1.DelayedDownscale) bool {
	return o.Spec.TargetRef != n.Spec.TargetRef
}))

// replicasChanged passes StatefulSet updates that change spec.replicas.
var replicasChanged = predicates.UpdatedWhen(func(o, n *appsv1.StatefulSet) bool {
	return kube.Replicas(o) != kube.Replicas(n)
})

func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.DelayedDownscale{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.requestsForTarget), builder.WithPredicates(replicasChanged)).
		Watches(&v1alpha1.ScalingPolicy{}, handler.EnqueueRequestsFromMapFunc(r.requestsForTarget), builder.WithPredicates(policyDesiredChanged)).
		Watches(&v1alpha1.DelayedDownscale{}, handler.EnqueueRequestsFromMapFunc(r.requestsForTarget), builder.WithPredicates(targetChanged)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.requestsForPod), builder.WithPredicates(podReplaced)).
		Named(controllerName).
		Complete(r)
}
