package v1alpha1

import (
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// VolumeClaimSize is the size asked for the claims of one
// volumeClaimTemplate of the group's members.
// +kubebuilder:validation:XValidation:rule="quantity(self.size).compareTo(quantity(oldSelf.size)) >= 0",message="spec.volumeClaimSizes[].size may only grow: a PersistentVolumeClaim cannot shrink"
type VolumeClaimSize struct {
	// name is the volumeClaimTemplate's name (metadata.name in the
	// StatefulSets' spec.volumeClaimTemplates), e.g. "data".
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// size is the storage every claim of the template should request, a
	// quantity such as 20Gi. It may only grow.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="isQuantity(self) && quantity(self).isGreaterThan(quantity('0'))",message="spec.volumeClaimSizes[].size must be a quantity above 0, such as 20Gi"
	Size string `json:"size"`
}

// Quantity is size as a quantity; zero when it does not parse (the API
// refuses such a size).
func (s VolumeClaimSize) Quantity() resource.Quantity {
	q, err := resource.ParseQuantity(s.Size)
	if err != nil {
		return resource.Quantity{}
	}
	return q
}

// VolumeResizePhase is where spec.volumeClaimSizes stands.
// +kubebuilder:validation:Enum=Resizing;Complete;Blocked
type VolumeResizePhase string

const (
	// VolumeResizeResizing: a zone's claims are being grown, its pods
	// restarted or its StatefulSet replaced.
	VolumeResizeResizing VolumeResizePhase = "Resizing"
	// VolumeResizeComplete: every claim and every member's template has
	// the size asked for.
	VolumeResizeComplete VolumeResizePhase = "Complete"
	// VolumeResizeBlocked: nothing is touched, and the message says why: a
	// StorageClass that does not allow volume expansion, a size below the
	// template's, a template no member has.
	VolumeResizeBlocked VolumeResizePhase = "Blocked"
)

// ZoneVolumePhase is where one member's resize stands.
// +kubebuilder:validation:Enum=Pending;Expanding;Restarting;Replacing;Complete
type ZoneVolumePhase string

const (
	// ZoneVolumePending: the zone waits for its turn.
	ZoneVolumePending ZoneVolumePhase = "Pending"
	// ZoneVolumeExpanding: the zone's claims are patched and the storage
	// driver has not reported the capacity of all of them.
	ZoneVolumeExpanding ZoneVolumePhase = "Expanding"
	// ZoneVolumeRestarting: claims report FileSystemResizePending and their
	// pods are restarted through the disruption budget.
	ZoneVolumeRestarting ZoneVolumePhase = "Restarting"
	// ZoneVolumeReplacing: the StatefulSet is being replaced with the new
	// size (an orphaning delete, then a create).
	ZoneVolumeReplacing ZoneVolumePhase = "Replacing"
	// ZoneVolumeComplete: the zone's claims and template have the size.
	ZoneVolumeComplete ZoneVolumePhase = "Complete"
)

// ClaimPhase is where one PersistentVolumeClaim stands.
// +kubebuilder:validation:Enum=Pending;Expanding;FileSystemResizePending;Resized
type ClaimPhase string

const (
	// ClaimPending: the claim has not been patched yet.
	ClaimPending ClaimPhase = "Pending"
	// ClaimExpanding: the claim requests the size, its capacity is below it.
	ClaimExpanding ClaimPhase = "Expanding"
	// ClaimFileSystemResizePending: the volume grew, and its filesystem
	// grows when a pod mounts it again.
	ClaimFileSystemResizePending ClaimPhase = "FileSystemResizePending"
	// ClaimResized: the claim's capacity is at least the size.
	ClaimResized ClaimPhase = "Resized"
)

// VolumeResizeStatus is the progress of spec.volumeClaimSizes.
type VolumeResizeStatus struct {
	// phase is Resizing, Complete or Blocked.
	// +optional
	Phase VolumeResizePhase `json:"phase,omitempty"`
	// message says what happens now, or why nothing does.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	Message string `json:"message,omitempty"`
	// currentZone is the member being resized; only one is at a time.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	CurrentZone string `json:"currentZone,omitempty"`
	// startTime is when the current (or last) resize began.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when the last resize ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// recreate is the StatefulSet to create again, recorded before its
	// orphaning delete: an operator that takes over after the delete
	// creates it from here.
	// +optional
	Recreate *StatefulSetRecreate `json:"recreate,omitempty"`
	// zones are the members, in the group's order.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Zones []ZoneVolumeStatus `json:"zones,omitempty"`
}

// StatefulSetRecreate is a StatefulSet recorded for its replacement.
type StatefulSetRecreate struct {
	// name is the StatefulSet's name.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid is the UID of the StatefulSet deleted: a StatefulSet of that name
	// with another UID is the one created again.
	// +required
	// +kubebuilder:validation:MaxLength=64
	UID string `json:"uid"`
	// object is the StatefulSet to create: the one deleted, with the new
	// sizes in its volumeClaimTemplates, every other field, label,
	// annotation and owner reference kept.
	// +required
	// +kubebuilder:pruning:PreserveUnknownFields
	// +kubebuilder:validation:EmbeddedResource
	Object runtime.RawExtension `json:"object"`
}

// ZoneVolumeStatus is one member's resize.
type ZoneVolumeStatus struct {
	// name is the member's StatefulSet.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// phase is Pending, Expanding, Restarting, Replacing or Complete.
	// +optional
	Phase ZoneVolumePhase `json:"phase,omitempty"`
	// claims are the member's claims of the templates resized, every
	// ordinal that has one.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=512
	Claims []ClaimStatus `json:"claims,omitempty"`
}

// ClaimStatus is one PersistentVolumeClaim's resize.
type ClaimStatus struct {
	// name is the claim's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// requested is the storage the claim requests.
	// +optional
	Requested *resource.Quantity `json:"requested,omitempty"`
	// capacity is the storage its volume reports.
	// +optional
	Capacity *resource.Quantity `json:"capacity,omitempty"`
	// phase is Pending, Expanding, FileSystemResizePending or Resized.
	// +optional
	Phase ClaimPhase `json:"phase,omitempty"`
}

// Reasons of the VolumeResize Events.
const (
	// ReasonVolumeResizeStarted: a resize began.
	ReasonVolumeResizeStarted = "VolumeResizeStarted"
	// ReasonVolumeResizeBlocked: the resize touches nothing; the message says why.
	ReasonVolumeResizeBlocked = "VolumeResizeBlocked"
	// ReasonClaimsPatched: a zone's claims were asked for the new size.
	ReasonClaimsPatched = "ClaimsPatched"
	// ReasonResizeRestart: pods whose filesystem grows offline were restarted.
	ReasonResizeRestart = "ResizeRestart"
	// ReasonStatefulSetReplaced: a member was replaced with the new size.
	ReasonStatefulSetReplaced = "StatefulSetReplaced"
	// ReasonZoneResized: a zone's claims and template have the new size.
	ReasonZoneResized = "ZoneResized"
	// ReasonVolumeResizeComplete: every zone has the new size.
	ReasonVolumeResizeComplete = "VolumeResizeComplete"
)
