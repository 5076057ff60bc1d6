package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FailurePolicy says what a RolloutGroup does when an analysis gate fails.
// +kubebuilder:validation:Enum=Pause;Rollback
type FailurePolicy string

const (
	// FailurePause holds the group: no pod is deleted until the templates
	// change again or the user retries or skips the gate.
	FailurePause FailurePolicy = "Pause"
	// FailureRollback restores, on every member that moved, the StatefulSet
	// template of its stable revision, and rolls the updated pods back.
	FailureRollback FailurePolicy = "Rollback"
)

// AnalysisGate says when a check runs.
// +kubebuilder:validation:Enum=AfterBatch;AfterMember
type AnalysisGate string

const (
	// GateAfterBatch runs the check after every batch of pods, once the
	// batch's pods are back and available, before the next batch is deleted.
	GateAfterBatch AnalysisGate = "AfterBatch"
	// GateAfterMember runs the check once a member is complete, before the
	// next member starts (a zone gate); spec.analysis.soakTime applies.
	GateAfterMember AnalysisGate = "AfterMember"
)

// ComparisonOperator compares a sample's value with a threshold.
// +kubebuilder:validation:Enum="<";"<=";">";">=";"==";"!="
type ComparisonOperator string

// Comparison operators.
const (
	OperatorLess           ComparisonOperator = "<"
	OperatorLessOrEqual    ComparisonOperator = "<="
	OperatorGreater        ComparisonOperator = ">"
	OperatorGreaterOrEqual ComparisonOperator = ">="
	OperatorEqual          ComparisonOperator = "=="
	OperatorNotEqual       ComparisonOperator = "!="
)

// CheckPhase is the state of one check in the gate being evaluated.
// +kubebuilder:validation:Enum=Pending;Running;Passed;Failed;Errored
type CheckPhase string

const (
	// CheckPending: not queried yet (initialDelay not over).
	CheckPending CheckPhase = "Pending"
	// CheckRunning: queried, no verdict yet.
	CheckRunning CheckPhase = "Running"
	// CheckPassed: successThreshold consecutive successes.
	CheckPassed CheckPhase = "Passed"
	// CheckFailed: failureThreshold consecutive failures: the gate fails.
	CheckFailed CheckPhase = "Failed"
	// CheckErrored: errorThreshold consecutive query errors: the gate fails.
	CheckErrored CheckPhase = "Errored"
)

// Annotations that control a RolloutGroup's analysis by hand. Each acts once
// per new value (any string; a timestamp is handy) and the value acted on is
// recorded in status.analysis, so the controller never writes annotations.
const (
	// AnnotationRetry clears a failure: a failed gate (onFailure Pause) is
	// evaluated again from the start; after a rollback the group goes on with
	// the StatefulSet templates as they are now.
	AnnotationRetry = "echelon.dev/retry"
	// AnnotationSkipGate passes the pending gate now, or a failed gate that
	// holds the group (onFailure Pause), and the rollout goes on.
	AnnotationSkipGate = "echelon.dev/skip-gate"
	// AnnotationAbort rolls the group back now, whatever spec.onFailure says.
	AnnotationAbort = "echelon.dev/abort"
)

// RolloutAnalysis gates a rollout on Prometheus queries and HTTP checks.
// +kubebuilder:validation:XValidation:rule="has(self.prometheus) || self.checks.all(c, !has(c.query))",message="spec.analysis.prometheus is required when a check has a query"
type RolloutAnalysis struct {
	// prometheus is the server the query checks ask. Required when a check
	// has a query; HTTP checks do not use it.
	// +optional
	Prometheus *PrometheusSource `json:"prometheus,omitempty"`

	// checks are the queries that must pass at each gate. A gate of kind
	// AfterBatch evaluates the AfterBatch checks, a gate of kind AfterMember the
	// AfterMember checks; all of a gate's checks must pass.
	// +required
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(c, self.filter(d, d.name == c.name).size() == 1)",message="spec.analysis.checks: check names must be unique"
	Checks []AnalysisCheck `json:"checks"`

	// soakTime is how long a member must have been complete (every pod updated
	// and available) before its AfterMember gate passes, on top of its checks
	// passing. A member that loses a pod during the soak starts it again once
	// whole. With soakTime set and no AfterMember check, the gate is the soak
	// alone. Defaults to 0s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	SoakTime *metav1.Duration `json:"soakTime,omitempty"`
}

