package rolloutgroup

import (
	"context"
	"slices"

	"github.com/echelon-operator/echelon/controllers/internal/predicates"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/lookup"
)

// requestsForStatefulSet maps a StatefulSet event to the groups that claim it.
func (r *Reconciler) requestsForStatefulSet(ctx context.Context, o client.Object) []reconcile.Request {
	sts, ok := o.(*appsv1.StatefulSet)
	if !ok {
		return nil
	}
	groups, err := lookup.GroupsClaiming(ctx, r.Client, sts.Namespace, sts.Name, sts)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map StatefulSet to RolloutGroups", "statefulset", sts.Name)
		return nil
	}
	// The group that holds its partition, which must hand it back when the
	// StatefulSet no longer matches its selector.
	return toRequests(r.withSharing(ctx, sts.Namespace, withGroupOfUID(ctx, r.Client, sts.Namespace, sts.Labels[partitionHolderLabel], groups)))
}

// withSharing is groups with every group that shares a budget with one of
// them (spec.sharedDisruptionBudget): a pod of one becoming available may
// be what another waits for.
func (r *Reconciler) withSharing(ctx context.Context, namespace string, groups []v1alpha1.RolloutGroup) []v1alpha1.RolloutGroup {
	shared := map[string]bool{}
	for _, g := range groups {
		if g.Spec.SharedDisruptionBudget != "" {
			shared[g.Spec.SharedDisruptionBudget] = true
		}
	}
	if len(shared) == 0 {
		return groups
	}
	var all v1alpha1.RolloutGroupList
	if err := r.List(ctx, &all, client.InNamespace(namespace)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map to RolloutGroups sharing a budget")
		return groups
	}
	for _, g := range all.Items {
		if shared[g.Spec.SharedDisruptionBudget] {
			groups = append(groups, g)
		}
	}
	return groups
}

// requestsForSharedBudget maps a ZoneDisruptionBudget event (an intent
// recorded or withdrawn) to the groups that share it.
func (r *Reconciler) requestsForSharedBudget(ctx context.Context, o client.Object) []reconcile.Request {
	var all v1alpha1.RolloutGroupList
	if err := r.List(ctx, &all, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map ZoneDisruptionBudget to RolloutGroups", "zonedisruptionbudget", o.GetName())
		return nil
	}
	var groups []v1alpha1.RolloutGroup
	for _, g := range all.Items {
		if g.Spec.SharedDisruptionBudget == o.GetName() {
			groups = append(groups, g)
		}
	}
	return toRequests(groups)
}

// requestsForPod maps a pod event to the groups of its StatefulSet.
func (r *Reconciler) requestsForPod(ctx context.Context, o client.Object) []reconcile.Request {
	name := lookup.OwnerStatefulSet(o)
	if name == "" {
		return nil
	}
	sts := &appsv1.StatefulSet{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: name}, sts); err != nil {
		sts = nil // deleted or not cached yet: groups listing it by name still get the event
	}
	groups, err := lookup.GroupsClaiming(ctx, r.Client, o.GetNamespace(), name, sts)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map pod to RolloutGroups", "pod", o.GetName())
		return nil
	}
	return toRequests(r.withSharing(ctx, o.GetNamespace(), groups))
}

// requestsForGroupsSharingMembers maps a RolloutGroup event to the other groups
// that claim one of its members.
func (r *Reconciler) requestsForGroupsSharingMembers(ctx context.Context, o client.Object) []reconcile.Request {
	rg, ok := o.(*v1alpha1.RolloutGroup)
	if !ok {
		return nil
	}
	members, _, err := lookup.ResolveMembers(ctx, r.Client, rg)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map RolloutGroup to groups sharing its members", "rolloutgroup", rg.Name)
		return nil
	}
	var others []v1alpha1.RolloutGroup
	for _, m := range members {
		groups, err := lookup.GroupsClaiming(ctx, r.Client, rg.Namespace, m.Name, m.StatefulSet)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "map RolloutGroup to groups sharing its members", "rolloutgroup", rg.Name)
			return nil
		}
		for _, g := range groups {
			if g.UID != rg.UID {
				others = append(others, g)
			}
		}
	}
	return toRequests(others)
}

