package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnotationRotate asks for one pod to be replaced with no template change:
// a node cycler sets it (any value) on the pods of a node it wants to empty,
// and the group replaces them as it replaces pods older than spec.restartAt,
// zone by zone under the group's guarantees. The replacement pod does not
// carry it, unless the pod template does: then the annotation is ignored, so
// that no pod is replaced forever.
const AnnotationRotate = "echelon.dev/rotate"

// ReasonRestartingPods: phase Progressing; no pod needs a new revision, and
// pods created before spec.restartAt, or annotated echelon.dev/rotate, are
// being replaced (a batch was just deleted, or the member waits for the pods
// of the last one).
const ReasonRestartingPods = "RestartingPods"

// RotationStatus is the progress of the replacement of pods that
// spec.restartAt or the echelon.dev/rotate annotation asked for.
type RotationStatus struct {
	// startTime is when the current (or last) rotation began: the first pass
	// that saw a pod to restart.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when the last rotation ended: no pod left to restart
	// and every member whole again.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// podsToRestart counts the pods, over every member, that still have to be
	// replaced (terminating pods are not counted).
	// +optional
	PodsToRestart int32 `json:"podsToRestart,omitempty"`
}

// LeakRecord is what Echelon recorded of an OnDelete member's rollout to one
// update revision, so that a pod that reaches the revision although Echelon
// did not remove it (a leaked pod: a node drain, an eviction, a crash) is
// told apart, also after an operator restart. Ordinals are written as
// compact ranges, such as "0-3,7".
type LeakRecord struct {
	// member is the StatefulSet the record is about.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Member string `json:"member"`
	// revision is the update revision the record is about; a new update
	// revision starts a new record.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Revision string `json:"revision"`
	// since is when Echelon first saw the member with pods to roll to
	// revision; only pods created since then can be leaked.
	// +required
	Since metav1.Time `json:"since"`
	// ordinals are the ordinals the member wanted when the record began:
	// a pod a later scale-up adds is not a leaked pod.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Ordinals string `json:"ordinals,omitempty"`
	// removed are the ordinals whose pods Echelon deleted or evicted in this
	// rollout, recorded before the pods are removed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Removed string `json:"removed,omitempty"`
	// leaked are the ordinals counted as leaked in this rollout.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Leaked string `json:"leaked,omitempty"`
	// leakedPods counts the pods counted as leaked in this rollout.
	// +optional
	LeakedPods int32 `json:"leakedPods,omitempty"`
}
