package controllers

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Cache index names. Mapping a StatefulSet or pod event to its groups goes through
// these indexes, so no event causes a scan of every group or pod.
const (
	// indexGroupMember indexes RolloutGroups by each listed member name.
	indexGroupMember = "echelon.dev/member"
	// indexGroupUsesSelector indexes RolloutGroups that select members by label.
	indexGroupUsesSelector = "echelon.dev/uses-selector"
	// indexPodOwner indexes pods by the name of the StatefulSet controlling them.
	indexPodOwner = "echelon.dev/owner-statefulset"
)

func setupIndexes(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.RolloutGroup{}, indexGroupMember, func(o client.Object) []string {
		rg := o.(*v1alpha1.RolloutGroup)
		names := make([]string, 0, len(rg.Spec.StatefulSets))
		for _, m := range rg.Spec.StatefulSets {
			names = append(names, m.Name)
		}
		return names
	}); err != nil {
		return fmt.Errorf("index RolloutGroups by member: %w", err)
	}
	if err := idx.IndexField(ctx, &v1alpha1.RolloutGroup{}, indexGroupUsesSelector, func(o client.Object) []string {
		if o.(*v1alpha1.RolloutGroup).Spec.Selector != nil {
			return []string{"true"}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index RolloutGroups by selector use: %w", err)
	}
	if err := idx.IndexField(ctx, &corev1.Pod{}, indexPodOwner, func(o client.Object) []string {
		if name := ownerStatefulSet(o); name != "" {
			return []string{name}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index pods by owner StatefulSet: %w", err)
	}
	return nil
}

// ownerStatefulSet is the name of the StatefulSet controlling o, or "".
func ownerStatefulSet(o client.Object) string {
	ref := metav1.GetControllerOf(o)
	if ref == nil || ref.Kind != "StatefulSet" || ref.APIVersion != appsv1.SchemeGroupVersion.String() {
		return ""
	}
	return ref.Name
}

// groupsClaiming returns the RolloutGroups that claim the StatefulSet, by name or
// by selector. sts may be nil (unknown labels), in which case only groups that
// list the name are found.
func groupsClaiming(ctx context.Context, c client.Reader, namespace, name string, sts *appsv1.StatefulSet) ([]v1alpha1.RolloutGroup, error) {
	var byName v1alpha1.RolloutGroupList
	if err := c.List(ctx, &byName, client.InNamespace(namespace), client.MatchingFields{indexGroupMember: name}); err != nil {
		return nil, fmt.Errorf("list RolloutGroups listing %s: %w", name, err)
	}
	groups := byName.Items
	if sts == nil {
		return groups, nil
	}
	var bySelector v1alpha1.RolloutGroupList
	if err := c.List(ctx, &bySelector, client.InNamespace(namespace), client.MatchingFields{indexGroupUsesSelector: "true"}); err != nil {
		return nil, fmt.Errorf("list RolloutGroups with selectors: %w", err)
	}
	for _, rg := range bySelector.Items {
		sel, err := metav1.LabelSelectorAsSelector(rg.Spec.Selector)
		if err == nil && sel.Matches(labels.Set(sts.Labels)) {
			groups = append(groups, rg)
		}
	}
	return groups, nil
}

// requestsForStatefulSet maps a StatefulSet event to the groups that claim it.
func (r *RolloutGroupReconciler) requestsForStatefulSet(ctx context.Context, o client.Object) []reconcile.Request {
	sts, ok := o.(*appsv1.StatefulSet)
	if !ok {
		return nil
	}
	groups, err := groupsClaiming(ctx, r.Client, sts.Namespace, sts.Name, sts)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map StatefulSet to RolloutGroups", "statefulset", sts.Name)
		return nil
	}
	return toRequests(groups)
}

// requestsForPod maps a pod event to the groups of its StatefulSet.
func (r *RolloutGroupReconciler) requestsForPod(ctx context.Context, o client.Object) []reconcile.Request {
	name := ownerStatefulSet(o)
	if name == "" {
		return nil
	}
	sts := &appsv1.StatefulSet{}
	if err := r.Get(ctx, types.NamespacedName{Namespace: o.GetNamespace(), Name: name}, sts); err != nil {
		sts = nil // deleted or not cached yet: groups listing it by name still get the event
	}
	groups, err := groupsClaiming(ctx, r.Client, o.GetNamespace(), name, sts)
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
	members, _, err := resolveMembers(ctx, r.Client, rg)
	if err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map RolloutGroup to groups sharing its members", "rolloutgroup", rg.Name)
		return nil
	}
	var others []v1alpha1.RolloutGroup
	for _, m := range members {
		groups, err := groupsClaiming(ctx, r.Client, rg.Namespace, m.Name, m.StatefulSet)
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
