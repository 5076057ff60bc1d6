package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ZoneBudget says how many pods of one zone evictions may take at once, and
// how zones are told apart. A zone is a StatefulSet: a member of a
// RolloutGroup, or the StatefulSet that owns a pod a ZoneDisruptionBudget
// selects. It is the shape of the Grafana rollout-operator's
// ZoneAwarePodDisruptionBudget, which users move from.
type ZoneBudget struct {
	// maxUnavailable is how many pods of one zone may be unavailable at once
	// for an eviction to be admitted: an integer, or a percentage of the
	// zone's replicas (rounded down). 0 admits no eviction. In a RolloutGroup
	// it defaults to each member's rollout maxUnavailable; in a
	// ZoneDisruptionBudget to 1.
	// +optional
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:MaxLength=4
	// +kubebuilder:validation:XValidation:rule="type(self) == int ? self >= 0 : self.matches('^([0-9]|[1-9][0-9]|100)%$')",message="maxUnavailable must be an integer >= 0 or a percentage from 0% to 100%"
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`

	// crossZoneDelay is how long a zone must have been whole again (every pod
	// available) before a pod of another zone may be evicted: time for a
	// zone-replicated store to catch up before the next zone goes down.
	// Defaults to 0.
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	CrossZoneDelay *metav1.Duration `json:"crossZoneDelay,omitempty"`

	// podNamePartitionRegex makes the budget partition-aware: pods whose names
	// give the same partition (the regex's podNamePartitionGroup) across zones
	// hold copies of the same data, as Mimir's partition ingesters do
	// (ingester-zone-a-7 and ingester-zone-b-7 share partition 7). An eviction
	// is then admitted while no other pod of its partition is unavailable,
	// whatever the other zones' other pods do, and the zone's maxUnavailable
	// still holds. A pod whose name does not match is judged zone-wise.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	PodNamePartitionRegex string `json:"podNamePartitionRegex,omitempty"`

	// podNamePartitionGroup is the regex group that captures the partition.
	// Defaults to 1.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=16
	PodNamePartitionGroup *int32 `json:"podNamePartitionGroup,omitempty"`
}

// DisruptionReason is why a zone's pods are taken away.
// +kubebuilder:validation:Enum=Rollout;Downscale;Eviction;Resize
type DisruptionReason string

const (
	// DisruptionRollout: the RolloutGroup replaces outdated pods.
	DisruptionRollout DisruptionReason = "Rollout"
	// DisruptionDownscale: a ScalingPolicy (with or without a
	// DelayedDownscale) or an admitted downscale shrinks the StatefulSet.
	DisruptionDownscale DisruptionReason = "Downscale"
	// DisruptionEviction: the Eviction API (a node drain, an autoscaler).
	DisruptionEviction DisruptionReason = "Eviction"
	// DisruptionResize: spec.volumeClaimSizes grows a zone's volumes. An
	// intent of it without pods holds its zone for the whole resize (a
	// rollout, a downscale or an eviction of another zone waits for it);
	// one with pods restarts them so that their filesystems grow.
	DisruptionResize DisruptionReason = "Resize"
)

// DisruptionHold is a budget's record of the disruptions it allowed and no
// view has yet shown done, as a PodDisruptionBudget's status.disruptedPods
// is. Every decision that lets pods go adds an intent naming exactly those
// pods, in the same write (with an optimistic lock) that orders it against
// every other decision, before it acts. Each decision counts every recorded
// pod as unavailable while a view still shows it there, untouched; once a
// view shows it going, gone or replaced, the pods themselves say whether its
// zone is whole. An intent ends on that evidence (each of its pods replaced
// by an available one, or its ordinal removed), never on a clock; its
// expiresAt only ends the intent of a holder that crashed before acting.
type DisruptionHold struct {
	// intents are the decisions recorded and not yet seen done, oldest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Intents []DisruptionIntent `json:"intents,omitempty"`
}

// DisruptionIntent is one decision that let pods of one zone go.
type DisruptionIntent struct {
	// zone is the StatefulSet whose pods were let go.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Zone string `json:"zone"`
	// reason is why: Rollout, Downscale, Eviction or Resize.
	// +required
	Reason DisruptionReason `json:"reason"`
	// holder says who asked: the RolloutGroup, a ScalingPolicy, or the
	// eviction of a pod.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Holder string `json:"holder,omitempty"`
	// decidedAt is when the decision was recorded.
	// +required
	DecidedAt metav1.Time `json:"decidedAt"`
	// expiresAt bounds the act: the holder acts before it or not at all,
	// so a pod still there and untouched past it was not taken, and counts
	// no more. It covers the act's own timeout, not a guess of how long a
	// view takes to show it.
	// +required
	ExpiresAt metav1.Time `json:"expiresAt"`
	// pods are the pods the decision let go: a batch deleted or evicted,
	// the pods a lowered partition releases, the ordinals a downscale
	// removes (those that have a pod).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=512
	Pods []IntentPod `json:"pods,omitempty"`
	// maxAtOnce, when set, makes the intent a reservation: its holder lets
	// its pods go in their order, as slots of the zone free, keeping at most
	// this many of the zone's pods unavailable. Every decision counts, of
	// its pods not yet seen going, as many as maxAtOnce less the zone's
	// unavailable pods (the first ones), so that the zone stays spent
	// while the holder releases pod after pod with no write between them.
	// Unset: every pod is let go at once.
	// +optional
	// +kubebuilder:validation:Minimum=1
	MaxAtOnce int32 `json:"maxAtOnce,omitempty"`
}

// IntentPod is a pod an intent let go.
type IntentPod struct {
	// name is the pod's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid is the pod's UID when the decision was made, so that its
	// replacement under the same name is told apart; empty for an ordinal
	// without a pod.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid,omitempty"`
}

// DisruptionHold returns the group's recorded hold (status.disruption).
func (rg *RolloutGroup) DisruptionHold() *DisruptionHold { return rg.Status.Disruption }

// SetDisruptionHold sets status.disruption.
func (rg *RolloutGroup) SetDisruptionHold(h *DisruptionHold) { rg.Status.Disruption = h }

// DisruptionHold returns the budget's recorded hold (status.disruption).
func (z *ZoneDisruptionBudget) DisruptionHold() *DisruptionHold { return z.Status.Disruption }

// SetDisruptionHold sets status.disruption.
func (z *ZoneDisruptionBudget) SetDisruptionHold(h *DisruptionHold) { z.Status.Disruption = h }
