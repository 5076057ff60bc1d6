package scalingpolicy

import (
	"context"
	"slices"

	"github.com/echelon-operator/echelon/controllers/internal/predicates"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/migrate"
)

// requestsForStatefulSet maps a StatefulSet event to the policies that scale it
// or follow it, and to the policies of the other members of its RolloutGroups,
// whose downscales wait for it to be whole again.
func (r *Reconciler) requestsForStatefulSet(ctx context.Context, o client.Object) []reconcile.Request {
	sts, ok := o.(*appsv1.StatefulSet)
	if !ok {
		return nil
	}
	names := []string{sts.Name}
	groups, err := lookup.GroupsClaiming(ctx, r.Client, sts.Namespace, sts.Name, sts)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map StatefulSet to ScalingPolicies", "statefulset", sts.Name)
		return nil
	}
	for i := range groups {
		names = append(names, r.memberNames(ctx, &groups[i])...)
	}
	var reqs []reconcile.Request
	for _, name := range names {
		reqs = append(reqs, r.policiesBy(ctx, sts.Namespace, lookup.IndexPolicyTarget, name)...)
	}
	reqs = append(reqs, r.policiesBy(ctx, sts.Namespace, lookup.IndexPolicyLeader, sts.Name)...)
	return dedupe(reqs)
}

// requestsForGroup maps a RolloutGroup event (a rollout moving to another
// member, ending) to the policies of its members.
func (r *Reconciler) requestsForGroup(ctx context.Context, o client.Object) []reconcile.Request {
	rg, ok := o.(*v1alpha1.RolloutGroup)
	if !ok {
		return nil
	}
	var reqs []reconcile.Request
	for _, name := range r.memberNames(ctx, rg) {
		reqs = append(reqs, r.policiesBy(ctx, rg.Namespace, lookup.IndexPolicyTarget, name)...)
	}
	return dedupe(reqs)
}

// requestsForPolicy maps a policy event to the other policies whose decision
// depends on it: those with the same target (claimed twice) and those of the
// other members of the target's RolloutGroups (zone delay).
func (r *Reconciler) requestsForPolicy(ctx context.Context, o client.Object) []reconcile.Request {
	sp, ok := o.(*v1alpha1.ScalingPolicy)
	if !ok {
		return nil
	}
	if !sp.Spec.TargetRef.IsStatefulSet() {
		return nil // a guarded Deployment or ReplicaSet: no other policy depends on it
	}
	names := []string{sp.Spec.TargetRef.Name}
	target, err := lookup.StatefulSet(ctx, r.Client, sp.Namespace, sp.Spec.TargetRef.Name)
	var groups []v1alpha1.RolloutGroup
	if err == nil {
		groups, err = lookup.GroupsClaiming(ctx, r.Client, sp.Namespace, sp.Spec.TargetRef.Name, target)
	}
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map ScalingPolicy to ScalingPolicies", "scalingpolicy", sp.Name)
		return nil
	}
	for i := range groups {
		names = append(names, r.memberNames(ctx, &groups[i])...)
	}
	var reqs []reconcile.Request
	for _, name := range names {
		for _, req := range r.policiesBy(ctx, sp.Namespace, lookup.IndexPolicyTarget, name) {
			if req.Name != sp.Name {
				reqs = append(reqs, req)
			}
		}
	}
	return dedupe(reqs)
}

// requestsForDelayed maps a DelayedDownscale event (pods prepared long enough)
// to the policy of its target.
func (r *Reconciler) requestsForDelayed(ctx context.Context, o client.Object) []reconcile.Request {
	dd, ok := o.(*v1alpha1.DelayedDownscale)
	if !ok {
		return nil
	}
	return r.policiesBy(ctx, dd.Namespace, lookup.IndexPolicyTarget, dd.Spec.TargetRef.Name)
}

// requestsForResource maps an event of a source resource to its policies.
func (r *Reconciler) requestsForResource(ctx context.Context, o client.Object) []reconcile.Request {
	gvk := o.GetObjectKind().GroupVersionKind()
	return r.policiesBy(ctx, o.GetNamespace(), lookup.IndexPolicyResource, lookup.ResourceKey(gvk.Group, gvk.Kind, o.GetName()))
}

