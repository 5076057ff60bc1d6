package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// PodDeletionPolicy says how Echelon removes a pod that must be updated.
// +kubebuilder:validation:Enum=Delete;Evict
type PodDeletionPolicy string

const (
	// PodDeletionDelete deletes pods directly. PodDisruptionBudgets are not consulted.
	PodDeletionDelete PodDeletionPolicy = "Delete"
	// PodDeletionEvict removes pods through the Eviction API, so PodDisruptionBudgets
	// are honoured: a refused eviction is retried later and the group waits.
	PodDeletionEvict PodDeletionPolicy = "Evict"
)

// RolloutGroupSpec declares which StatefulSets roll together and how fast.
// +kubebuilder:validation:XValidation:rule="has(self.statefulSets) != has(self.selector)",message="exactly one of spec.statefulSets or spec.selector must be set"
// +kubebuilder:validation:XValidation:rule="!has(self.sharedDisruptionBudget) || !has(self.disruptionBudget) || !has(self.disruptionBudget.podNamePartitionRegex)",message="spec.disruptionBudget.podNamePartitionRegex cannot be used with spec.sharedDisruptionBudget: a shared budget orders whole zones"
type RolloutGroupSpec struct {
	// statefulSets lists the member StatefulSets, in the namespace of the group, in
	// rollout order: the first member with outdated pods is rolled first.
	// Mutually exclusive with selector.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:XValidation:rule="self.all(m, self.filter(n, n.name == m.name).size() == 1)",message="spec.statefulSets: member names must be unique"
	StatefulSets []RolloutMember `json:"statefulSets,omitempty"`

	// selector selects the member StatefulSets by label, in the namespace of the
	// group. Members selected this way roll in order of their names.
	// Mutually exclusive with statefulSets. An empty selector is refused: it
	// would claim every StatefulSet of the namespace.
	// +optional
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="spec.selector must not be empty: set matchLabels or matchExpressions (an empty selector would claim every StatefulSet in the namespace)"
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// maxUnavailable is the largest number of not-Ready pods a member may have while
	// it is rolled: an integer, or a percentage of that member's replicas (rounded
	// down, never below 1). Applies to every member without its own value.
	// Defaults to 1.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",message="spec.maxUnavailable must be an integer >= 1 or a percentage from 1% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// maxUnavailableFrom says where maxUnavailable comes from: Spec (default)
	// uses spec.maxUnavailable and the members' own values; PodDisruptionBudget
	// takes it from the PodDisruptionBudget that covers each member's pods
	// (its maxUnavailable, or its expected pods minus minAvailable), so that
	// one setting governs every voluntary disruption. A member whose pods no
	// budget covers, or more than one, falls back to Spec and says so.
	// +optional
	// +kubebuilder:default=Spec
	MaxUnavailableFrom MaxUnavailableSource `json:"maxUnavailableFrom,omitempty"`

	// disruptionBudget judges evictions of the group's pods (node drains,
	// autoscalers) through the eviction webhook, under the same hold as the
	// group's rollouts and its members' downscales: pods of one zone at a
	// time, up to the zone's maxUnavailable. Without it evictions are judged
	// with the members' rollout maxUnavailable and no delay between zones.
	// +optional
	DisruptionBudget *ZoneBudget `json:"disruptionBudget,omitempty"`

	// sharedDisruptionBudget names a ZoneDisruptionBudget in the group's
	// namespace whose record the group's rollouts, downscales and evictions
	// share with every other group that names it and with the pods it
	// selects: the components of one service (ingesters, store-gateways, ...)
	// then lose pods in one zone at a time between them, zones matched as
	// the budget's spec.zoneFrom says. Each member keeps its own budget
	// (maxUnavailable) within its zone. While the named budget does not
	// exist, the group takes no pod and evictions of its pods are refused.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	SharedDisruptionBudget string `json:"sharedDisruptionBudget,omitempty"`

	// steps rolls the group in stages, each up to a share of the group's pods
	// (counted over every member together, members in rollout order), then
	// waits as its pause says: for a duration, or without one for a person's
	// promote (the echelon.dev/promote annotation). After the last step the
	// rollout goes on to every pod. Pods not yet reached keep their old
	// revision: the partition holds those of a RollingUpdate member, and an
	// OnDelete member's pods are not deleted. A rollback ignores steps.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +kubebuilder:validation:XValidation:rule="self.map(s, s.percent).isSorted() && self.all(s, self.exists_one(t, t.percent == s.percent))",message="spec.steps: percent must increase from one step to the next"
	Steps []RolloutStep `json:"steps,omitempty"`

	// restartAt asks for every pod of the group created before this time to
	// be replaced, with no template change (for example to pick up a rotated
	// Secret or move pods off old nodes): zone by zone, at maxUnavailable
	// speed, under the same guarantees as a rollout. A time in the future
	// takes effect when it comes. Pods annotated echelon.dev/rotate are
	// replaced the same way.
	// +optional
	RestartAt *metav1.Time `json:"restartAt,omitempty"`

	// paused stops the group from deleting pods. Status keeps being reported.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// minReadySeconds is how long a recreated pod must have been Ready before it
	// counts as available. Defaults to 0.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	MinReadySeconds int32 `json:"minReadySeconds,omitempty"`

	// batchInterval is the minimum time between two batches of pod deletions,
	// for example "30s". Defaults to 0: the next batch starts as soon as the
	// previous one is available.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	BatchInterval *metav1.Duration `json:"batchInterval,omitempty"`

	// podDeletion is how outdated pods are removed: Delete (default) deletes them;
	// Evict uses the Eviction API so that PodDisruptionBudgets are honoured.
	// +optional
	// +kubebuilder:default=Delete
	PodDeletion PodDeletionPolicy `json:"podDeletion,omitempty"`

	// progressDeadline is how long a rollout may go without progress before the
	// group is reported Stalled (condition, Warning Event and metric). The rollout
	// goes on, unless onFailure is Rollback: then a stalled rollout (pods of the
	// new revision that never become Ready) is rolled back. As for a Deployment, the clock restarts when the rollout resumes
	// after a pause, when the group is unblocked and when the spec changes; time
	// spent waiting out batchInterval counts as progress. "0s" disables the
	// deadline. Defaults to 15m.
	// +optional
	// +kubebuilder:default="15m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	ProgressDeadline *metav1.Duration `json:"progressDeadline,omitempty"`

	// analysis gates the rollout on Prometheus queries: after every batch of
	// pods, or after each member completes and before the next starts. A failed
	// gate triggers spec.onFailure. Without analysis nothing is gated.
	// +optional
	Analysis *RolloutAnalysis `json:"analysis,omitempty"`

	// onFailure is what a failed analysis gate does, and, for Rollback, a rollout
	// that made no progress within progressDeadline: Pause (default) holds the
	// group, deleting no pod, until the templates change or the user retries or
	// skips the gate; Rollback restores the template of the stable revision on
	// every member that moved and rolls the updated pods back, most recently
	// rolled member first, under the same guarantees as a rollout. The
	// echelon.dev/abort annotation rolls back whatever this says.
	// +optional
	// +kubebuilder:default=Pause
	OnFailure FailurePolicy `json:"onFailure,omitempty"`

	// hooks are HTTP calls around the disruptions the group causes: to each
	// pod before it is removed, with the reason, and before and after each
	// member rolls. See docs/hooks-and-http-gates.md.
	// +optional
	Hooks *RolloutGroupHooks `json:"hooks,omitempty"`
	// rolloutId names the rollout for the systems told about it: every
	// notification and callback carries it, so a deploy system can match
	// answers to requests. A new value on a Failed group retries it, as
	// echelon.dev/retry does.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9]([-A-Za-z0-9_.:/]*[A-Za-z0-9])?$`
	RolloutID string `json:"rolloutId,omitempty"`

	// notifications are HTTP receivers told about the rollout's events
	// (docs/notifications.md). Delivery never holds the rollout.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:XValidation:rule="self.all(r, !has(r.events) || r.events.all(e, e in ['Started', 'StepReached', 'MemberReached', 'Paused', 'GateFailed', 'RollingBack', 'Failed', 'Complete', 'Stalled', 'VolumeResizeStarted', 'VolumeResizeZoneDone', 'VolumeResizeComplete', 'VolumeResizeBlocked']))",message="spec.notifications[].events of a RolloutGroup may name Started, StepReached, MemberReached, Paused, GateFailed, RollingBack, Failed, Complete, Stalled, VolumeResizeStarted, VolumeResizeZoneDone, VolumeResizeComplete and VolumeResizeBlocked only"
	Notifications []NotificationReceiver `json:"notifications,omitempty"`

	// callback is an HTTP endpoint called once per rollout with its outcome
	// (Complete, Failed or RolledBack) and its rolloutId.
	// +optional
	Callback *RolloutCallback `json:"callback,omitempty"`

	// volumeClaimSizes asks for the members' volumes to grow: for each
	// named volumeClaimTemplate, the size every claim of every member
	// should have. Echelon grows them zone by zone, in the members' order,
	// under the group's disruption budget, and replaces each member's
	// StatefulSet (an orphaning delete and a create) so that new replicas
	// get the size, without deleting a pod. A size may only grow. See
	// docs/resize-volumes.md.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	VolumeClaimSizes []VolumeClaimSize `json:"volumeClaimSizes,omitempty"`
}