// PrometheusSource is a Prometheus HTTP API endpoint.
type PrometheusSource struct {
	// address is the base URL of the Prometheus HTTP API, without /api/v1, for
	// example "http://prometheus.monitoring.svc:9090".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	// +kubebuilder:validation:XValidation:rule="isURL(self) && (self.startsWith('http://') || self.startsWith('https://'))",message="spec.analysis.prometheus.address must be an http:// or https:// URL"
	Address string `json:"address"`

	// authSecretRef names a Secret in the group's namespace holding the
	// credentials: key "token" for a bearer token, or keys "username" and
	// "password" for basic authentication. The token wins when both are set.
	// +optional
	AuthSecretRef *LocalSecretReference `json:"authSecretRef,omitempty"`

	// tls configures HTTPS connections to the server.
	// +optional
	TLS *PrometheusTLS `json:"tls,omitempty"`

	// timeout bounds each query, for example "10s". A query that takes longer
	// counts as an error. Defaults to 10s.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s') && duration(self) <= duration('5m')",message="spec.analysis.prometheus.timeout must be more than 0s and at most 5m"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
}

// LocalSecretReference names a Secret in the namespace of the referring object.
type LocalSecretReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SecretKeyReference names one key of a Secret in the namespace of the
// referring object.
type SecretKeyReference struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key in the Secret's data. Defaults to "ca.crt".
	// +optional
	// +kubebuilder:default="ca.crt"
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// PrometheusTLS configures how the server's certificate is verified.
type PrometheusTLS struct {
	// insecureSkipVerify accepts any certificate the server presents. For tests
	// only.
	// +optional
	InsecureSkipVerify bool `json:"insecureSkipVerify,omitempty"`
	// caSecretRef names a Secret key holding the PEM certificates of the
	// authorities that sign the server's certificate, instead of the system's.
	// +optional
	CASecretRef *SecretKeyReference `json:"caSecretRef,omitempty"`
	// serverName is the name the server's certificate must carry, when it
	// differs from the address's host.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ServerName string `json:"serverName,omitempty"`
}