func (r *Reconciler) policiesBy(ctx context.Context, namespace, index, value string) []reconcile.Request {
	var list v1alpha1.ScalingPolicyList
	if err := r.List(ctx, &list, client.InNamespace(namespace), client.MatchingFields{index: value}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "list ScalingPolicies", "index", index, "value", value)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, sp := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: sp.Namespace, Name: sp.Name}})
	}
	return reqs
}

func (r *Reconciler) memberNames(ctx context.Context, rg *v1alpha1.RolloutGroup) []string {
	members, _, err := lookup.ResolveMembers(ctx, r.Client, rg)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "resolve RolloutGroup members", "rolloutgroup", rg.Name)
		return nil
	}
	names := make([]string, 0, len(members))
	for _, m := range members {
		names = append(names, m.Name)
	}
	return names
}

func dedupe(reqs []reconcile.Request) []reconcile.Request {
	out := reqs[:0]
	for _, r := range reqs {
		if !slices.Contains(out, r) {
			out = append(out, r)
		}
	}
	return out
}

// groupRolloutChanged passes RolloutGroup updates that change which member is
// rolled, or whether a rollout is open: what the interlock and the group's
// disruption budget read. A hold recorded in status.disruption is not: a
// downscale it stops asks again when it lapses.
var groupRolloutChanged = predicates.UpdatedWhen(func(o, n *v1alpha1.RolloutGroup) bool {
	return o.Generation != n.Generation || o.Status.Phase != n.Status.Phase || o.Status.CurrentStatefulSet != n.Status.CurrentStatefulSet ||
		!equality.Semantic.DeepEqual(o.Status.RolloutStartTime, n.Status.RolloutStartTime) ||
		!equality.Semantic.DeepEqual(o.Status.RolloutCompletionTime, n.Status.RolloutCompletionTime)
})

// policyChanged passes ScalingPolicy updates that other policies read: a new
// target (claimed twice) and a recorded downscale (zone delay).
var policyChanged = predicates.UpdatedWhen(func(o, n *v1alpha1.ScalingPolicy) bool {
	return o.Spec.TargetRef != n.Spec.TargetRef || !equality.Semantic.DeepEqual(o.Status.LastDownscaleTime, n.Status.LastDownscaleTime)
})

// delayedEligibleChanged passes DelayedDownscale updates that move the floor.
var delayedEligibleChanged = predicates.UpdatedWhen(func(o, n *v1alpha1.DelayedDownscale) bool {
	return !equality.Semantic.DeepEqual(o.Status.EligibleReplicas, n.Status.EligibleReplicas) ||
		o.Status.Replicas != n.Status.Replicas || !equality.Semantic.DeepEqual(o.Status.DesiredReplicas, n.Status.DesiredReplicas)
})

// statefulSetChanged passes the StatefulSet updates a policy reads: its
// replicas (spec and status, Ready count) and generation, and the Grafana
// protocol's record of its last downscale, which the zone delay of a group
// compat mode keeps counts from.
var statefulSetChanged = predicates.UpdatedWhen(func(o, n *appsv1.StatefulSet) bool {
	return o.Generation != n.Generation || o.Status.ObservedGeneration != n.Status.ObservedGeneration ||
		o.Status.Replicas != n.Status.Replicas || o.Status.ReadyReplicas != n.Status.ReadyReplicas ||
		!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
		o.Annotations[migrate.LastDownscaleAnnotation] != n.Annotations[migrate.LastDownscaleAnnotation]
})

// SetupWithManager registers the controller and its watches; source resources
// are watched as policies name them (sourceWatches).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ScalingPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ScalingPolicy{}, handler.EnqueueRequestsFromMapFunc(r.requestsForPolicy), builder.WithPredicates(policyChanged)).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.requestsForStatefulSet), builder.WithPredicates(statefulSetChanged)).
		Watches(&v1alpha1.RolloutGroup{}, handler.EnqueueRequestsFromMapFunc(r.requestsForGroup), builder.WithPredicates(groupRolloutChanged)).
		Watches(&v1alpha1.DelayedDownscale{}, handler.EnqueueRequestsFromMapFunc(r.requestsForDelayed), builder.WithPredicates(delayedEligibleChanged)).
		Named(controllerName).
		Build(r)
	if err != nil {
		return err
	}
	r.sources.controller = c
	return nil
}
