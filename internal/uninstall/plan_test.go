/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package uninstall

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
)

func heldStatefulSet(generation, observed int64, current, update string, updated int32) *appsv1.StatefulSet {
	sts := &appsv1.StatefulSet{}
	sts.Generation = generation
	sts.Spec.Replicas = ptr.To[int32](3)
	sts.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](3)}
	sts.Status = appsv1.StatefulSetStatus{
		ObservedGeneration: observed, Replicas: 3, CurrentRevision: current, UpdateRevision: update, UpdatedReplicas: updated,
	}
	return sts
}

func TestJudge(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sts      *appsv1.StatefulSet
		handBack bool
		why      string
	}{
		{"every pod on the update revision", heldStatefulSet(4, 4, "r2", "r2", 3), true, "rolls nothing"},
		{"a template change not yet rolled", heldStatefulSet(5, 5, "r2", "r3", 0), false, "0 of 3 pods are on its update revision r3"},
		{"a rollout stopped halfway", heldStatefulSet(5, 5, "r2", "r3", 2), false, "2 of 3 pods"},
		{"a spec the StatefulSet controller has not seen", heldStatefulSet(6, 5, "r2", "r2", 3), false, "has not seen generation 6"},
		{"missing pods on the one revision (a scale up)", heldStatefulSet(4, 4, "r2", "r2", 1), true, "rolls nothing"},
		{"a status never written", heldStatefulSet(1, 1, "", "", 0), true, "rolls nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := Judge(tc.sts)
			if v.HandBack != tc.handBack || !strings.Contains(v.Why, tc.why) {
				t.Errorf("Judge = %+v, want handBack %v and a reason containing %q", v, tc.handBack, tc.why)
			}
		})
	}
}