// AnalysisCheck is one query, or one HTTP request, and the condition its
// result must meet.
// +kubebuilder:validation:XValidation:rule="has(self.query) != has(self.http)",message="spec.analysis.checks[]: set exactly one of query (PromQL) or http"
// +kubebuilder:validation:XValidation:rule="!has(self.query) || !has(self.condition.equals)",message="spec.analysis.checks[].condition.equals applies to http checks only: a query's samples are numbers"
type AnalysisCheck struct {
	// name identifies the check in status, Events and metrics.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// query is an instant PromQL query with variables: {{ .Member }} is the
	// StatefulSet the gate is about, {{ .Namespace }} the group's namespace,
	// {{ .Group }} the group's name and {{ .Revision }} the member's update
	// revision. It is not a Go template: anything else between {{ and }} is
	// refused. The expanded query is at most 64 KiB. For example
	// 'sum(rate(errors_total{namespace="{{ .Namespace }}",pod=~"{{ .Member }}-.*"}[1m]))'.
	// Exactly one of query and http is set.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query,omitempty"`

	// http is a GET whose answer is the check's result, instead of a query:
	// for example a service-discovery health endpoint (Consul's
	// /v1/health/service/<service>?passing) or a load balancer's target
	// health. Exactly one of query and http is set.
	// +optional
	HTTP *HTTPCheck `json:"http,omitempty"`

	// condition is what the query's result must meet for the check to succeed.
	// For an http check it judges the answer: see HTTPCheck.
	// +required
	Condition CheckCondition `json:"condition"`

	// initialDelay is how long after the gate opens the first query waits, so
	// that Prometheus scrapes the new pods first. Defaults to 0s.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	InitialDelay *metav1.Duration `json:"initialDelay,omitempty"`

	// interval is the time between two queries of the check. At least 1s.
	// Defaults to 10s.
	// +optional
	// +kubebuilder:default="10s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="spec.analysis.checks[].interval must be at least 1s"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// successThreshold is how many consecutive successes pass the check.
	// Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	SuccessThreshold int32 `json:"successThreshold,omitempty"`

	// failureThreshold is how many consecutive failures (the condition not met)
	// fail the check and the gate. Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	FailureThreshold int32 `json:"failureThreshold,omitempty"`

	// errorThreshold is how many consecutive query errors (Prometheus
	// unreachable, an HTTP error, bad PromQL, refused credentials, a timeout)
	// fail the check and the gate. Errors are not failures: they neither
	// count as failures nor reset the count of successes. Defaults to 3.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=1000
	ErrorThreshold int32 `json:"errorThreshold,omitempty"`

	// gate is when the check runs: AfterBatch (after every batch of pods,
	// before the next) or AfterMember (once a member is complete, before the
	// next member starts). Defaults to AfterMember.
	// +optional
	// +kubebuilder:default=AfterMember
	Gate AnalysisGate `json:"gate,omitempty"`
}

// CheckCondition is exactly one of hasData, compare or equals.
// +kubebuilder:validation:XValidation:rule="(has(self.hasData) ? 1 : 0) + (has(self.compare) ? 1 : 0) + (has(self.equals) ? 1 : 0) == 1",message="spec.analysis.checks[].condition must set exactly one of hasData, compare or equals"
type CheckCondition struct {
	// hasData true succeeds when the query returns at least one sample; false
	// succeeds when it returns none (for example no alert firing).
	// +optional
	HasData *bool `json:"hasData,omitempty"`
	// compare succeeds when every sample the query returns meets the
	// comparison. A query that returns no sample fails it.
	// +optional
	Compare *Comparison `json:"compare,omitempty"`
	// equals succeeds when the JSON field an http check selects is this
	// string, or a number, boolean or null printed as this string (for
	// example "passing", "true" or "3"). For http checks only.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Equals *string `json:"equals,omitempty"`
}

// Comparison compares each sample's value with a threshold.
type Comparison struct {
	// operator is one of <, <=, >, >=, == and !=.
	// +required
	Operator ComparisonOperator `json:"operator"`
	// threshold is a decimal number, for example "0.05" or "1e3".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[-+]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][-+]?[0-9]+)?$`
	Threshold string `json:"threshold"`
}

// AnalysisStatus is the state of a group's analysis.
type AnalysisStatus struct {
	// gate is the gate the group waits on; absent when none is pending.
	// +optional
	Gate *GateStatus `json:"gate,omitempty"`
	// checks are the checks of the gate pending or last evaluated.
	// +optional
	// +listType=map
	// +listMapKey=name
	Checks []CheckStatus `json:"checks,omitempty"`
	// failure says why the group failed: a gate failed, or an abort was
	// requested. Absent when the group has not failed.
	// +optional
	Failure *AnalysisFailure `json:"failure,omitempty"`
	// rollback is the rollback under way or done after the failure.
	// +optional
	Rollback *RollbackStatus `json:"rollback,omitempty"`
	// handledRetry is the last echelon.dev/retry value acted on.
	// +optional
	HandledRetry string `json:"handledRetry,omitempty"`
	// handledSkip is the last echelon.dev/skip-gate value acted on.
	// +optional
	HandledSkip string `json:"handledSkip,omitempty"`
	// handledAbort is the last echelon.dev/abort value acted on.
	// +optional
	HandledAbort string `json:"handledAbort,omitempty"`
}

