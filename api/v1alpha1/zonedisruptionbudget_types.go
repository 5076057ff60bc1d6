package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ZoneDisruptionBudgetSpec declares a zone-aware budget for evictions of pods
// that no RolloutGroup rolls. A group's own pods are judged by the group's
// spec.disruptionBudget instead, so that rollouts, downscales and evictions
// share one hold.
type ZoneDisruptionBudgetSpec struct {
	// selector selects the pods the budget covers, in its namespace. Each
	// pod's zone is the StatefulSet that owns it. An empty selector is
	// refused.
	// +required
	// +kubebuilder:validation:XValidation:rule="(has(self.matchLabels) && size(self.matchLabels) > 0) || (has(self.matchExpressions) && size(self.matchExpressions) > 0)",message="spec.selector must not be empty: set matchLabels or matchExpressions"
	Selector metav1.LabelSelector `json:"selector"`

	// ZoneBudget holds maxUnavailable (default 1), crossZoneDelay and the
	// partition regex.
	ZoneBudget `json:",inline"`

	// zoneFrom says which zone (failure domain) each StatefulSet is in,
	// when RolloutGroups share this budget (their
	// spec.sharedDisruptionBudget) or it selects pods of several
	// StatefulSets per zone: StatefulSets of one zone may be disrupted
	// together, each within its own budget, and StatefulSets of two zones
	// never are. Without it, or for a StatefulSet it finds no zone for, each
	// StatefulSet is a zone of its own.
	// +optional
	ZoneFrom *ZoneFrom `json:"zoneFrom,omitempty"`
}

// ZoneFrom finds a StatefulSet's zone: from one of its labels, or from its
// name.
// +kubebuilder:validation:XValidation:rule="has(self.label) != has(self.nameRegex)",message="spec.zoneFrom: set exactly one of label or nameRegex"
type ZoneFrom struct {
	// label is a label of the StatefulSet whose value is its zone, for
	// example topology.kubernetes.io/zone.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	Label string `json:"label,omitempty"`
	// nameRegex is a regular expression (RE2) on the StatefulSet's name: its
	// first capture group is the zone, or the whole match when it has none.
	// For example "zone-[a-z]$" puts ingester-zone-a and
	// store-gateway-zone-a in zone "zone-a".
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	NameRegex string `json:"nameRegex,omitempty"`
}

// Condition types and reasons of a ZoneDisruptionBudget.
const (
	// ZoneBudgetConditionReady is True when the budget judges evictions of
	// every pod it selects.
	ZoneBudgetConditionReady = "Ready"
	// ZoneBudgetReasonJudging: every selected pod is judged by this budget.
	ZoneBudgetReasonJudging = "Judging"
	// ZoneBudgetReasonOverlapsGroup: some selected pods belong to a
	// RolloutGroup's members; the group's budget judges those.
	ZoneBudgetReasonOverlapsGroup = "OverlapsRolloutGroup"
	// ZoneBudgetReasonInvalidSpec: the selector or the regex cannot be used;
	// evictions of the selected pods are judged by nothing here.
	ZoneBudgetReasonInvalidSpec = "InvalidSpec"
)

// ZoneDisruptionBudgetStatus is the observed state of a ZoneDisruptionBudget.
type ZoneDisruptionBudgetStatus struct {
	// observedGeneration is the generation of the spec last acted upon.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// disruption records the pods whose eviction the budget admitted that
	// no view has yet shown replaced, written before each admission.
	// +optional
	Disruption *DisruptionHold `json:"disruption,omitempty"`
	// conditions: Ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ZoneDisruptionBudget admits an eviction of a selected pod only while no
// other zone is disrupted and the pod's zone stays within maxUnavailable: a
// PodDisruptionBudget that can say "any number in one zone, none in the
// others".
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=zdb,categories=echelon
// +kubebuilder:printcolumn:name="Max Unavailable",type=string,JSONPath=`.spec.maxUnavailable`
// +kubebuilder:printcolumn:name="Recorded Zone",type=string,JSONPath=`.status.disruption.intents[0].zone`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ZoneDisruptionBudget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec selects the pods and sets the budget.
	// +required
	Spec ZoneDisruptionBudgetSpec `json:"spec"`
	// status is the observed state, written by Echelon.
	// +optional
	Status ZoneDisruptionBudgetStatus `json:"status,omitempty"`
}

// ZoneDisruptionBudgetList is a list of ZoneDisruptionBudgets.
// +kubebuilder:object:root=true
type ZoneDisruptionBudgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ZoneDisruptionBudget `json:"items"`
}

func init() {
	SchemeBuilder.Register(&ZoneDisruptionBudget{}, &ZoneDisruptionBudgetList{})
}
