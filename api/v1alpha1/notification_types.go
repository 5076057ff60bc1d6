package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NotificationEventType is one kind of event that a receiver may be told
// about: of a RolloutGroup's rollout, of a ScalingPolicy's scaling or of a
// DelayedDownscale's downscale. Each kind accepts its own events only.
// +kubebuilder:validation:Enum=Started;StepReached;MemberReached;Paused;GateFailed;RollingBack;Failed;Complete;Stalled;VolumeResizeStarted;VolumeResizeZoneDone;VolumeResizeComplete;VolumeResizeBlocked;Scaled;ScaleHeld;ScaleFailed;DownscaleRequested;DownscaleDelayed;DownscaleDone;DownscaleCancelled;DownscaleFailed
type NotificationEventType string

const (
	// NotificationStarted: a rollout began (new revisions, or a new
	// spec.rolloutId for a failed rollout).
	NotificationStarted NotificationEventType = "Started"
	// NotificationStepReached: the rollout reached a step of spec.steps and
	// pauses there.
	NotificationStepReached NotificationEventType = "StepReached"
	// NotificationMemberReached: the rollout began rolling a member; the
	// message lists its pods, at most 50 a message.
	NotificationMemberReached NotificationEventType = "MemberReached"
	// NotificationPaused: spec.paused holds the rollout.
	NotificationPaused NotificationEventType = "Paused"
	// NotificationGateFailed: an analysis gate failed or an abort was asked.
	NotificationGateFailed NotificationEventType = "GateFailed"
	// NotificationRollingBack: the group rolls its updated pods back.
	NotificationRollingBack NotificationEventType = "RollingBack"
	// NotificationFailed: the group is Failed (after a failed gate with
	// onFailure Pause, or once a rollback is done).
	NotificationFailed NotificationEventType = "Failed"
	// NotificationComplete: every pod runs the update revision.
	NotificationComplete NotificationEventType = "Complete"
	// NotificationStalled: no progress within spec.progressDeadline.
	NotificationStalled NotificationEventType = "Stalled"
)

// Events of a RolloutGroup's volume resize (spec.volumeClaimSizes).
const (
	// NotificationVolumeResizeStarted: a resize began; member is its first
	// zone.
	NotificationVolumeResizeStarted NotificationEventType = "VolumeResizeStarted"
	// NotificationVolumeResizeZoneDone: a zone's claims grew and its
	// StatefulSet was replaced; member names it.
	NotificationVolumeResizeZoneDone NotificationEventType = "VolumeResizeZoneDone"
	// NotificationVolumeResizeComplete: every zone has the size.
	NotificationVolumeResizeComplete NotificationEventType = "VolumeResizeComplete"
	// NotificationVolumeResizeBlocked: the resize touches nothing; the
	// message says why (a StorageClass that cannot expand, a size below a
	// template's).
	NotificationVolumeResizeBlocked NotificationEventType = "VolumeResizeBlocked"
)

// Events of a ScalingPolicy.
const (
	// NotificationScaled: the target's replicas changed (fromReplicas,
	// toReplicas; leader names the StatefulSet followed, if any).
	NotificationScaled NotificationEventType = "Scaled"
	// NotificationScaleHeld: a scale is due but waits (the zone delay,
	// a member being rolled, a disruption budget, a DelayedDownscale);
	// the message says what for and until when.
	NotificationScaleHeld NotificationEventType = "ScaleHeld"
	// NotificationScaleFailed: the policy cannot compute or apply the
	// replicas (a missing target or source, a conflicting policy).
	NotificationScaleFailed NotificationEventType = "ScaleFailed"
)

