package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Target kinds of a ScalingPolicy.
const (
	TargetKindStatefulSet = "StatefulSet"
	TargetKindDeployment  = "Deployment"
	TargetKindReplicaSet  = "ReplicaSet"
)

// ScalingTargetReference names the StatefulSet a DelayedDownscale prepares,
// in its namespace.
type ScalingTargetReference struct {
	// kind of the target: StatefulSet.
	// +optional
	// +kubebuilder:default=StatefulSet
	// +kubebuilder:validation:Enum=StatefulSet
	Kind string `json:"kind,omitempty"`
	// name of the target, in the namespace of the DelayedDownscale.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// PolicyTargetReference names the workload a ScalingPolicy scales or guards,
// in the policy's namespace.
type PolicyTargetReference struct {
	// kind of the target (apps/v1). A StatefulSet is scaled and guarded; a
	// Deployment or ReplicaSet is only guarded: spec.downscale applies to it.
	// +optional
	// +kubebuilder:default=StatefulSet
	// +kubebuilder:validation:Enum=StatefulSet;Deployment;ReplicaSet
	Kind string `json:"kind,omitempty"`
	// name of the target, in the namespace of the ScalingPolicy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// KindOrDefault is the target's kind with the API's default: an object
// stored before the default existed, or built in Go, has Kind "".
func (r PolicyTargetReference) KindOrDefault() string {
	if r.Kind == "" {
		return TargetKindStatefulSet
	}
	return r.Kind
}

// IsStatefulSet reports whether the target is a StatefulSet, the one kind a
// policy scales.
func (r PolicyTargetReference) IsStatefulSet() bool {
	return r.KindOrDefault() == TargetKindStatefulSet
}

// LeaderReference names the StatefulSet whose spec.replicas a target follows.
type LeaderReference struct {
	// name of the leader StatefulSet, in the namespace of the ScalingPolicy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ScaleResourceReference names any object with a scale subresource, such as a
// Deployment or a custom resource like Grafana's ReplicaTemplate.
type ScaleResourceReference struct {
	// apiVersion of the resource, e.g. "apps/v1" or "rollout-operator.grafana.com/v1".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`
	// kind of the resource, e.g. "Deployment" or "ReplicaTemplate".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// name of the resource, in the namespace of the ScalingPolicy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ReplicasSource says where a target's replicas come from: exactly one of
// leader or resource.
// +kubebuilder:validation:XValidation:rule="has(self.leader) != has(self.resource)",message="spec.replicasFrom must set exactly one of leader or resource"
type ReplicasSource struct {
	// leader is another StatefulSet: the target follows its spec.replicas.
	// +optional
	Leader *LeaderReference `json:"leader,omitempty"`
	// resource is any object with a scale subresource: the target follows the
	// replicas of its scale subresource.
	// +optional
	Resource *ScaleResourceReference `json:"resource,omitempty"`
}

// DownscaleRules guard decreases of the target's replicas, whoever makes them
// (a person, a pipeline, an autoscaler): Echelon's admission webhooks enforce
// them in the API server.
type DownscaleRules struct {
	// allowed: false makes the no-downscale webhook reject every decrease of
	// the target's replicas, through a spec update or the scale subresource
	// (kubectl scale), except those made by this policy's own controller,
	// which follows its source. Defaults to true.
	// +optional
	// +kubebuilder:default=true
	Allowed *bool `json:"allowed,omitempty"`
	// prepare makes the prepare-downscale webhook call every pod a downscale
	// would remove before admitting it, so the pods can hand off their data;
	// when any call fails, the pods already prepared are told to cancel and
	// the downscale is denied. StatefulSet targets only.
	// +optional
	Prepare *PrepareDownscaleEndpoint `json:"prepare,omitempty"`
}

// PrepareDownscaleEndpoint is the HTTP endpoint of each pod that the
// prepare-downscale webhook calls: POST before the pod is removed, DELETE to
// cancel. Any 2xx answer is success. With scheme https the webhook does not
// verify the pod's certificate: pods are addressed by name or IP, which their
// certificates rarely carry.
type PrepareDownscaleEndpoint struct {
	PrepareEndpoint `json:",inline"`
	// timeout of each call. It must be shorter than the webhook's own
	// timeoutSeconds (10 s in the chart), so that a pod that hangs is
	// reported by name and the others are cancelled before the API server
	// gives up. Defaults to 5s.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// ScalingPolicySpec says how one StatefulSet is scaled, and how the downscales
// of a StatefulSet, Deployment or ReplicaSet are guarded.
// +kubebuilder:validation:XValidation:rule="!(has(self.replicasFrom) && has(self.replicas))",message="at most one source: spec.replicasFrom (a leader or a resource) or spec.replicas (the ScalingPolicy itself, e.g. scaled by an HPA); with neither, the policy only guards downscales"
// +kubebuilder:validation:XValidation:rule="self.targetRef.kind == 'StatefulSet' || !(has(self.replicasFrom) || has(self.replicas) || has(self.forceReplicas))",message="spec.targetRef.kind Deployment or ReplicaSet is only guarded: spec.replicasFrom, spec.replicas and spec.forceReplicas apply to StatefulSet targets"
// +kubebuilder:validation:XValidation:rule="self.targetRef.kind == 'StatefulSet' || !has(self.downscale) || !has(self.downscale.prepare)",message="spec.downscale.prepare applies to StatefulSet targets only"
// +kubebuilder:validation:XValidation:rule="!has(self.replicasFrom) || !has(self.replicasFrom.leader) || self.replicasFrom.leader.name != self.targetRef.name",message="spec.replicasFrom.leader.name must not be spec.targetRef.name: a StatefulSet cannot follow itself"
// +kubebuilder:validation:XValidation:rule="!has(self.writeBack) || has(self.replicasFrom) && has(self.replicasFrom.resource)",message="spec.writeBack applies only with spec.replicasFrom.resource"
type ScalingPolicySpec struct {
	// targetRef is the StatefulSet this policy scales, or the StatefulSet,
	// Deployment or ReplicaSet whose downscales it guards, in the same namespace.
	// +required
	TargetRef PolicyTargetReference `json:"targetRef"`

	// replicasFrom is where the target's replicas come from: a leader
	// StatefulSet or a resource with a scale subresource. Unset, spec.replicas
	// is the source, and the ScalingPolicy's own scale subresource lets an
	// HorizontalPodAutoscaler or a KEDA ScaledObject scale it.
	// +optional
	ReplicasFrom *ReplicasSource `json:"replicasFrom,omitempty"`

	// replicas is the desired number of replicas when the policy is its own
	// source (no replicasFrom). The scale subresource reads and writes it.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Replicas *int32 `json:"replicas,omitempty"`

	// writeBack, with replicasFrom.resource, writes the target's current
	// replicas into the resource's .status.replicas (through its status
	// subresource), as the Grafana rollout-operator does. Defaults to true.
	// +optional
	WriteBack *bool `json:"writeBack,omitempty"`

	// minTimeBetweenZoneDownscales is the least time between two downscales of
	// StatefulSets of the target's RolloutGroup: the target is downscaled only
	// when no other member was downscaled within it, and every other member is
	// Ready. Unset or "0s", downscales do not wait, whatever the source (the
	// Grafana rollout-operator ignores its zone delay for reference resources;
	// here a resource or self-scaled policy honours it when set).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	MinTimeBetweenZoneDownscales *metav1.Duration `json:"minTimeBetweenZoneDownscales,omitempty"`

	// upscaleOnlyWhenLeaderReady, with replicasFrom.leader, upscales the target
	// only while every replica of the leader is Ready.
	// +optional
	UpscaleOnlyWhenLeaderReady bool `json:"upscaleOnlyWhenLeaderReady,omitempty"`

	// forceReplicas, when set, overrides every source: the target is scaled to
	// it (still under the zone delay and the rollout interlock for a downscale).
	// +optional
	// +kubebuilder:validation:Minimum=0
	ForceReplicas *int32 `json:"forceReplicas,omitempty"`

	// paused freezes the target's replicas: nothing is scaled. Status keeps
	// being reported. The downscale rules still hold.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// downscale guards decreases of the target's replicas, whoever makes
	// them: allowed: false rejects them, prepare calls the pods being removed
	// first. Enforced by the admission webhooks.
	// +optional
	Downscale *DownscaleRules `json:"downscale,omitempty"`

	// hooks are HTTP calls before the policy's own downscales remove pods:
	// beforePodRemoval calls each pod the downscale removes, with reason
	// downscale. See docs/hooks-and-http-gates.md.
	// +optional
	Hooks *ScalingPolicyHooks `json:"hooks,omitempty"`

	// notifications are HTTP receivers told when the policy scales its
	// target, holds a scale or cannot apply it: events Scaled, ScaleHeld and
	// ScaleFailed (docs/notifications.md). Delivery never holds a scale.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(r, !has(r.events) || r.events.all(e, e in ['Scaled', 'ScaleHeld', 'ScaleFailed']))",message="spec.notifications[].events of a ScalingPolicy may name Scaled, ScaleHeld and ScaleFailed only"
	Notifications []NotificationReceiver `json:"notifications,omitempty"`
}

// DownscaleAllowed says whether spec.downscale lets anyone but the policy's
// own controller decrease the target's replicas.
func (s *ScalingPolicySpec) DownscaleAllowed() bool {
	return s.Downscale == nil || s.Downscale.Allowed == nil || *s.Downscale.Allowed
}

// HasSource says whether the policy scales its target (a leader, a resource,
// spec.replicas or forceReplicas), rather than only guarding its downscales.
func (s *ScalingPolicySpec) HasSource() bool {
	return s.ReplicasFrom != nil || s.Replicas != nil || s.ForceReplicas != nil
}

// ScalingPhase summarises what a ScalingPolicy is doing.
// +kubebuilder:validation:Enum=Stable;ScalingUp;ScalingDown;Waiting;Blocked;Paused
type ScalingPhase string

const (
	// ScalingPhaseStable: the target has the desired replicas.
	ScalingPhaseStable ScalingPhase = "Stable"
	// ScalingPhaseScalingUp: the target was just scaled up, or waits for its new
	// pods to be Ready.
	ScalingPhaseScalingUp ScalingPhase = "ScalingUp"
	// ScalingPhaseScalingDown: the target was just scaled down, or waits for its
	// removed pods to be gone.
	ScalingPhaseScalingDown ScalingPhase = "ScalingDown"
	// ScalingPhaseWaiting: a scale is due but waits (zone delay, another member
	// not Ready, a rollout of the target, the leader not Ready); the message says
	// until when or for what.
	ScalingPhaseWaiting ScalingPhase = "Waiting"
	// ScalingPhaseBlocked: the policy cannot be applied (missing target or
	// source, a source without a scale subresource, no permission to read it, a
	// target claimed by two policies); replicas are left untouched.
	ScalingPhaseBlocked ScalingPhase = "Blocked"
	// ScalingPhasePaused: spec.paused is set; replicas are frozen.
	ScalingPhasePaused ScalingPhase = "Paused"
)

// Condition types of a ScalingPolicy.
const (
	// ScalingConditionReady is True when the target has the desired replicas.
	ScalingConditionReady = "Ready"
	// ScalingConditionScaling is True while a scale is under way or due.
	ScalingConditionScaling = "Scaling"
)

// Condition reasons of a ScalingPolicy.
const (
	// ScalingReasonAtDesiredReplicas: the target has the desired replicas.
	ScalingReasonAtDesiredReplicas = "AtDesiredReplicas"
	// ScalingReasonScaledUp: the target's replicas were raised.
	ScalingReasonScaledUp = "ScaledUp"
	// ScalingReasonScaledDown: the target's replicas were lowered.
	ScalingReasonScaledDown = "ScaledDown"
	// ScalingReasonZoneDelay: a downscale waits for minTimeBetweenZoneDownscales
	// after another member's downscale.
	ScalingReasonZoneDelay = "WaitingForZoneDelay"
	// ScalingReasonMembersNotReady: a downscale waited for every other member
	// of the RolloutGroup to be Ready, as their StatefulSets' status said. No
	// longer set: the group's disruption budget judges the members on their
	// pods (ScalingReasonDisruption); kept for status written before.
	ScalingReasonMembersNotReady = "WaitingForMembersReady"
	// ScalingReasonLeaderNotReady: an upscale waits for every leader replica to
	// be Ready (upscaleOnlyWhenLeaderReady).
	ScalingReasonLeaderNotReady = "WaitingForLeaderReady"
	// ScalingReasonRollout: the RolloutGroup is rolling the target, and a
	// scale either way waits for it; or a rollout of the group is open at any
	// member, in any phase (progressing, analyzing, paused or failed
	// half-way), and a downscale waits until it completes.
	ScalingReasonRollout = "WaitingForRollout"
	// ScalingReasonDisruption: another zone of the target's RolloutGroup
	// holds the disruption budget (a rollout, a downscale or an eviction) or
	// is not whole again; the downscale waits for it.
	ScalingReasonDisruption = "WaitingForDisruption"
	// ScalingReasonDelayedDownscale: a downscale waits for the pods of the
	// target's DelayedDownscale to be prepared long enough.
	ScalingReasonDelayedDownscale = "WaitingForDelayedDownscale"
	// ScalingReasonPaused: spec.paused is set.
	ScalingReasonPaused = "Paused"
	// ScalingReasonTargetNotFound: the target StatefulSet does not exist.
	ScalingReasonTargetNotFound = "TargetNotFound"
	// ScalingReasonSourceNotFound: the leader or resource does not exist.
	ScalingReasonSourceNotFound = "SourceNotFound"
	// ScalingReasonSourceUnreadable: the resource has no scale subresource, its
	// kind is unknown, or the operator may not read it.
	ScalingReasonSourceUnreadable = "SourceUnreadable"
	// ScalingReasonGuardOnly: the policy has no replica source; it only
	// guards the target's downscales (spec.downscale).
	ScalingReasonGuardOnly = "GuardingDownscales"
	// ScalingReasonTargetClaimedByOtherPolicy: another ScalingPolicy targets the
	// same StatefulSet; neither scales it.
	ScalingReasonTargetClaimedByOtherPolicy = "TargetClaimedByOtherPolicy"
)

// ScalingPolicyStatus is the observed state of a ScalingPolicy.
type ScalingPolicyStatus struct {
	// observedGeneration is the generation of the spec last acted upon.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// phase summarises what the policy is doing.
	// +optional
	Phase ScalingPhase `json:"phase,omitempty"`
	// message says what the policy waits for, and until when.
	// +optional
	Message string `json:"message,omitempty"`
	// replicas is the target's spec.replicas: the current replicas, also the
	// scale subresource's status.
	// +optional
	Replicas int32 `json:"replicas"`
	// desiredReplicas is what the policy scales the target to.
	// +optional
	DesiredReplicas *int32 `json:"desiredReplicas,omitempty"`
	// sourceReplicas is what the source (leader, resource or spec.replicas) asks for.
	// +optional
	SourceReplicas *int32 `json:"sourceReplicas,omitempty"`
	// source names the source for display: "leader <name>", "<Kind> <name>",
	// "self" or "forced".
	// +optional
	Source string `json:"source,omitempty"`
	// selector is the target's pod selector as a string, for the scale
	// subresource: an HorizontalPodAutoscaler reads pod metrics through it.
	// +optional
	Selector string `json:"selector,omitempty"`
	// lastDownscaleTime is when the target was last downscaled, by this
	// policy or as admitted by the prepare-downscale webhook, to the microsecond: the
	// zone delay of the other members' policies counts from it, and must not
	// come short by a truncated second. Being in status, it survives restarts.
	// +optional
	LastDownscaleTime *metav1.MicroTime `json:"lastDownscaleTime,omitempty"`
	// pendingDownscale is a downscale the prepare-downscale webhook admitted,
	// and recorded in lastDownscaleTime, that the StatefulSet does not show
	// yet: the API server may still refuse it after the webhook (a conflict, a
	// later webhook). Once the StatefulSet shows it, the record is dropped;
	// when it does not by the deadline, its pods are told to cancel and
	// lastDownscaleTime goes back to what it was.
	// +optional
	PendingDownscale *PendingDownscale `json:"pendingDownscale,omitempty"`
	// pendingCancels are the pods of a pendingDownscale told to cancel whose
	// DELETE failed: they may still be prepared, and are told again, with a
	// backoff that doubles up to 5 minutes, until they answer or are gone.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	PendingCancels []PendingCancel `json:"pendingCancels,omitempty"`
	// waitingUntil is when a downscale held by the zone delay may go ahead.
	// +optional
	WaitingUntil *metav1.MicroTime `json:"waitingUntil,omitempty"`
	// waitingSince is when the scale now waiting became due.
	// +optional
	WaitingSince *metav1.Time `json:"waitingSince,omitempty"`
	// notifications is the delivery state of spec.notifications, written by
	// the notifier alone.
	// +optional
	Notifications *NotificationStatus `json:"notifications,omitempty"`
	// conditions: Ready and Scaling.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// PendingDownscale is a downscale the prepare-downscale webhook admitted
// that the StatefulSet does not show yet.
type PendingDownscale struct {
	// replicas is the StatefulSet's spec.replicas the downscale admitted.
	// +required
	// +kubebuilder:validation:Minimum=0
	Replicas int32 `json:"replicas"`
	// admittedAt is when the webhook admitted the downscale; lastDownscaleTime
	// holds the same time meanwhile.
	// +required
	AdmittedAt metav1.MicroTime `json:"admittedAt"`
	// deadline is when the StatefulSet must show replicas at the latest: the
	// end of the admission request, plus the time a later webhook and the
	// write may take (the webhook's own timeout).
	// +required
	Deadline metav1.MicroTime `json:"deadline"`
	// previousDownscaleTime is lastDownscaleTime before the downscale was
	// admitted, restored if it is cancelled.
	// +optional
	PreviousDownscaleTime *metav1.MicroTime `json:"previousDownscaleTime,omitempty"`
	// pods are the pods the webhook prepared, each with the URL it called: a
	// cancel sends DELETE there.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	Pods []PendingPod `json:"pods,omitempty"`
}

// PendingCancel is a pod the prepare-downscale webhook prepared for a
// downscale that was not stored, whose DELETE failed.
type PendingCancel struct {
	// name is the pod's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// url is the prepare endpoint called; a cancel sends DELETE there.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`
	// attempts counts the failed DELETEs.
	// +optional
	// +kubebuilder:validation:Minimum=0
	Attempts int32 `json:"attempts,omitempty"`
	// error is the last DELETE's error.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Error string `json:"error,omitempty"`
	// nextAttemptTime is when the pod is told again.
	// +optional
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`
}

// PendingPod is a pod the prepare-downscale webhook prepared: its prepare
// endpoint answered 2xx.
type PendingPod struct {
	// name is the pod's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// url is the prepare endpoint called, as spec.downscale.prepare built it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	URL string `json:"url"`
}

// ScalingPolicy scales one StatefulSet to follow a leader StatefulSet, a
// resource with a scale subresource, or its own spec.replicas (which an
// HorizontalPodAutoscaler can drive), spacing downscales across the zones of a
// RolloutGroup and never scaling a member while it is rolled. Its downscale
// rules, enforced by admission webhooks, guard the target's downscales by
// anyone: refused, or admitted only once the removed pods are prepared.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:subresource:scale:specpath=.spec.replicas,statuspath=.status.replicas,selectorpath=.status.selector
// +kubebuilder:resource:shortName=sp,categories=echelon
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Source",type=string,JSONPath=`.status.source`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredReplicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
type ScalingPolicy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the target, the source of its replicas and the rules.
	// +required
	Spec ScalingPolicySpec `json:"spec"`
	// status is the observed state, written by Echelon.
	// +optional
	Status ScalingPolicyStatus `json:"status,omitempty"`
}

// ScalingPolicyList is a list of ScalingPolicies.
// +kubebuilder:object:root=true
type ScalingPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ScalingPolicy `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ScalingPolicy{}, &ScalingPolicyList{})
}
