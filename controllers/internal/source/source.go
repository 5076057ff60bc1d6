/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package source says where a resource's actions come from: a resource a
// user wrote, or one compat mode keeps from the Grafana rollout-operator's
// labels and annotations (v1alpha1.GrafanaCompatLabel). Its recorder puts
// that in every Event's message, so that `kubectl events` tells the two
// apart without a look at the resource.
package source

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// GrafanaNote ends the message of every Event about a resource compat mode
// keeps.
const GrafanaNote = " (from Grafana annotations)"

// IsGrafanaCompat says whether obj is a resource compat mode keeps.
func IsGrafanaCompat(obj runtime.Object) bool {
	m, err := meta.Accessor(obj)
	return err == nil && m.GetLabels()[v1alpha1.GrafanaCompatLabel] == "true"
}

// Recorder returns rec, with GrafanaNote added to the message of the Events
// whose regarding object compat mode keeps.
func Recorder(rec recorder.EventRecorder) recorder.EventRecorder {
	return sourced{rec}
}

type sourced struct{ recorder.EventRecorder }

func (s sourced) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	s.EventRecorder.Eventf(regarding, related, eventtype, reason, action, withSource(regarding, note), args...)
}

func (s sourced) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	s.EventRecorder.AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, withSource(regarding, note), args...)
}

func withSource(regarding runtime.Object, note string) string {
	if IsGrafanaCompat(regarding) {
		return note + GrafanaNote
	}
	return note
}
