/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package builders

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// ZoneBudgetWrapper builds a zone budget: a ZoneDisruptionBudget's, or a
// RolloutGroup's spec.disruptionBudget.
type ZoneBudgetWrapper struct{ b v1alpha1.ZoneBudget }

// MakeZoneBudget starts a zone budget with every field unset.
func MakeZoneBudget() *ZoneBudgetWrapper { return &ZoneBudgetWrapper{} }

// Obj returns a deep copy of the budget built so far.
func (w *ZoneBudgetWrapper) Obj() *v1alpha1.ZoneBudget { return w.b.DeepCopy() }

// MaxUnavailable sets maxUnavailable to a number of pods.
func (w *ZoneBudgetWrapper) MaxUnavailable(n int32) *ZoneBudgetWrapper {
	w.b.MaxUnavailable = ptr.To(intstr.FromInt32(n))
	return w
}

// CrossZoneDelay sets crossZoneDelay.
func (w *ZoneBudgetWrapper) CrossZoneDelay(d time.Duration) *ZoneBudgetWrapper {
	w.b.CrossZoneDelay = &metav1.Duration{Duration: d}
	return w
}

// Partitions makes the budget partition-aware: the first group of regex in a
// pod's name is its partition.
func (w *ZoneBudgetWrapper) Partitions(regex string) *ZoneBudgetWrapper {
	w.b.PodNamePartitionRegex = regex
	return w
}

// DisruptionBudget sets spec.disruptionBudget, the budget of evictions of the
// group's pods.
func (w *RolloutGroupWrapper) DisruptionBudget(b *ZoneBudgetWrapper) *RolloutGroupWrapper {
	w.rg.Spec.DisruptionBudget = b.Obj()
	return w
}

// MakeZoneDisruptionBudget is a ZoneDisruptionBudget selecting the pods
// labelled key=value, with budget b.
func MakeZoneDisruptionBudget(namespace, name, key, value string, b *ZoneBudgetWrapper) *v1alpha1.ZoneDisruptionBudget {
	return &v1alpha1.ZoneDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: v1alpha1.ZoneDisruptionBudgetSpec{
			Selector:   metav1.LabelSelector{MatchLabels: map[string]string{key: value}},
			ZoneBudget: *b.Obj(),
		},
	}
}
