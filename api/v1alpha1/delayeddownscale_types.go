package v1alpha1

import (
	"net"
	"net/url"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PrepareEndpoint is an HTTP endpoint every pod serves: POST prepares the pod
// to be removed, DELETE cancels. For a DelayedDownscale the POST answers
// {"timestamp": <unix seconds>} (since when the pod has been prepared); for a
// ScalingPolicy's prepare-downscale webhook any 2xx answer is success.
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || (has(self.scheme) && self.scheme == 'https')",message="endpoint tls needs scheme https"
type PrepareEndpoint struct {
	// scheme is http or https. Defaults to http. With https and no tls, a
	// DelayedDownscale's calls and hooks trust the system's authorities,
	// while the prepare-downscale webhook verifies no certificate (pods are
	// reached by IP or by names their certificates rarely carry); set tls
	// to verify them.
	// +optional
	// +kubebuilder:default=http
	// +kubebuilder:validation:Enum=http;https
	Scheme string `json:"scheme,omitempty"`
	// port is the pod's port serving the endpoint.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`
	// path of the endpoint, e.g. /ingester/prepare-partition-downscale or
	// /ingester/prepare-shutdown.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +kubebuilder:validation:Pattern=`^/`
	Path string `json:"path"`
	// tls says how the pods' certificates are verified (a private CA, the
	// name they must carry, for example "*.ingester.mimir.svc") and which
	// client certificate is presented. Needs scheme https.
	// +optional
	TLS *TLSConfig `json:"tls,omitempty"`
}

// URL is the endpoint on the pod reached at host.
func (e PrepareEndpoint) URL(host string) string {
	scheme := e.Scheme
	if scheme == "" {
		scheme = "http"
	}
	return (&url.URL{Scheme: scheme, Host: net.JoinHostPort(host, strconv.Itoa(int(e.Port))), Path: e.Path}).String()
}

// DelayedDownscaleSpec says how a StatefulSet's downscales are delayed.
type DelayedDownscaleSpec struct {
	// targetRef is the StatefulSet whose downscales are delayed, in the same
	// namespace. Its replicas come from the ScalingPolicy that targets it, which
	// shrinks it only as far as this resource allows.
	// +required
	TargetRef ScalingTargetReference `json:"targetRef"`

	// delay is how long each removed pod must have been prepared before the
	// StatefulSet shrinks past it: a Go or Prometheus-style duration such as
	// "4h", "90m", "1d" or "1w".
	// +required
	// +kubebuilder:validation:MinLength=2
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^(([0-9]+)(y|w|d|h|m|s|ms|us|µs|ns))+$`
	Delay string `json:"delay"`

	// prepareEndpoint is where each pod is asked to prepare (POST) or to cancel
	// (DELETE).
	// +required
	PrepareEndpoint PrepareEndpoint `json:"prepareEndpoint"`

	// timeout bounds each call to a pod. Defaults to 5s.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// notifications are HTTP receivers told about the target's delayed
	// downscales: events DownscaleRequested, DownscaleDelayed, DownscaleDone,
	// DownscaleCancelled and DownscaleFailed (docs/notifications.md).
	// Delivery never holds a downscale.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(r, !has(r.events) || r.events.all(e, e in ['DownscaleRequested', 'DownscaleDelayed', 'DownscaleDone', 'DownscaleCancelled', 'DownscaleFailed']))",message="spec.notifications[].events of a DelayedDownscale may name DownscaleRequested, DownscaleDelayed, DownscaleDone, DownscaleCancelled and DownscaleFailed only"
	Notifications []NotificationReceiver `json:"notifications,omitempty"`
}

// DelayedDownscalePhase summarises what a DelayedDownscale is doing.
// +kubebuilder:validation:Enum=Idle;Preparing;Waiting;ScalingDown;Blocked
type DelayedDownscalePhase string

const (
	// DelayedPhaseIdle: no downscale is pending; no pod is prepared.
	DelayedPhaseIdle DelayedDownscalePhase = "Idle"
	// DelayedPhasePreparing: pods to remove are being asked to prepare.
	DelayedPhasePreparing DelayedDownscalePhase = "Preparing"
	// DelayedPhaseWaiting: the pods to remove are prepared; the first becomes
	// eligible at status.earliestDownscaleTime.
	DelayedPhaseWaiting DelayedDownscalePhase = "Waiting"
	// DelayedPhaseScalingDown: some pods have been prepared long enough; the
	// ScalingPolicy may shrink the StatefulSet to status.eligibleReplicas.
	DelayedPhaseScalingDown DelayedDownscalePhase = "ScalingDown"
	// DelayedPhaseBlocked: the downscale cannot go on (a pod's answer, a missing
	// target or ScalingPolicy, another DelayedDownscale of the target); no
	// replica is removed past it.
	DelayedPhaseBlocked DelayedDownscalePhase = "Blocked"
)

// Condition types and reasons of a DelayedDownscale.
const (
	// DelayedConditionReady is True when no downscale is pending or held.
	DelayedConditionReady = "Ready"

	// DelayedReasonIdle: no downscale is pending.
	DelayedReasonIdle = "NoDownscalePending"
	// DelayedReasonPreparing: pods are asked to prepare.
	DelayedReasonPreparing = "PreparingPods"
	// DelayedReasonWaiting: prepared pods wait out the delay.
	DelayedReasonWaiting = "WaitingForDelay"
	// DelayedReasonEligible: pods have been prepared long enough.
	DelayedReasonEligible = "PodsEligible"
	// DelayedReasonPodErrors: pods answered with errors; the downscale is held.
	DelayedReasonPodErrors = "PodCallsFailed"
	// DelayedReasonTargetNotFound: the target StatefulSet does not exist.
	DelayedReasonTargetNotFound = "TargetNotFound"
	// DelayedReasonNoScalingPolicy: no ScalingPolicy gives the target's desired replicas.
	DelayedReasonNoScalingPolicy = "NoScalingPolicy"
	// DelayedReasonTargetClaimedByOther: another DelayedDownscale targets the
	// same StatefulSet; every one of them is blocked until one is left.
	DelayedReasonTargetClaimedByOther = "TargetClaimedByOtherDelayedDownscale"
)

// PreparedPod is a pod asked to prepare for the downscale, with its answer.
type PreparedPod struct {
	// name of the pod.
	Name string `json:"name"`
	// uid of the pod that was asked. A pod recreated under the same name has
	// another uid: it is not prepared, and is asked again.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	UID string `json:"uid,omitempty"`
	// preparedAt is since when the pod says it has been prepared. It is unset
	// while the pod has been asked and has not answered yet.
	// +optional
	PreparedAt *metav1.Time `json:"preparedAt,omitempty"`
	// eligibleAt is when the StatefulSet may shrink past this pod.
	// +optional
	EligibleAt *metav1.Time `json:"eligibleAt,omitempty"`
	// error is the pod's failed answer, if any; it holds the downscale.
	// +optional
	Error string `json:"error,omitempty"`
}

// CancellingPod is a pod whose DELETE to its prepare endpoint failed.
type CancellingPod struct {
	// name of the pod.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid of the pod told to cancel. A pod recreated under the same name is
	// not prepared: it is not told again.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	UID string `json:"uid,omitempty"`
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

// DelayedDownscaleStatus is the observed state of a DelayedDownscale.
type DelayedDownscaleStatus struct {
	// observedGeneration is the generation of the spec last acted upon.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// phase summarises what the downscale is doing.
	// +optional
	Phase DelayedDownscalePhase `json:"phase,omitempty"`
	// message says what the downscale waits for, and until when.
	// +optional
	Message string `json:"message,omitempty"`
	// desiredReplicas is what the target's ScalingPolicy wants.
	// +optional
	DesiredReplicas *int32 `json:"desiredReplicas,omitempty"`
	// replicas is the target's spec.replicas.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// eligibleReplicas is how far the target may be shrunk now: every pod at
	// or above this ordinal has been prepared for at least the delay. The
	// ScalingPolicy shrinks the target no further.
	// +optional
	EligibleReplicas *int32 `json:"eligibleReplicas,omitempty"`
	// preparedPods are the pods asked to prepare, highest ordinal first. A pod
	// is listed before it is called, so that a restart cancels its
	// preparation if the downscale is cancelled meanwhile.
	// +optional
	// +listType=atomic
	PreparedPods []PreparedPod `json:"preparedPods,omitempty"`
	// cancellingPods are the pods told to cancel their preparation whose
	// DELETE failed: they may still be prepared, and are told again, with a
	// backoff that doubles up to 5 minutes, until they answer or are gone.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1000
	CancellingPods []CancellingPod `json:"cancellingPods,omitempty"`
	// preparedCount is the number of preparedPods without error, for display.
	// +optional
	PreparedCount int32 `json:"preparedCount,omitempty"`
	// earliestDownscaleTime is when the next pod becomes eligible.
	// +optional
	EarliestDownscaleTime *metav1.Time `json:"earliestDownscaleTime,omitempty"`
	// notifications is the delivery state of spec.notifications, written by
	// the notifier alone.
	// +optional
	Notifications *NotificationStatus `json:"notifications,omitempty"`
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DelayedDownscale delays the downscales of a StatefulSet for hours, asking
// each pod to be removed to prepare first and letting its ScalingPolicy shrink
// the StatefulSet only past pods prepared for long enough. Wire-compatible
// with services written for the Grafana rollout-operator's delayed downscale.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=dd,categories=echelon
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.targetRef.name`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredReplicas`
// +kubebuilder:printcolumn:name="Current",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Prepared",type=integer,JSONPath=`.status.preparedCount`
// +kubebuilder:printcolumn:name="Earliest downscale",type=date,JSONPath=`.status.earliestDownscaleTime`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
type DelayedDownscale struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the target, the delay and the pods' endpoint.
	// +required
	Spec DelayedDownscaleSpec `json:"spec"`
	// status is the observed state, written by Echelon.
	// +optional
	Status DelayedDownscaleStatus `json:"status,omitempty"`
}

// DelayedDownscaleList is a list of DelayedDownscales.
// +kubebuilder:object:root=true
type DelayedDownscaleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []DelayedDownscale `json:"items"`
}

func init() {
	SchemeBuilder.Register(&DelayedDownscale{}, &DelayedDownscaleList{})
}