// RolloutStep is one stage of a rollout: roll up to percent of the group's
// pods, then pause.
type RolloutStep struct {
	// percent is the share of the group's pods, over every member, that run
	// the update revision once this step is done: from 1 to 100, rounded up to
	// whole pods and never below one pod.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Percent int32 `json:"percent"`

	// pause holds the rollout once the step's pods are updated and available:
	// for pause.duration, or, with no duration, until a person promotes it
	// (the echelon.dev/promote annotation). Without pause the next step
	// starts at once.
	// +optional
	Pause *StepPause `json:"pause,omitempty"`
}

// StepPause is the wait after a step.
type StepPause struct {
	// duration is how long the rollout waits after the step, for example
	// "10m". Without it the rollout waits for echelon.dev/promote.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	Duration *metav1.Duration `json:"duration,omitempty"`
}

// AnnotationPromote ends the pause of the current step of spec.steps: it
// acts once per new value (any string; a timestamp is handy), and the value
// acted on is recorded in status.step.promoted. A value set before the step
// pauses ends its pause as soon as it comes.
const AnnotationPromote = "echelon.dev/promote"

// MaxUnavailableSource says where a RolloutGroup's maxUnavailable comes from.
// +kubebuilder:validation:Enum=Spec;PodDisruptionBudget
type MaxUnavailableSource string

