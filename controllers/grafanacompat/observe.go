/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package grafanacompat

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/migrate"
)

// observation is what one namespace holds, read from the cache.
type observation struct {
	input        migrate.Input
	statefulSets map[string]*appsv1.StatefulSet
	// compat are the resources compat mode made; the user's are the others.
	compat           []client.Object
	groups           []v1alpha1.RolloutGroup
	policies         []v1alpha1.ScalingPolicy
	delayedDownscale []v1alpha1.DelayedDownscale
	budgets          []v1alpha1.ZoneDisruptionBudget
	// zpdbsReadable is false when the ZoneAwarePodDisruptionBudgets could
	// not be read (no CRD, no permission): none is translated.
	zpdbsReadable bool
}

func (r *Reconciler) observe(ctx context.Context, ns string) (*observation, error) {
	in := client.InNamespace(ns)
	var stsList appsv1.StatefulSetList
	var deployments appsv1.DeploymentList
	var replicaSets appsv1.ReplicaSetList
	var groups v1alpha1.RolloutGroupList
	var policies v1alpha1.ScalingPolicyList
	var delayed v1alpha1.DelayedDownscaleList
	var budgets v1alpha1.ZoneDisruptionBudgetList
	for _, list := range []client.ObjectList{&stsList, &deployments, &replicaSets, &groups, &policies, &delayed, &budgets} {
		if err := r.client.List(ctx, list, in); err != nil {
			return nil, fmt.Errorf("list %T: %w", list, err)
		}
	}
	obs := &observation{statefulSets: map[string]*appsv1.StatefulSet{}}
	for i := range stsList.Items {
		sts := &stsList.Items[i]
		obs.statefulSets[sts.Name] = sts
		obs.input.StatefulSets = append(obs.input.StatefulSets, *sts.DeepCopy())
	}
	for i := range deployments.Items {
		obs.input.Deployments = append(obs.input.Deployments, *deployments.Items[i].DeepCopy())
	}
	for i := range replicaSets.Items {
		if len(replicaSets.Items[i].OwnerReferences) == 0 { // a Deployment's: its Deployment is read
			obs.input.ReplicaSets = append(obs.input.ReplicaSets, *replicaSets.Items[i].DeepCopy())
		}
	}
	for i := range groups.Items {
		if isCompat(&groups.Items[i]) {
			obs.compat = append(obs.compat, &groups.Items[i])
		} else {
			obs.groups = append(obs.groups, groups.Items[i])
		}
	}
	for i := range policies.Items {
		if isCompat(&policies.Items[i]) {
			obs.compat = append(obs.compat, &policies.Items[i])
		} else {
			obs.policies = append(obs.policies, policies.Items[i])
		}
	}
	for i := range delayed.Items {
		if isCompat(&delayed.Items[i]) {
			obs.compat = append(obs.compat, &delayed.Items[i])
		} else {
			obs.delayedDownscale = append(obs.delayedDownscale, delayed.Items[i])
		}
	}
	for i := range budgets.Items {
		if isCompat(&budgets.Items[i]) {
			obs.compat = append(obs.compat, &budgets.Items[i])
		} else {
			obs.budgets = append(obs.budgets, budgets.Items[i])
		}
	}
	pdbs, readable, err := r.zpdbs.list(ctx, ns)
	if err != nil {
		return nil, err
	}
	obs.input.ZoneAwarePDBs, obs.zpdbsReadable = pdbs, readable
	return obs, nil
}

func isCompat(obj client.Object) bool {
	return obj.GetLabels()[CompatLabel] == "true"
}

// overriddenBy names the user's resource that takes the place of obj, a
// translated one: it has obj's name, or claims a StatefulSet obj would.
// Empty when none does.
func (o *observation) overriddenBy(obj *unstructured.Unstructured) string {
	ref := func(kind, name string) string { return kind + " " + name }
	switch obj.GetKind() {
	case "RolloutGroup":
		members := claimedStatefulSets(obj)
		for i := range o.groups {
			g := &o.groups[i]
			if g.Name == obj.GetName() {
				return ref("RolloutGroup", g.Name)
			}
			for _, m := range members {
				if lookup.Claims(g, m, o.statefulSets[m]) {
					return ref("RolloutGroup", g.Name)
				}
			}
		}
	case "ScalingPolicy":
		kind, _, _ := unstructured.NestedString(obj.Object, "spec", "targetRef", "kind")
		name, _, _ := unstructured.NestedString(obj.Object, "spec", "targetRef", "name")
		for _, p := range o.policies {
			if p.Name == obj.GetName() || p.Spec.TargetRef.KindOrDefault() == kind && p.Spec.TargetRef.Name == name {
				return ref("ScalingPolicy", p.Name)
			}
		}
	case "ZoneDisruptionBudget":
		for _, b := range o.budgets {
			if b.Name == obj.GetName() {
				return ref("ZoneDisruptionBudget", b.Name)
			}
		}
	case "DelayedDownscale":
		name, _, _ := unstructured.NestedString(obj.Object, "spec", "targetRef", "name")
		for _, d := range o.delayedDownscale {
			if d.Name == obj.GetName() || d.Spec.TargetRef.Name == name {
				return ref("DelayedDownscale", d.Name)
			}
		}
	}
	return ""
}

// statefulSetRef is the StatefulSet a finding's object names
// ("StatefulSet <namespace>/<name>"), or nil.
func (o *observation) statefulSetRef(object string) *appsv1.StatefulSet {
	rest, ok := strings.CutPrefix(object, v1alpha1.TargetKindStatefulSet+" ")
	if !ok {
		return nil
	}
	_, name, _ := strings.Cut(rest, "/")
	return o.statefulSets[name]
}
