/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package grafanacompat

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

func translated(kind, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetKind(kind)
	u.SetName(name)
	return u
}

func TestOverriddenBy(t *testing.T) {
	group := translated("RolloutGroup", "ingester", map[string]any{"statefulSets": []any{map[string]any{"name": "zone-a"}, map[string]any{"name": "zone-b"}}})
	policy := translated("ScalingPolicy", "zone-b", map[string]any{"targetRef": map[string]any{"kind": "StatefulSet", "name": "zone-b"}})
	delayed := translated("DelayedDownscale", "zone-b", map[string]any{"targetRef": map[string]any{"kind": "StatefulSet", "name": "zone-b"}})
	zoneB := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "zone-b", Labels: map[string]string{"team": "x"}}}

	for _, tc := range []struct {
		name string
		obs  observation
		obj  *unstructured.Unstructured
		want string
	}{
		{"nothing of the user's", observation{}, group, ""},
		{"a group listing one member", observation{groups: []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup("ns", "mine").Members("zone-b").Obj()}}, group, "RolloutGroup mine"},
		{"a group selecting one member", observation{
			statefulSets: map[string]*appsv1.StatefulSet{"zone-b": zoneB},
			groups:       []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup("ns", "by-label").Selector("team", "x").Obj()},
		}, group, "RolloutGroup by-label"},
		{"a group of other StatefulSets with the same name", observation{groups: []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup("ns", "ingester").Members("other").Obj()}}, group, "RolloutGroup ingester"},
		{"a group of other StatefulSets", observation{groups: []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup("ns", "other").Members("zone-c").Obj()}}, group, ""},
		{"a policy of the same target", observation{policies: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy("ns", "mine").Target("StatefulSet", "zone-b").Obj()}}, policy, "ScalingPolicy mine"},
		{"a policy of a Deployment of that name", observation{policies: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy("ns", "mine").Target("Deployment", "zone-b").Obj()}}, policy, ""},
		{"a delayed downscale of the same target", observation{delayedDownscale: []v1alpha1.DelayedDownscale{{ObjectMeta: metav1.ObjectMeta{Name: "mine"}, Spec: v1alpha1.DelayedDownscaleSpec{TargetRef: v1alpha1.ScalingTargetReference{Name: "zone-b"}}}}}, delayed, "DelayedDownscale mine"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.obs.overriddenBy(tc.obj); got != tc.want {
				t.Errorf("overriddenBy = %q, want %q", got, tc.want)
			}
		})
	}
}