const (
	// MaxUnavailableFromSpec: spec.maxUnavailable and the members' own values.
	MaxUnavailableFromSpec MaxUnavailableSource = "Spec"
	// MaxUnavailableFromPodDisruptionBudget: the PodDisruptionBudget that
	// covers the member's pods.
	MaxUnavailableFromPodDisruptionBudget MaxUnavailableSource = "PodDisruptionBudget"
)

// RolloutMember is one StatefulSet of a RolloutGroup.
type RolloutMember struct {
	// name is the name of the StatefulSet, in the namespace of the group.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// maxUnavailable overrides spec.maxUnavailable for this member: an integer, or
	// a percentage of the member's replicas (rounded down, never below 1).
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 1 : self.matches('^([1-9][0-9]?|100)%$')",message="spec.statefulSets[].maxUnavailable must be an integer >= 1 or a percentage from 1% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
}

// RolloutPhase summarises what a RolloutGroup is doing. One table in the
// controller decides the phase and the conditions together, so they agree.
// +kubebuilder:validation:Enum=Complete;Progressing;Waiting;Paused;Blocked;Stalled;Analyzing;Failed
type RolloutPhase string

const (
	// PhaseComplete: every pod of every member runs the update revision and is available.
	PhaseComplete RolloutPhase = "Complete"
	// PhaseProgressing: a rollout is under way: pods are being replaced, or the
	// group waits for replaced pods, another member, the StatefulSet controller
	// or batchInterval.
	PhaseProgressing RolloutPhase = "Progressing"
	// PhaseWaiting: no pod needs a new revision, but some are not available: a
	// scale-up, a pod lost to a node failure, or a group just created. Nothing is
	// deleted; the group is Complete again once they are available.
	PhaseWaiting RolloutPhase = "Waiting"
	// PhasePaused: spec.paused is set and pods wait for a new revision; no pod is
	// deleted. A paused group with nothing to roll shows Complete or Waiting, with
	// the Paused condition True.
	PhasePaused RolloutPhase = "Paused"
	// PhaseBlocked: a member is missing, being deleted, of an update strategy
	// Echelon does not control, or claimed
	// by another group, or the group itself is being deleted; no pod of the group
	// is touched until that changes.
	PhaseBlocked RolloutPhase = "Blocked"
	// PhaseStalled: the rollout made no progress within spec.progressDeadline.
	// It goes on; the phase says someone should look.
	PhaseStalled RolloutPhase = "Stalled"
	// PhaseAnalyzing: an analysis gate is being evaluated (its checks run, or
	// the member soaks); no pod is deleted until it passes.
	PhaseAnalyzing RolloutPhase = "Analyzing"
	// PhaseFailed: an analysis gate failed or an abort was requested. With
	// onFailure Pause the group holds; after a rollback it shows Failed once
	// every member runs its stable revision again. Either way it stays Failed,
	// deleting no pod, until the StatefulSet templates change to a new
	// revision or the user retries (echelon.dev/retry).
	PhaseFailed RolloutPhase = "Failed"
)