// Events of a DelayedDownscale.
const (
	// NotificationDownscaleRequested: a downscale began; the pods it
	// removes are asked to prepare (listed, at most 50 a message).
	NotificationDownscaleRequested NotificationEventType = "DownscaleRequested"
	// NotificationDownscaleDelayed: the pods are prepared and wait for the
	// delay to pass; the message says when the first is eligible.
	NotificationDownscaleDelayed NotificationEventType = "DownscaleDelayed"
	// NotificationDownscaleDone: the target's replicas were lowered.
	NotificationDownscaleDone NotificationEventType = "DownscaleDone"
	// NotificationDownscaleCancelled: the desired replicas rose again
	// before the downscale was done; the prepared pods are told to cancel.
	NotificationDownscaleCancelled NotificationEventType = "DownscaleCancelled"
	// NotificationDownscaleFailed: the downscale is held: a pod's prepare
	// call fails, or the target or its ScalingPolicy is missing.
	NotificationDownscaleFailed NotificationEventType = "DownscaleFailed"
)

// NotificationFormat is the body a receiver is sent.
// +kubebuilder:validation:Enum=JSON;Slack
type NotificationFormat string

const (
	// NotificationFormatJSON is Echelon's own JSON document, schema
	// echelon.dev/notification/v1 (docs/notifications.md).
	NotificationFormatJSON NotificationFormat = "JSON"
	// NotificationFormatSlack is a Slack incoming-webhook payload (text and
	// blocks).
	NotificationFormatSlack NotificationFormat = "Slack"
)

// Keys of the Secret a receiver or a callback names.
const (
	// NotificationSecretURLKey holds the URL to POST to.
	NotificationSecretURLKey = "url"
	// NotificationSecretTokenKey, optional, holds a bearer token sent in the
	// Authorization header.
	NotificationSecretTokenKey = "token"
)

