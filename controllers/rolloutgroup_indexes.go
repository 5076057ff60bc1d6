package controllers

import (
	"context"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
)

// requestsForStatefulSet maps a StatefulSet event to the groups that claim it.
func (r *RolloutGroupReconciler) requestsForStatefulSet(ctx context.Context, o client.Object) []reconcile.Request {
	sts, ok := o.(*appsv1.StatefulSet)
	if !ok {
		return nil
	}
	groups, err := lookup.GroupsClaiming(ctx, r.Client, sts.Namespace, sts.Name, sts)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map StatefulSet to RolloutGroups", "statefulset", sts.Name)
		return nil
	}
	return toRequests(groups)
}

// requestsForPod maps a pod event to the groups of its StatefulSet.
func (r *RolloutGroupReconciler) requestsForPod(ctx context.Context, o client.Object) []reconcile.Request {
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
	return toRequests(groups)
}

// requestsForGroupsSharingMembers maps a RolloutGroup event to the other groups
// that claim one of its members.
func (r *RolloutGroupReconciler) requestsForGroupsSharingMembers(ctx context.Context, o client.Object) []reconcile.Request {
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