// MemberPhase summarises the state of one member StatefulSet.
// +kubebuilder:validation:Enum=Complete;Rolling;Pending;Waiting;Blocked
type MemberPhase string

const (
	// MemberComplete: every pod runs the update revision and is available.
	MemberComplete MemberPhase = "Complete"
	// MemberRolling: this member's pods are being replaced.
	MemberRolling MemberPhase = "Rolling"
	// MemberPending: this member has outdated pods and waits for its turn.
	MemberPending MemberPhase = "Pending"
	// MemberWaiting: this member holds the group up: pods are not all available,
	// pods are leaving after a scale-down, or its StatefulSet controller has not
	// caught up yet (see the message).
	MemberWaiting MemberPhase = "Waiting"
	// MemberBlocked: this member blocks the group (see the message).
	MemberBlocked MemberPhase = "Blocked"
)

// Condition types of a RolloutGroup.
const (
	// ConditionReady is True when every pod of every member runs the update
	// revision and is available.
	ConditionReady = "Ready"
	// ConditionProgressing is True while a rollout is under way and moving; False
	// when there is no rollout, or it is paused, blocked or stalled.
	ConditionProgressing = "Progressing"
	// ConditionPaused is True when spec.paused is set.
	ConditionPaused = "Paused"
)

// Condition reasons of a RolloutGroup. Each says what is happening now.
const (
	// ReasonUpToDate: every pod runs its member's update revision and is available.
	ReasonUpToDate = "UpToDate"
	// ReasonPodsUnavailable: no pod needs a new revision, but some are not
	// available (outside a rollout: a scale-up, a lost pod, a new group).
	ReasonPodsUnavailable = "PodsUnavailable"
	// ReasonDeletingPods: a batch of outdated pods was just deleted or evicted.
	ReasonDeletingPods = "DeletingPods"
	// ReasonWaitingForPods: the rollout waits for the member's replaced pods to
	// become available before deleting more.
	ReasonWaitingForPods = "WaitingForPods"
	// ReasonWaitingForMembers: the rollout waits because another member has pods
	// that are not available, or is scaling down.
	ReasonWaitingForMembers = "WaitingForMembers"
	// ReasonWaitingForScale: a member is being scaled (pods of a scale-down
	// still leaving, or those of a scale-up not all created and available);
	// rolling resumes when the scale is done.
	ReasonWaitingForScale = "WaitingForScale"
	// ReasonWaitingForStatefulSet: a member's StatefulSet controller has not yet
	// observed its latest spec, so its revisions cannot be trusted.
	ReasonWaitingForStatefulSet = "WaitingForStatefulSet"
	// ReasonWaitingForBatchInterval: the next batch waits for spec.batchInterval.
	ReasonWaitingForBatchInterval = "WaitingForBatchInterval"
	// ReasonEvictionRefused: a PodDisruptionBudget refused an eviction; it is retried.
	ReasonEvictionRefused = "EvictionRefused"
	// ReasonWaitingForDisruption: another zone of the group holds the
	// disruption budget (an eviction or a downscale took its pods) or is not
	// yet whole again; the rollout waits for it.
	ReasonWaitingForDisruption = "WaitingForDisruption"
	// ReasonWaitingForPromote: the rollout reached a step of spec.steps whose
	// pause has no duration; it goes on when the echelon.dev/promote
	// annotation gets a new value.
	ReasonWaitingForPromote = "WaitingForPromote"
	// ReasonStepPause: the rollout reached a step of spec.steps and waits out
	// its pause.duration.
	ReasonStepPause = "StepPause"
	// ReasonWaitingForStep: the rollout reached a step's share of updated pods
	// and waits for them to be available before the step's pause.
	ReasonWaitingForStep = "WaitingForStep"
	// ReasonPaused: spec.paused is set.
	ReasonPaused = "Paused"
	// ReasonNotPaused: spec.paused is not set.
	ReasonNotPaused = "NotPaused"
	// ReasonProgressDeadlineExceeded: no progress within spec.progressDeadline.
	ReasonProgressDeadlineExceeded = "ProgressDeadlineExceeded"
	// ReasonMemberNotFound: a listed member StatefulSet does not exist, or the
	// selector selects none.
	ReasonMemberNotFound = "MemberNotFound"
	// ReasonMemberDeleting: a member StatefulSet has a deletionTimestamp.
	ReasonMemberDeleting = "MemberDeleting"
	// ReasonUnsupportedStrategy: a member's update strategy is neither
	// OnDelete nor RollingUpdate, the two Echelon controls.
	ReasonUnsupportedStrategy = "UnsupportedStrategy"
	// ReasonMemberClaimedByOtherGroup: a member belongs to more than one RolloutGroup.
	ReasonMemberClaimedByOtherGroup = "MemberClaimedByOtherGroup"
	// ReasonGroupDeleting: the RolloutGroup has a deletionTimestamp (foreground
	// deletion, a finalizer); it deletes no more pods.
	ReasonGroupDeleting = "GroupDeleting"
	// ReasonInvalidSpec: the spec cannot be applied (for example a bad selector).
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonWaitingForAnalysis: phase Analyzing; the gate's checks run.
	ReasonWaitingForAnalysis = "WaitingForAnalysis"
	// ReasonSoaking: phase Analyzing; the gate's checks passed and the member
	// soaks until spec.analysis.soakTime is over.
	ReasonSoaking = "Soaking"
	// ReasonAnalysisFailed: phase Failed; a check did not meet its condition
	// failureThreshold times in a row.
	ReasonAnalysisFailed = "AnalysisFailed"
	// ReasonAnalysisError: phase Failed; a check's query failed errorThreshold
	// times in a row (Prometheus unreachable, bad PromQL, credentials refused).
	ReasonAnalysisError = "AnalysisError"
	// ReasonAborted: phase Failed; the user asked for a rollback with the
	// echelon.dev/abort annotation.
	ReasonAborted = "Aborted"
	// ReasonRollingBack: phase Progressing; after a failure or an abort, the
	// templates of the stable revisions are restored and the updated pods are
	// rolled back, most recently rolled member first.
	ReasonRollingBack = "RollingBack"
	// ReasonRollbackFailed: phase Failed; a member's template could not be
	// restored (its stable ControllerRevision is gone). Nothing is deleted until
	// the template is restored by hand or the user retries.
	ReasonRollbackFailed = "RollbackFailed"
)