// NotificationReceiver is one HTTP endpoint told about a rollout's events.
type NotificationReceiver struct {
	// name identifies the receiver in status, metrics and Events.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// secretRef names a Secret in the object's namespace: key "url" holds the
	// http:// or https:// URL to POST to, optional key "token" a bearer
	// token. URLs of incoming webhooks are credentials, so they are never a
	// plain spec field.
	// +required
	SecretRef LocalSecretReference `json:"secretRef"`

	// format is the body sent: JSON (schema echelon.dev/notification/v1) or
	// Slack (an incoming-webhook payload with blocks). Defaults to JSON.
	// +optional
	// +kubebuilder:default=JSON
	Format NotificationFormat `json:"format,omitempty"`

	// events are the events sent to this receiver. Empty sends every event
	// of the object's kind.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=13
	Events []NotificationEventType `json:"events,omitempty"`

	// timeout bounds each request, for example "5s". Defaults to 10s.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('1m')",message="spec.notifications[].timeout must be more than 0s and at most 1m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// RolloutCallback is an HTTP endpoint called once per rollout with its
// outcome.
type RolloutCallback struct {
	// secretRef names a Secret in the group's namespace: key "url" holds the
	// http:// or https:// URL to POST to, optional key "token" a bearer
	// token.
	// +required
	SecretRef LocalSecretReference `json:"secretRef"`

	// timeout bounds each request, for example "5s". Defaults to 10s.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('1m')",message="spec.callback.timeout must be more than 0s and at most 1m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// RolloutOutcome is how a rollout ended, as its callback reports it.
// +kubebuilder:validation:Enum=Complete;Failed;RolledBack
type RolloutOutcome string

const (
	// OutcomeComplete: every pod runs the update revision.
	OutcomeComplete RolloutOutcome = "Complete"
	// OutcomeFailed: a gate failed and the group holds (onFailure Pause).
	OutcomeFailed RolloutOutcome = "Failed"
	// OutcomeRolledBack: the rollout was rolled back; every member runs its
	// stable revision again.
	OutcomeRolledBack RolloutOutcome = "RolledBack"
)

// ConditionNotificationsDelivered is True when every receiver and the
// callback have been sent everything due; False, with a reason naming the
// receiver and the field, when one cannot be: a missing Secret, a bad URL,
// a receiver failing or not answering. The rollout never waits for it.
const ConditionNotificationsDelivered = "NotificationsDelivered"

// Reasons of the NotificationsDelivered condition.
const (
	// ReasonDelivered: nothing is waiting to be sent.
	ReasonDelivered = "Delivered"
	// ReasonDeliveryPending: a notification waits for its first attempt.
	ReasonDeliveryPending = "DeliveryPending"
	// ReasonSecretUnreadable: a receiver's Secret or one of its keys is
	// missing or cannot be read.
	ReasonSecretUnreadable = "SecretUnreadable"
	// ReasonInvalidURL: a receiver's URL is not an http:// or https:// URL.
	ReasonInvalidURL = "InvalidURL"
	// ReasonDeliveryFailing: a receiver answered with an error or did not
	// answer in time; the notification is retried with backoff.
	ReasonDeliveryFailing = "DeliveryFailing"
	// ReasonDeliveryDropped: a notification was given up after the last
	// retry.
	ReasonDeliveryDropped = "DeliveryDropped"
)

// NotificationStatus is the state of an object's notifications (and a
// group's callbacks), written by Echelon's notifier, never by the
// controller that rolls or scales: so that a restart neither loses nor
// repeats a notification.
type NotificationStatus struct {
	// rollout is the key of the rollout the notifications are about: the
	// rollout id (or "-") and its start time. Empty for a ScalingPolicy or
	// DelayedDownscale.
	// +optional
	// +kubebuilder:validation:MaxLength=320
	Rollout string `json:"rollout,omitempty"`
	// rolloutId is spec.rolloutId of that rollout.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RolloutID string `json:"rolloutId,omitempty"`
	// observed is the state of the group the last events were derived from.
	// +optional
	Observed *NotificationObserved `json:"observed,omitempty"`
	// observedResize is the volume resize the last resize events were
	// derived from.
	// +optional
	ObservedResize *ResizeObserved `json:"observedResize,omitempty"`
	// sequence counts the events derived for the group so far.
	// +optional
	Sequence int64 `json:"sequence,omitempty"`
	// events are the events not yet sent to every receiver, oldest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Events []NotificationEvent `json:"events,omitempty"`
	// receivers is the delivery state of each receiver.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Receivers []ReceiverStatus `json:"receivers,omitempty"`
	// callbacks are the completion callbacks of the rollouts that ended,
	// oldest first, each delivered in turn: a callback still retried is
	// never replaced by a later rollout's. Delivered ones are removed (when
	// none waits, the last one made stays); past 16 the oldest is dropped
	// and counted in callbacksDropped.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	Callbacks []CallbackStatus `json:"callbacks,omitempty"`
	// callbacksDropped counts the callbacks dropped from a full queue
	// before they were delivered.
	// +optional
	CallbacksDropped int32 `json:"callbacksDropped,omitempty"`
	// conditions: NotificationsDelivered.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// NotificationObserved is the part of a group's status events are derived
// from.
type NotificationObserved struct {
	// phase of the group.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// member being rolled.
	// +optional
	Member string `json:"member,omitempty"`
	// step is the index of the last step of spec.steps reached; absent for
	// none.
	// +optional
	Step *int32 `json:"step,omitempty"`
	// failureTime is the time of the last analysis failure seen.
	// +optional
	FailureTime *metav1.Time `json:"failureTime,omitempty"`
	// rollbackStartTime is the start of the last rollback seen.
	// +optional
	RollbackStartTime *metav1.Time `json:"rollbackStartTime,omitempty"`
	// outcome is how the rollout ended, once it has.
	// +optional
	Outcome RolloutOutcome `json:"outcome,omitempty"`
	// state is the phase of a ScalingPolicy or DelayedDownscale.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	State string `json:"state,omitempty"`
	// reason is the reason of its Ready condition.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
	// replicas is its status.replicas (the target's spec.replicas).
	// +optional
	Replicas *int32 `json:"replicas,omitempty"`
	// desiredReplicas is its status.desiredReplicas.
	// +optional
	DesiredReplicas *int32 `json:"desiredReplicas,omitempty"`
}

// NotificationEvent is one event of a rollout, waiting to be sent.
type NotificationEvent struct {
	// sequence numbers the group's events from 1.
	Sequence int64 `json:"sequence"`
	// type of the event.
	Type NotificationEventType `json:"type"`
	// rollout is the key of the rollout the event belongs to.
	// +kubebuilder:validation:MaxLength=320
	Rollout string `json:"rollout"`
	// rolloutId is spec.rolloutId of that rollout.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RolloutID string `json:"rolloutId,omitempty"`
	// time the event was seen.
	Time metav1.Time `json:"time"`
	// phase of the group then.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// member concerned, if any.
	// +optional
	Member string `json:"member,omitempty"`
	// replicas of that member then: its pods are <member>-0 to
	// <member>-(replicas-1), listed 50 a message.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// updated is status.updated then.
	// +optional
	Updated string `json:"updated,omitempty"`
	// message is status.message then.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// firstOrdinal is the ordinal of the first pod listed: the pods are
	// <member>-<firstOrdinal> to <member>-(replicas-1). A downscale from 10
	// to 7 replicas lists ordinals 7 to 9.
	// +optional
	FirstOrdinal int32 `json:"firstOrdinal,omitempty"`
	// state is the phase of a ScalingPolicy or DelayedDownscale then.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	State string `json:"state,omitempty"`
	// fromReplicas is the target's replicas before a scale or downscale.
	// +optional
	FromReplicas *int32 `json:"fromReplicas,omitempty"`
	// toReplicas is the target's replicas after it (or asked for).
	// +optional
	ToReplicas *int32 `json:"toReplicas,omitempty"`
	// leader is the StatefulSet a ScalingPolicy follows, if any.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Leader string `json:"leader,omitempty"`
}

// ReceiverStatus is the delivery state of one receiver.
type ReceiverStatus struct {
	// name of the receiver.
	Name string `json:"name"`
	// delivered is the sequence of the last event sent (every page), or
	// passed over because the receiver does not want it or it was dropped.
	// +optional
	Delivered int64 `json:"delivered,omitempty"`
	// pagesDelivered counts the pages of the next event already sent.
	// +optional
	PagesDelivered int32 `json:"pagesDelivered,omitempty"`
	// lastDeliveryId is the id of the last message the receiver accepted.
	// +optional
	LastDeliveryID string `json:"lastDeliveryId,omitempty"`
	// attempts counts the failed attempts of the next message.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// nextAttemptTime is when the next message is tried again.
	// +optional
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`
	// lastError is why the last attempt failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastError string `json:"lastError,omitempty"`
	// reason classifies lastError as a reason of the NotificationsDelivered
	// condition.
	// +optional
	Reason string `json:"reason,omitempty"`
	// dropped counts the messages given up after the last retry.
	// +optional
	Dropped int32 `json:"dropped,omitempty"`
}

// CallbackStatus is the state of the completion callback of a rollout.
type CallbackStatus struct {
	// rollout is the key of the rollout.
	// +kubebuilder:validation:MaxLength=320
	Rollout string `json:"rollout"`
	// rolloutId is spec.rolloutId of the rollout.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RolloutID string `json:"rolloutId,omitempty"`
	// outcome of the rollout.
	Outcome RolloutOutcome `json:"outcome"`
	// time the outcome was seen.
	Time metav1.Time `json:"time"`
	// deliveryId is the id the callback carries, the same on every attempt.
	// +kubebuilder:validation:MaxLength=64
	DeliveryID string `json:"deliveryId"`
	// delivered is true once the endpoint accepted the call (or it was given
	// up after the last retry: see lastError).
	// +optional
	Delivered bool `json:"delivered,omitempty"`
	// attempts counts the failed attempts.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// nextAttemptTime is when the call is tried again.
	// +optional
	NextAttemptTime *metav1.Time `json:"nextAttemptTime,omitempty"`
	// lastError is why the last attempt failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	LastError string `json:"lastError,omitempty"`
	// reason classifies lastError as a reason of the NotificationsDelivered
	// condition.
	// +optional
	Reason string `json:"reason,omitempty"`
}

// ResizeObserved is the state of a group's volume resize its last events
// were derived from.
type ResizeObserved struct {
	// phase of status.volumeResize.
	// +optional
	Phase VolumeResizePhase `json:"phase,omitempty"`
	// zone is status.volumeResize.currentZone.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Zone string `json:"zone,omitempty"`
}
