/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package webhooks

import (
	"testing"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

// A user's resource may claim what a compat mode resource claims: it takes
// its place. Compat resources among themselves, and users' resources among
// themselves, are judged as always.
func TestGrafanaCompatResourcesGiveWay(t *testing.T) {
	compat := func(rg *v1alpha1.RolloutGroup) *v1alpha1.RolloutGroup {
		rg.Labels = map[string]string{v1alpha1.GrafanaCompatLabel: "true"}
		return rg
	}
	objs := NamespaceObjects{
		RolloutGroups:     []v1alpha1.RolloutGroup{*compat(builders.MakeRolloutGroup(testNS, "ingester").Members("zone-a").Obj())},
		ScalingPolicies:   []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "zone-b").Target("StatefulSet", "zone-b").Obj()},
		DelayedDownscales: []v1alpha1.DelayedDownscale{{Spec: v1alpha1.DelayedDownscaleSpec{TargetRef: v1alpha1.ScalingTargetReference{Name: "zone-b"}}}},
	}
	objs.ScalingPolicies[0].Labels = map[string]string{v1alpha1.GrafanaCompatLabel: "true"}

	mine := builders.MakeRolloutGroup(testNS, "mine").Members("zone-a").Obj()
	if errs := ValidateRolloutGroup(mine, objs.withoutGrafanaCompat(mine)); len(errs) > 0 {
		t.Errorf("a user's group over a compat group's member: %v, want allowed", errs)
	}
	other := compat(builders.MakeRolloutGroup(testNS, "other").Members("zone-a").Obj())
	if errs := ValidateRolloutGroup(other, objs.withoutGrafanaCompat(other)); len(errs) != 1 {
		t.Errorf("a second compat group over the same member: %v, want one error", errs)
	}
	policy := builders.MakeScalingPolicy(testNS, "mine").Target("StatefulSet", "zone-b").Obj()
	if errs := ValidateScalingPolicy(policy, objs.withoutGrafanaCompat(policy)); len(errs) > 0 {
		t.Errorf("a user's policy over a compat policy's target: %v, want allowed", errs)
	}
	if got := objs.withoutGrafanaCompat(policy).DelayedDownscales; len(got) != 1 {
		t.Errorf("a user's DelayedDownscale is kept: got %d, want 1", len(got))
	}
}