// MemberStatus is the observed state of one member StatefulSet.
type MemberStatus struct {
	// name is the name of the StatefulSet.
	Name string `json:"name"`
	// replicas is the desired number of pods (spec.replicas).
	Replicas int32 `json:"replicas"`
	// readyReplicas counts pods that are Ready.
	ReadyReplicas int32 `json:"readyReplicas"`
	// availableReplicas counts pods Ready for at least spec.minReadySeconds.
	AvailableReplicas int32 `json:"availableReplicas"`
	// updatedReplicas counts pods that run the update revision.
	UpdatedReplicas int32 `json:"updatedReplicas"`
	// maxUnavailable is the resolved limit of not-Ready pods for this member.
	MaxUnavailable int32 `json:"maxUnavailable"`
	// maxUnavailableFrom names the PodDisruptionBudget maxUnavailable was
	// taken from, or says why the spec's value is used instead, when
	// spec.maxUnavailableFrom is PodDisruptionBudget.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	MaxUnavailableFrom string `json:"maxUnavailableFrom,omitempty"`
	// currentRevision is the StatefulSet's current revision.
	// +optional
	CurrentRevision string `json:"currentRevision,omitempty"`
	// updateRevision is the revision every pod is rolled to.
	// +optional
	UpdateRevision string `json:"updateRevision,omitempty"`
	// stableRevision is the revision every pod of the member ran when the
	// current (or last) rollout began: its last complete revision, and the
	// revision a rollback restores. Between rollouts it is the update revision.
	// +optional
	StableRevision string `json:"stableRevision,omitempty"`
	// gatePassedRevision is the update revision whose AfterMember gate this
	// member passed in the current rollout.
	// +optional
	GatePassedRevision string `json:"gatePassedRevision,omitempty"`
	// partition is the StatefulSet's rollingUpdate.partition Echelon holds
	// for a member of updateStrategy RollingUpdate: pods at ordinals below it
	// keep (or are recreated on) the current revision. Unset for OnDelete.
	// +optional
	Partition *int32 `json:"partition,omitempty"`
	// podsToRestart counts this member's pods that spec.restartAt or the
	// echelon.dev/rotate annotation still asks to replace.
	// +optional
	PodsToRestart int32 `json:"podsToRestart,omitempty"`
	// leakedPods counts this member's pods that reached the update revision
	// in the current (or last) rollout although Echelon did not remove them.
	// Always 0 for a RollingUpdate member, whose pods cannot leak.
	// +optional
	LeakedPods int32 `json:"leakedPods,omitempty"`
	// phase summarises this member.
	Phase MemberPhase `json:"phase"`
	// message says why the member is blocked or waiting.
	// +optional
	Message string `json:"message,omitempty"`
}