// requestsForBudget maps a PodDisruptionBudget event to the groups of its
// namespace that take maxUnavailable from PodDisruptionBudgets: a budget
// changed while a group rolls applies from its next batch.
func (r *Reconciler) requestsForBudget(ctx context.Context, o client.Object) []reconcile.Request {
	groups, err := lookup.GroupsUsingBudgets(ctx, r.Client, o.GetNamespace())
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map PodDisruptionBudget to RolloutGroups", "poddisruptionbudget", o.GetName())
		return nil
	}
	return toRequests(groups)
}

func toRequests(groups []v1alpha1.RolloutGroup) []reconcile.Request {
	reqs := make([]reconcile.Request, 0, len(groups))
	for _, rg := range groups {
		req := reconcile.Request{NamespacedName: types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}}
		if !slices.Contains(reqs, req) {
			reqs = append(reqs, req)
		}
	}
	return reqs
}

// groupChanged passes RolloutGroup updates that change what the planner reads:
// the spec (generation), a deletionTimestamp appearing (foreground deletion,
// a finalizer), after which the group deletes nothing more, or one of the
// annotations that control the rollout by hand (retry, skip-gate, abort,
// promote).
// Status writes, Echelon's own, are not passed.
var groupChanged = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		if (e.ObjectOld.GetDeletionTimestamp() == nil) != (e.ObjectNew.GetDeletionTimestamp() == nil) {
			return true
		}
		old, next := e.ObjectOld.GetAnnotations(), e.ObjectNew.GetAnnotations()
		for _, key := range []string{v1alpha1.AnnotationRetry, v1alpha1.AnnotationSkipGate, v1alpha1.AnnotationAbort, v1alpha1.AnnotationPromote} {
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
var statefulSetChanged = predicates.UpdatedWhen(func(o, n *appsv1.StatefulSet) bool {
	return o.Generation != n.Generation ||
		o.Status.ObservedGeneration != n.Status.ObservedGeneration ||
		o.Status.UpdateRevision != n.Status.UpdateRevision ||
		o.Status.CurrentRevision != n.Status.CurrentRevision ||
		o.Status.Replicas != n.Status.Replicas ||
		o.Status.ReadyReplicas != n.Status.ReadyReplicas ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
		(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil)
})

// budgetChanged passes only PodDisruptionBudget updates that change the
// maxUnavailable it gives: its spec (generation) or the count
// of pods it expects.
var budgetChanged = predicates.UpdatedWhen(func(o, n *policyv1.PodDisruptionBudget) bool {
	return o.Generation != n.Generation || o.Status.ExpectedPods != n.Status.ExpectedPods
})

// podChanged passes only pod updates that change what the planner sees: its
// revision, readiness, phase or deletion, or the echelon.dev/rotate mark.
var podChanged = predicates.UpdatedWhen(func(o, n *corev1.Pod) bool {
	return o.Labels[appsv1.ControllerRevisionHashLabelKey] != n.Labels[appsv1.ControllerRevisionHashLabelKey] ||
		o.Status.Phase != n.Status.Phase ||
		kube.PodReadyCondition(o) != kube.PodReadyCondition(n) ||
		(o.DeletionTimestamp == nil) != (n.DeletionTimestamp == nil) ||
		rotateMarked(o) != rotateMarked(n)
})

// SetupWithManager registers the controller: its watches, their mappings to
// groups and the predicates that drop events the planner does not read.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RolloutGroup{}, builder.WithPredicates(groupChanged)).
		// A group that starts or stops claiming a StatefulSet changes whether the
		// other groups claiming it are blocked.
		Watches(&v1alpha1.RolloutGroup{}, handler.EnqueueRequestsFromMapFunc(r.requestsForGroupsSharingMembers),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.requestsForStatefulSet),
			builder.WithPredicates(statefulSetChanged)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.requestsForPod),
			builder.WithPredicates(podChanged)).
		Watches(&policyv1.PodDisruptionBudget{}, handler.EnqueueRequestsFromMapFunc(r.requestsForBudget),
			builder.WithPredicates(budgetChanged)).
		Watches(&v1alpha1.ZoneDisruptionBudget{}, handler.EnqueueRequestsFromMapFunc(r.requestsForSharedBudget)).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles}).
		Named(controllerName).
		Complete(r)
}
