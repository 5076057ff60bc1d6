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
// +kubebuilder:validation:Enum=Rollout;Downscale;Eviction
type DisruptionReason string

const (
	// DisruptionRollout: the RolloutGroup replaces outdated pods.
	DisruptionRollout DisruptionReason = "Rollout"
	// DisruptionDownscale: a ScalingPolicy (with or without a
	// DelayedDownscale) or an admitted downscale shrinks the StatefulSet.
	DisruptionDownscale DisruptionReason = "Downscale"
	// DisruptionEviction: the Eviction API (a node drain, an autoscaler).
	DisruptionEviction DisruptionReason = "Eviction"
)

// DisruptionHold records which zone of a group may be disrupted now. It is
// written, with an optimistic lock, before any pod of the zone is taken away,
// so that two decisions made at the same moment (two admissions, an
// admission and a reconcile) see each other: a second zone is disrupted only
// once the hold has lapsed and the first zone is whole again.
type DisruptionHold struct {
	// zone is the StatefulSet whose pods may be taken away.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Zone string `json:"zone"`
	// reason is why: Rollout, Downscale or Eviction.
	// +required
	Reason DisruptionReason `json:"reason"`
	// holder says who asked last: the RolloutGroup, a ScalingPolicy, or the
	// eviction of a pod.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Holder string `json:"holder,omitempty"`
	// since is when this zone took the hold.
	// +required
	Since metav1.Time `json:"since"`
	// renewTime is when a decision last used the hold; it lapses
	// leaseSeconds later.
	// +required
	RenewTime metav1.Time `json:"renewTime"`
	// leaseSeconds is how long the hold outlives its last renewal: long
	// enough for the action it admitted to show in every view of the pods.
	// +required
	// +kubebuilder:validation:Minimum=1
	LeaseSeconds int32 `json:"leaseSeconds"`
	// evictedPods names the pods of the zone whose eviction was admitted
	// under the hold within its lease. They count as unavailable until the
	// hold lapses, whatever a view shows: an admitted eviction is carried
	// out by the API server after the webhook answers, so a second
	// eviction judged a moment later may not see the first pod go yet (a
	// PodDisruptionBudget's status.disruptedPods does the same).
	// An entry counts no more once the pod it names is seen gone,
	// terminating or replaced (another UID); a hold of evictions whose pods
	// are all seen so stops other zones no longer than its zone takes to be
	// whole again.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=256
	EvictedPods []EvictedPod `json:"evictedPods,omitempty"`
}

// EvictedPod is a pod whose eviction a hold admitted.
type EvictedPod struct {
	// name is the pod's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid is the pod's UID when the eviction was admitted, so that a pod
	// recreated under the name is told apart.
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