// RolloutGroupStatus is the observed state of a RolloutGroup.
type RolloutGroupStatus struct {
	// observedGeneration is the generation of the spec last acted upon.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// phase summarises what the group is doing.
	// +optional
	Phase RolloutPhase `json:"phase,omitempty"`
	// message explains the phase in one line.
	// +optional
	Message string `json:"message,omitempty"`
	// currentStatefulSet is the member being rolled, if any.
	// +optional
	CurrentStatefulSet string `json:"currentStatefulSet,omitempty"`
	// updated is "<updated pods>/<desired pods>" over all members, for display.
	// +optional
	Updated string `json:"updated,omitempty"`
	// replicas is the desired number of pods over all members.
	// +optional
	Replicas int32 `json:"replicas,omitempty"`
	// updatedReplicas counts pods on their member's update revision.
	// +optional
	UpdatedReplicas int32 `json:"updatedReplicas,omitempty"`
	// availableReplicas counts pods that are available.
	// +optional
	AvailableReplicas int32 `json:"availableReplicas,omitempty"`
	// statefulSets has one entry per member, in rollout order.
	// +optional
	// +listType=atomic
	StatefulSets []MemberStatus `json:"statefulSets,omitempty"`
	// rolloutStartTime is when the current (or last) rollout started.
	// +optional
	RolloutStartTime *metav1.Time `json:"rolloutStartTime,omitempty"`
	// rolloutCompletionTime is when the last rollout completed.
	// +optional
	RolloutCompletionTime *metav1.Time `json:"rolloutCompletionTime,omitempty"`
	// lastProgressTime is when the rollout last made progress: a pod deleted,
	// updated or becoming available.
	// +optional
	LastProgressTime *metav1.Time `json:"lastProgressTime,omitempty"`
	// lastBatchTime is when the last batch of pods was deleted; batchInterval
	// counts from here.
	// +optional
	LastBatchTime *metav1.Time `json:"lastBatchTime,omitempty"`
	// podsRolled counts pods deleted for update during the current (or last) rollout.
	// +optional
	PodsRolled int32 `json:"podsRolled,omitempty"`
	// leakedPods counts, over every member, the pods that reached the update
	// revision in the current (or last) rollout although Echelon did not
	// remove them (see docs/version-leaks.md).
	// +optional
	LeakedPods int32 `json:"leakedPods,omitempty"`
	// leakRecords hold, per OnDelete member, what Echelon recorded of its
	// current (or last) rollout to tell leaked pods apart: written before the
	// pods it removes are removed, so that an operator restart loses nothing.
	// +optional
	// +listType=map
	// +listMapKey=member
	// +kubebuilder:validation:MaxItems=64
	LeakRecords []LeakRecord `json:"leakRecords,omitempty"`
	// rotation is the progress of the replacement of pods that
	// spec.restartAt or the echelon.dev/rotate annotation asked for.
	// +optional
	Rotation *RotationStatus `json:"rotation,omitempty"`
	// restartedAt is the last spec.restartAt fully honoured: every pod created
	// before it was replaced and the group was whole again.
	// +optional
	RestartedAt *metav1.Time `json:"restartedAt,omitempty"`
	// step is where the rollout stands in spec.steps; unset until the group
	// starts its first rollout.
	// +optional
	Step *StepStatus `json:"step,omitempty"`
	// disruption records the pods the group's budget let go (to the
	// rollout, a downscale or an eviction) that no view has yet shown
	// replaced, written before they are taken: a second zone waits until
	// they are seen replaced and this zone is whole again.
	// +optional
	Disruption *DisruptionHold `json:"disruption,omitempty"`
	// analysis is the state of spec.analysis gates, failures and rollbacks.
	// +optional
	Analysis *AnalysisStatus `json:"analysis,omitempty"`

	// hooks records the member hooks called for the members' update
	// revisions.
	// +optional
	Hooks *HooksStatus `json:"hooks,omitempty"`
	// rolloutId is spec.rolloutId as last acted on.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	RolloutID string `json:"rolloutId,omitempty"`
	// notifications is the delivery state of spec.notifications and
	// spec.callback, written by the notifier alone.
	// +optional
	Notifications *NotificationStatus `json:"notifications,omitempty"`
	// volumeResize is the progress of spec.volumeClaimSizes, written by the
	// volume resizer alone.
	// +optional
	VolumeResize *VolumeResizeStatus `json:"volumeResize,omitempty"`
	// conditions: Ready, Progressing, Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// RolloutGroup rolls out the pods of a group of OnDelete StatefulSets, one member
// at a time, never exceeding a member's maxUnavailable and never touching a member
// while another has not-Ready pods.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=rg,categories=echelon
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Updated",type=string,JSONPath=`.status.updated`
// +kubebuilder:printcolumn:name="Rolling",type=string,JSONPath=`.status.currentStatefulSet`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
type RolloutGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec declares the members and the pace of their rollouts.
	// +required
	Spec RolloutGroupSpec `json:"spec"`
	// status is the observed state, written by Echelon.
	// +optional
	Status RolloutGroupStatus `json:"status,omitempty"`
}

