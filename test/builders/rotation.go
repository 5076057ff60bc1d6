/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package builders

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Created sets metadata.creationTimestamp: a pod created before a group's
// spec.restartAt is restarted. Built pods have none (the zero time) until
// this sets it.
func (w *PodWrapper) Created(at time.Time) *PodWrapper {
	w.pod.CreationTimestamp = metav1.NewTime(at)
	return w
}

// Annotation sets a pod annotation, e.g. echelon.dev/rotate.
func (w *PodWrapper) Annotation(key, value string) *PodWrapper {
	if w.pod.Annotations == nil {
		w.pod.Annotations = map[string]string{}
	}
	w.pod.Annotations[key] = value
	return w
}

// RestartAt sets spec.restartAt.
func (w *RolloutGroupWrapper) RestartAt(at time.Time) *RolloutGroupWrapper {
	w.rg.Spec.RestartAt = &metav1.Time{Time: at}
	return w
}
