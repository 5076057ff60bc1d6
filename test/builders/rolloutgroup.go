/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package builders

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// RolloutGroupWrapper builds a RolloutGroup.
type RolloutGroupWrapper struct{ rg v1alpha1.RolloutGroup }

// MakeRolloutGroup starts a RolloutGroup with no members and the API's
// defaults left unset.
func MakeRolloutGroup(namespace, name string) *RolloutGroupWrapper {
	return &RolloutGroupWrapper{rg: v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}
}

// Obj returns a deep copy of the RolloutGroup built so far.
func (w *RolloutGroupWrapper) Obj() *v1alpha1.RolloutGroup {
	return w.rg.DeepCopy()
}

// Members appends members by name, rolled in the order given.
func (w *RolloutGroupWrapper) Members(names ...string) *RolloutGroupWrapper {
	for _, n := range names {
		w.rg.Spec.StatefulSets = append(w.rg.Spec.StatefulSets, v1alpha1.RolloutMember{Name: n})
	}
	return w
}

// MemberMaxUnavailable appends a member with its own maxUnavailable, which
// overrides the group's.
func (w *RolloutGroupWrapper) MemberMaxUnavailable(name string, n int32) *RolloutGroupWrapper {
	w.rg.Spec.StatefulSets = append(w.rg.Spec.StatefulSets, v1alpha1.RolloutMember{Name: name, MaxUnavailable: ptr.To(intstr.FromInt32(n))})
	return w
}

// Selector adds a label to spec.selector.matchLabels: StatefulSets that carry
// it are members too.
func (w *RolloutGroupWrapper) Selector(key, value string) *RolloutGroupWrapper {
	if w.rg.Spec.Selector == nil {
		w.rg.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{}}
	}
	w.rg.Spec.Selector.MatchLabels[key] = value
	return w
}

// MaxUnavailable sets spec.maxUnavailable to a number of pods.
func (w *RolloutGroupWrapper) MaxUnavailable(n int32) *RolloutGroupWrapper {
	w.rg.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(n))
	return w
}

// MaxUnavailablePercent sets spec.maxUnavailable to a percentage of each
// member's replicas.
func (w *RolloutGroupWrapper) MaxUnavailablePercent(percent int) *RolloutGroupWrapper {
	w.rg.Spec.MaxUnavailable = ptr.To(intstr.FromString(fmt.Sprintf("%d%%", percent)))
	return w
}

// MaxUnavailableFrom sets spec.maxUnavailableFrom.
func (w *RolloutGroupWrapper) MaxUnavailableFrom(from v1alpha1.MaxUnavailableSource) *RolloutGroupWrapper {
	w.rg.Spec.MaxUnavailableFrom = from
	return w
}

// Paused sets spec.paused.
func (w *RolloutGroupWrapper) Paused() *RolloutGroupWrapper {
	w.rg.Spec.Paused = true
	return w
}

// MinReadySeconds sets spec.minReadySeconds.
func (w *RolloutGroupWrapper) MinReadySeconds(s int32) *RolloutGroupWrapper {
	w.rg.Spec.MinReadySeconds = s
	return w
}

// BatchInterval sets spec.batchInterval.
func (w *RolloutGroupWrapper) BatchInterval(d time.Duration) *RolloutGroupWrapper {
	w.rg.Spec.BatchInterval = &metav1.Duration{Duration: d}
	return w
}

// ProgressDeadline sets spec.progressDeadline.
func (w *RolloutGroupWrapper) ProgressDeadline(d time.Duration) *RolloutGroupWrapper {
	w.rg.Spec.ProgressDeadline = &metav1.Duration{Duration: d}
	return w
}

// PodDeletion sets spec.podDeletion: Delete or Evict.
func (w *RolloutGroupWrapper) PodDeletion(p v1alpha1.PodDeletionPolicy) *RolloutGroupWrapper {
	w.rg.Spec.PodDeletion = p
	return w
}

// Analysis sets spec.analysis.
func (w *RolloutGroupWrapper) Analysis(a *v1alpha1.RolloutAnalysis) *RolloutGroupWrapper {
	w.rg.Spec.Analysis = a.DeepCopy()
	return w
}

// OnFailure sets spec.onFailure.
func (w *RolloutGroupWrapper) OnFailure(p v1alpha1.FailurePolicy) *RolloutGroupWrapper {
	w.rg.Spec.OnFailure = p
	return w
}

// Notify appends a receiver of spec.notifications whose URL is key "url" of
// Secret secret; events empty sends every event.
func (w *RolloutGroupWrapper) Notify(name, secret string, format v1alpha1.NotificationFormat, events ...v1alpha1.NotificationEventType) *RolloutGroupWrapper {
	w.rg.Spec.Notifications = append(w.rg.Spec.Notifications, receiver(name, secret, format, events))
	return w
}

// Callback sets spec.callback to the URL in key "url" of Secret secret.
func (w *RolloutGroupWrapper) Callback(secret string) *RolloutGroupWrapper {
	w.rg.Spec.Callback = &v1alpha1.RolloutCallback{SecretRef: v1alpha1.LocalSecretReference{Name: secret}}
	return w
}

// RolloutID sets spec.rolloutId.
func (w *RolloutGroupWrapper) RolloutID(id string) *RolloutGroupWrapper {
	w.rg.Spec.RolloutID = id
	return w
}