// RolloutGroupList is a list of RolloutGroups.
// +kubebuilder:object:root=true
type RolloutGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []RolloutGroup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&RolloutGroup{}, &RolloutGroupList{})
}

// StepWait says what the current step of spec.steps waits for.
// +kubebuilder:validation:Enum=Pods;Availability;Duration;Promote;Done
type StepWait string

const (
	// StepWaitPods: pods are being rolled up to the step's share.
	StepWaitPods StepWait = "Pods"
	// StepWaitAvailability: the step's share is updated; its pods must be
	// available before the pause.
	StepWaitAvailability StepWait = "Availability"
	// StepWaitDuration: the step's pause.duration runs.
	StepWaitDuration StepWait = "Duration"
	// StepWaitPromote: the step waits for echelon.dev/promote.
	StepWaitPromote StepWait = "Promote"
	// StepWaitDone: past the last step: the rollout goes on to every pod.
	StepWaitDone StepWait = "Done"
)

// StepStatus is where a rollout stands in spec.steps.
type StepStatus struct {
	// index is the current step, from 0; the number of steps once past the last.
	// +kubebuilder:validation:Minimum=0
	Index int32 `json:"index"`
	// percent is the current step's share of the group's pods; 100 once past
	// the last step.
	// +optional
	Percent int32 `json:"percent,omitempty"`
	// targetReplicas is how many of the group's pods run the update revision
	// once the current step is done.
	// +optional
	TargetReplicas int32 `json:"targetReplicas,omitempty"`
	// waitingFor says what the step waits for now.
	// +optional
	WaitingFor StepWait `json:"waitingFor,omitempty"`
	// since is when the step began waiting for what it waits for now.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// until is when a pause with a duration ends.
	// +optional
	Until *metav1.Time `json:"until,omitempty"`
	// promoted is the last value of echelon.dev/promote acted on, or the
	// value it had when the rollout began.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Promoted string `json:"promoted,omitempty"`
}
