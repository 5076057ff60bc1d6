package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// HTTPCheck is an analysis check that GETs a URL instead of querying
// Prometheus. The check's condition judges the answer:
//
//   - an answer whose status is not expectedStatus fails the check (value
//     "HTTP 503"); no answer at all (a refused connection, a timeout) is an
//     error, counted against errorThreshold;
//   - without jsonPath, hasData true succeeds on the expected status and
//     compare compares the status code;
//   - with jsonPath, the field it selects is judged: hasData true succeeds
//     when the field exists and is neither null nor an empty list or object,
//     compare compares it as a number (a boolean is 1 or 0), and equals
//     compares it as a string.
//
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || self.url.startsWith('https://')",message="spec.analysis.checks[].http.tls applies to an https:// url only"
type HTTPCheck struct {
	// url is the address GET is sent to, with the variables of a query
	// ({{ .Member }}, {{ .Namespace }}, {{ .Group }}, {{ .Revision }}),
	// for example
	// "http://consul.consul.svc:8500/v1/health/service/{{ .Member }}?passing".
	// Put credentials in authSecretRef, never in the URL: the URL is shown in
	// status and Events.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://')",message="spec.analysis.checks[].http.url must start with http:// or https://"
	URL string `json:"url"`

	// headers are sent with the request, for example Accept or a Consul
	// namespace header. Secrets go in authSecretRef.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Headers []HTTPHeader `json:"headers,omitempty"`

	// authSecretRef names a Secret in the group's namespace holding the
	// credentials: key "token" for a bearer token (Authorization: Bearer), or
	// keys "username" and "password" for basic authentication. The token wins
	// when both are set. The operator needs get on Secrets in the namespace
	// (Helm value rbac.analysisSecretNamespaces).
	// +optional
	AuthSecretRef *LocalSecretReference `json:"authSecretRef,omitempty"`

	// tls says how the server's certificate is verified (a private CA, the
	// name it must carry) and which client certificate is presented, for an
	// https:// url. Without it the system's authorities are trusted.
	// +optional
	TLS *TLSConfig `json:"tls,omitempty"`

	// expectedStatus is the HTTP status a healthy answer has. Defaults to 200.
	// +optional
	// +kubebuilder:default=200
	// +kubebuilder:validation:Minimum=100
	// +kubebuilder:validation:Maximum=599
	ExpectedStatus int32 `json:"expectedStatus,omitempty"`

	// jsonPath selects the field of the JSON answer that the condition judges:
	// names and list indexes separated by dots ("status", "targets.0.health"),
	// and "#" for the length of a list or object ("#" for the length of the
	// answer itself, "items.#" for that of its items). A leading "$." is
	// allowed. Without jsonPath the condition judges the status.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:Pattern=`^(\$\.)?[^.]+(\.[^.]+)*$`
	JSONPath string `json:"jsonPath,omitempty"`

	// timeout bounds each request, answer included, for example "5s". A
	// request that takes longer counts as an error. Defaults to 10s.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('1m')",message="spec.analysis.checks[].http.timeout must be more than 0s and at most 1m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// HTTPHeader is one header of a request.
type HTTPHeader struct {
	// name of the header, for example "Accept".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9!#$%&'*+.^_|~-]+$`
	Name string `json:"name"`
	// value of the header.
	// +required
	// +kubebuilder:validation:MaxLength=1024
	Value string `json:"value"`
}

// HookFailurePolicy says what happens when a hook fails after its retries.
// +kubebuilder:validation:Enum=Fail;Ignore
type HookFailurePolicy string

const (
	// HookFail holds what the hook guards: the pod is not removed, the
	// member does not start. The hook is called again on the next pass.
	HookFail HookFailurePolicy = "Fail"
	// HookIgnore records the failure (Event, metric) and goes on.
	HookIgnore HookFailurePolicy = "Ignore"
)

// RemovalReason is why Echelon removes a pod, as a beforePodRemoval hook is
// told. (DisruptionReason is the zone budget's, with other values.)
// +kubebuilder:validation:Enum=rollout;rotation;downscale;eviction
type RemovalReason string

const (
	// RemovalRollout: the pod runs an outdated revision and is replaced.
	RemovalRollout RemovalReason = "rollout"
	// RemovalRotation: the pod is restarted by a rotation (spec.restartAt
	// or the echelon.dev/rotate annotation) on the same revision.
	RemovalRotation RemovalReason = "rotation"
	// RemovalDownscale: the StatefulSet shrinks past the pod.
	RemovalDownscale RemovalReason = "downscale"
	// RemovalEviction: the Eviction API (a node drain, a spot
	// reclaim) removes the pod.
	RemovalEviction RemovalReason = "eviction"
)

// RolloutGroupHooks are HTTP calls Echelon makes around the disruptions it
// causes.
type RolloutGroupHooks struct {
	// beforePodRemoval calls each pod before Echelon deletes or evicts it in
	// a rollout or a rotation, telling it why. For a member of updateStrategy
	// RollingUpdate, whose pods the StatefulSet controller deletes once
	// Echelon lowers the partition, every pod the lowered partition releases
	// is called first, and under failurePolicy Fail the partition is not
	// lowered past a pod whose call failed.
	// +optional
	BeforePodRemoval *PodRemovalHook `json:"beforePodRemoval,omitempty"`

	// beforeMember is called once per member and update revision, before the
	// member's first pod is removed (for example to put a database zone in
	// maintenance mode).
	// +optional
	BeforeMember *MemberHook `json:"beforeMember,omitempty"`

	// afterMember is called once per member and update revision, once every
	// pod of the member runs it and is available (for example to end the
	// zone's maintenance mode).
	// +optional
	AfterMember *MemberHook `json:"afterMember,omitempty"`
}

// ScalingPolicyHooks are HTTP calls around a ScalingPolicy's downscales.
type ScalingPolicyHooks struct {
	// beforePodRemoval calls each pod a downscale of the policy's target
	// removes (the highest ordinals), with reason downscale, before the
	// StatefulSet is shrunk. Under failurePolicy Fail the StatefulSet shrinks
	// only past the pods whose call succeeded. Its reasons, when set, must
	// include downscale for it to be called.
	// +optional
	BeforePodRemoval *PodRemovalHook `json:"beforePodRemoval,omitempty"`
}

// HookPolicy is how a hook's calls are bounded and judged.
type HookPolicy struct {
	// timeout bounds each call, for example "2s". Defaults to 5s.
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('30s')",message="hook timeout must be more than 0s and at most 30s"
	Timeout *metav1.Duration `json:"timeout,omitempty"`

	// retries is how many times a failed call is repeated within one pass,
	// 0.5s, 1s, 2s ... apart. Defaults to 2.
	// +optional
	// +kubebuilder:default=2
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=5
	Retries *int32 `json:"retries,omitempty"`

	// failurePolicy is what a call that still fails does: Fail (default)
	// holds the pod or member, reports it in the HookFailed condition and an
	// Event and calls again on the next pass; Ignore reports the failure and
	// goes on.
	// +optional
	// +kubebuilder:default=Fail
	FailurePolicy HookFailurePolicy `json:"failurePolicy,omitempty"`
}

// PodRemovalHook is a POST to each pod before it is removed. The request
// carries the reason in the query (?reason=rollout&pod=...&group=...) and as
// JSON: {"reason", "pod", "namespace", "group", "member", "revision"}. Any
// 2xx answer is success. A pod is called at least once per removal; a call
// that succeeded is not repeated for the same pod (by UID) while the
// operator runs, but a restart between the call and the removal repeats it,
// so the endpoint must be idempotent.
type PodRemovalHook struct {
	// endpoint is the pod's endpoint, reached as the delayed downscale's
	// endpoints are (the --pod-address flag).
	// +required
	Endpoint PrepareEndpoint `json:"endpoint"`

	// reasons are the disruptions that call the hook. Defaults to all of
	// them. A Mimir ingester, for example, leaves the ring on eviction and
	// downscale but not on rollout.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=4
	Reasons []RemovalReason `json:"reasons,omitempty"`

	HookPolicy `json:",inline"`
}

// MemberHook is a POST to a URL before a member starts rolling or after it
// is complete. The request carries {"hook", "namespace", "group", "member",
// "revision"} as JSON.
// +kubebuilder:validation:XValidation:rule="!has(self.tls) || self.url.startsWith('https://')",message="spec.hooks member hook tls applies to an https:// url only"
type MemberHook struct {
	// url is where the call goes, with the variables of analysis queries
	// ({{ .Member }}, {{ .Namespace }}, {{ .Group }}, {{ .Revision }}), for
	// example "http://db-admin.db.svc/zones/{{ .Member }}/maintenance".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="self.startsWith('http://') || self.startsWith('https://')",message="spec.hooks member hook url must start with http:// or https://"
	URL string `json:"url"`

	// authSecretRef names a Secret in the group's namespace whose key "token"
	// is sent as a bearer token.
	// +optional
	AuthSecretRef *LocalSecretReference `json:"authSecretRef,omitempty"`

	// tls says how the server's certificate is verified and which client
	// certificate is presented, for an https:// url.
	// +optional
	TLS *TLSConfig `json:"tls,omitempty"`

	HookPolicy `json:",inline"`
}

// HooksStatus records the member hooks that succeeded, so that each is
// called once per member and revision across restarts.
type HooksStatus struct {
	// members are the members whose hooks were called for their update
	// revision.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Members []MemberHookStatus `json:"members,omitempty"`
}

// MemberHookStatus is the member hooks of one member.
type MemberHookStatus struct {
	// name of the member StatefulSet.
	Name string `json:"name"`
	// revision is the update revision the hooks were called for.
	Revision string `json:"revision"`
	// beforeTime is when the member started rolling the revision: when
	// beforeMember succeeded (or failed with failurePolicy Ignore), or its
	// first batch when the group has no beforeMember hook.
	// +optional
	BeforeTime *metav1.Time `json:"beforeTime,omitempty"`
	// afterTime is when afterMember succeeded (or failed with Ignore).
	// +optional
	AfterTime *metav1.Time `json:"afterTime,omitempty"`
}

// Condition type and reasons of hooks.
const (
	// ConditionHookFailed is True while a hook with failurePolicy Fail holds a
	// pod or a member; the message names them.
	ConditionHookFailed = "HookFailed"
	// ReasonHookFailed: a hook failed after its retries.
	ReasonHookFailed = "HookFailed"
	// ReasonHooksSucceeded: no hook holds the group.
	ReasonHooksSucceeded = "HooksSucceeded"
)