// GateStatus is one gate: the point where the rollout waits for its checks.
type GateStatus struct {
	// member is the StatefulSet whose batch or completion the gate follows.
	Member string `json:"member"`
	// kind is AfterBatch or AfterMember.
	Kind AnalysisGate `json:"kind"`
	// revision is the member's update revision when the gate opened. A new
	// revision cancels the gate.
	Revision string `json:"revision"`
	// startTime is when the checks' clock started: for an AfterBatch gate,
	// when the batch's pods were back and available (absent until then); for
	// an AfterMember gate, when the member was complete.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// soakUntil is when an AfterMember gate's soakTime ends; absent while the
	// member is not whole.
	// +optional
	SoakUntil *metav1.Time `json:"soakUntil,omitempty"`
}

// CheckStatus is the record of one check at the current or last gate.
type CheckStatus struct {
	// name of the check.
	Name string `json:"name"`
	// phase of the check.
	Phase CheckPhase `json:"phase"`
	// consecutiveSuccesses counts queries in a row whose result met the condition.
	// +optional
	ConsecutiveSuccesses int32 `json:"consecutiveSuccesses,omitempty"`
	// consecutiveFailures counts queries in a row whose result did not.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`
	// consecutiveErrors counts queries in a row that returned no result.
	// +optional
	ConsecutiveErrors int32 `json:"consecutiveErrors,omitempty"`
	// lastValue is the last result, for example "0.012", "no data" or
	// "3 series, max 0.2 at {zone=\"b\"}".
	// +optional
	LastValue string `json:"lastValue,omitempty"`
	// lastTime is when the check was last queried.
	// +optional
	LastTime *metav1.Time `json:"lastTime,omitempty"`
	// lastError is the last query error; cleared by the next result.
	// +optional
	LastError string `json:"lastError,omitempty"`
	// query is the PromQL last sent, after template expansion; for an http
	// check, "GET " and the URL last requested.
	// +optional
	Query string `json:"query,omitempty"`
}

// AnalysisFailure records why a group failed.
type AnalysisFailure struct {
	// reason is AnalysisFailed, AnalysisError, Aborted or ProgressDeadlineExceeded
	// (a rollout stalled past progressDeadline with onFailure Rollback).
	Reason string `json:"reason"`
	// check names the check that failed; empty for an abort.
	// +optional
	Check string `json:"check,omitempty"`
	// message explains the failure: the check, its value or error, the member.
	Message string `json:"message"`
	// time is when the group failed.
	Time metav1.Time `json:"time"`
	// gate is the gate that failed, if any; a retry evaluates it again.
	// +optional
	Gate *GateStatus `json:"gate,omitempty"`
	// revisions are the members' update revisions when the group failed. With
	// onFailure Pause, a change to any of them ends the failure.
	// +optional
	// +listType=atomic
	Revisions []MemberRevision `json:"revisions,omitempty"`
}

// MemberRevision is a member and one of its revisions.
type MemberRevision struct {
	// name of the member StatefulSet.
	Name string `json:"name"`
	// revision is a ControllerRevision hash.
	Revision string `json:"revision"`
}

// RollbackStatus is a rollback: the templates restored and the pods rolled
// back under the usual guarantees.
type RollbackStatus struct {
	// startTime is when the rollback started.
	StartTime metav1.Time `json:"startTime"`
	// completionTime is when every member ran its stable revision again.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// members are the StatefulSets rolled back, from their update revision to
	// their stable revision.
	// +optional
	// +listType=atomic
	Members []RollbackMember `json:"members,omitempty"`
}

// RollbackMember is one StatefulSet of a rollback.
type RollbackMember struct {
	// name of the StatefulSet.
	Name string `json:"name"`
	// from is the update revision it had when the rollback started.
	From string `json:"from"`
	// to is its stable revision, whose template is restored.
	To string `json:"to"`
}
