/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package builders

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// ScalingPolicyWrapper builds a ScalingPolicy.
type ScalingPolicyWrapper struct{ sp v1alpha1.ScalingPolicy }

// MakeScalingPolicy starts a ScalingPolicy with no target and no source of
// replicas; Target names the workload it scales.
func MakeScalingPolicy(namespace, name string) *ScalingPolicyWrapper {
	return &ScalingPolicyWrapper{sp: v1alpha1.ScalingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}}
}

// Obj returns a deep copy of the ScalingPolicy built so far.
func (w *ScalingPolicyWrapper) Obj() *v1alpha1.ScalingPolicy {
	return w.sp.DeepCopy()
}

// Target sets spec.targetRef; kind "" leaves the API's default, StatefulSet.
func (w *ScalingPolicyWrapper) Target(kind, name string) *ScalingPolicyWrapper {
	w.sp.Spec.TargetRef = v1alpha1.PolicyTargetReference{Kind: kind, Name: name}
	return w
}

// Leader makes the policy follow the spec.replicas of the named StatefulSet.
func (w *ScalingPolicyWrapper) Leader(name string) *ScalingPolicyWrapper {
	w.sp.Spec.ReplicasFrom = &v1alpha1.ReplicasSource{Leader: &v1alpha1.LeaderReference{Name: name}}
	return w
}

// Replicas sets spec.replicas: the policy is its own source.
func (w *ScalingPolicyWrapper) Replicas(n int32) *ScalingPolicyWrapper {
	w.sp.Spec.Replicas = ptr.To(n)
	return w
}

// ZoneDelay sets spec.minTimeBetweenZoneDownscales.
func (w *ScalingPolicyWrapper) ZoneDelay(d time.Duration) *ScalingPolicyWrapper {
	w.sp.Spec.MinTimeBetweenZoneDownscales = &metav1.Duration{Duration: d}
	return w
}

// Paused sets spec.paused.
func (w *ScalingPolicyWrapper) Paused() *ScalingPolicyWrapper {
	w.sp.Spec.Paused = true
	return w
}

// DownscaleAllowed sets spec.downscale.allowed.
func (w *ScalingPolicyWrapper) DownscaleAllowed(allowed bool) *ScalingPolicyWrapper {
	w.downscale().Allowed = ptr.To(allowed)
	return w
}

// Prepare sets spec.downscale.prepare: the HTTP endpoint on each pod to call
// before a downscale removes it, and how long a call may take.
func (w *ScalingPolicyWrapper) Prepare(path string, port int32, timeout time.Duration) *ScalingPolicyWrapper {
	w.downscale().Prepare = &v1alpha1.PrepareDownscaleEndpoint{
		PrepareEndpoint: v1alpha1.PrepareEndpoint{Path: path, Port: port, Scheme: "http"},
		Timeout:         &metav1.Duration{Duration: timeout},
	}
	return w
}

func (w *ScalingPolicyWrapper) downscale() *v1alpha1.DownscaleRules {
	if w.sp.Spec.Downscale == nil {
		w.sp.Spec.Downscale = &v1alpha1.DownscaleRules{}
	}
	return w.sp.Spec.Downscale
}

// DelayedDownscaleWrapper builds a DelayedDownscale.
type DelayedDownscaleWrapper struct{ dd v1alpha1.DelayedDownscale }

// MakeDelayedDownscale starts a DelayedDownscale of the StatefulSet of the
// same name; Delay and PrepareEndpoint must still be set for the API to
// accept it.
func MakeDelayedDownscale(namespace, name string) *DelayedDownscaleWrapper {
	return &DelayedDownscaleWrapper{dd: v1alpha1.DelayedDownscale{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       v1alpha1.DelayedDownscaleSpec{TargetRef: v1alpha1.ScalingTargetReference{Name: name}},
	}}
}

// Obj returns a deep copy of the DelayedDownscale built so far.
func (w *DelayedDownscaleWrapper) Obj() *v1alpha1.DelayedDownscale {
	return w.dd.DeepCopy()
}

// Target sets spec.targetRef.name, the StatefulSet it delays.
func (w *DelayedDownscaleWrapper) Target(name string) *DelayedDownscaleWrapper {
	w.dd.Spec.TargetRef.Name = name
	return w
}

// Delay sets spec.delay, a duration such as "1m".
func (w *DelayedDownscaleWrapper) Delay(d string) *DelayedDownscaleWrapper {
	w.dd.Spec.Delay = d
	return w
}

// PrepareEndpoint sets spec.prepareEndpoint: the HTTP path and port on each pod.
func (w *DelayedDownscaleWrapper) PrepareEndpoint(path string, port int32) *DelayedDownscaleWrapper {
	w.dd.Spec.PrepareEndpoint = v1alpha1.PrepareEndpoint{Path: path, Port: port}
	return w
}

// Timeout sets spec.timeout, how long one call to a pod may take.
func (w *DelayedDownscaleWrapper) Timeout(d time.Duration) *DelayedDownscaleWrapper {
	w.dd.Spec.Timeout = &metav1.Duration{Duration: d}
	return w
}

// receiver is a receiver of spec.notifications whose URL is key "url" of
// Secret secret; events empty sends every event of the kind.
func receiver(name, secret string, format v1alpha1.NotificationFormat, events []v1alpha1.NotificationEventType) v1alpha1.NotificationReceiver {
	return v1alpha1.NotificationReceiver{Name: name, SecretRef: v1alpha1.LocalSecretReference{Name: secret}, Format: format, Events: events}
}

// Notify appends a receiver of spec.notifications whose URL is key "url" of
// Secret secret; events empty sends every event.
func (w *ScalingPolicyWrapper) Notify(name, secret string, format v1alpha1.NotificationFormat, events ...v1alpha1.NotificationEventType) *ScalingPolicyWrapper {
	w.sp.Spec.Notifications = append(w.sp.Spec.Notifications, receiver(name, secret, format, events))
	return w
}

// Notify appends a receiver of spec.notifications whose URL is key "url" of
// Secret secret; events empty sends every event.
func (w *DelayedDownscaleWrapper) Notify(name, secret string, format v1alpha1.NotificationFormat, events ...v1alpha1.NotificationEventType) *DelayedDownscaleWrapper {
	w.dd.Spec.Notifications = append(w.dd.Spec.Notifications, receiver(name, secret, format, events))
	return w
}
