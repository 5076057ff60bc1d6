/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package webhooks

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// withoutGrafanaCompat drops the resources compat mode keeps
// (v1alpha1.GrafanaCompatLabel) when obj is not one of them: a user's own
// resource takes their place, and compat mode then deletes them, so they
// must not stand in its way.
func (o NamespaceObjects) withoutGrafanaCompat(obj runtime.Object) NamespaceObjects {
	if m, err := meta.Accessor(obj); err != nil || m.GetLabels()[v1alpha1.GrafanaCompatLabel] == "true" {
		return o
	}
	out := NamespaceObjects{StatefulSets: o.StatefulSets}
	for _, rg := range o.RolloutGroups {
		if rg.Labels[v1alpha1.GrafanaCompatLabel] != "true" {
			out.RolloutGroups = append(out.RolloutGroups, rg)
		}
	}
	for _, sp := range o.ScalingPolicies {
		if sp.Labels[v1alpha1.GrafanaCompatLabel] != "true" {
			out.ScalingPolicies = append(out.ScalingPolicies, sp)
		}
	}
	for _, dd := range o.DelayedDownscales {
		if dd.Labels[v1alpha1.GrafanaCompatLabel] != "true" {
			out.DelayedDownscales = append(out.DelayedDownscales, dd)
		}
	}
	return out
}
