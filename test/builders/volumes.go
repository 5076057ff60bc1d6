package builders

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// VolumeClaimTemplate adds a volumeClaimTemplate name of size in class.
func (w *StatefulSetWrapper) VolumeClaimTemplate(name, size, class string) *StatefulSetWrapper {
	w.sts.Spec.VolumeClaimTemplates = append(w.sts.Spec.VolumeClaimTemplates, corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse(size)}},
		},
	})
	return w
}

// VolumeClaimSize asks the group for size of the claims of template.
func (w *RolloutGroupWrapper) VolumeClaimSize(template, size string) *RolloutGroupWrapper {
	w.rg.Spec.VolumeClaimSizes = append(w.rg.Spec.VolumeClaimSizes, v1alpha1.VolumeClaimSize{Name: template, Size: size})
	return w
}

// ClaimWrapper builds a PersistentVolumeClaim.
type ClaimWrapper struct{ pvc corev1.PersistentVolumeClaim }

// MakeClaim is the claim the StatefulSet controller makes for template of
// statefulSet's ordinal: <template>-<statefulSet>-<ordinal>, requesting and
// bound to size in class.
func MakeClaim(namespace, template, statefulSet string, ordinal int, size, class string) *ClaimWrapper {
	q := resource.MustParse(size)
	return &ClaimWrapper{pvc: corev1.PersistentVolumeClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: fmt.Sprintf("%s-%s-%d", template, statefulSet, ordinal)},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			StorageClassName: ptr.To(class),
			Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: q}},
		},
		Status: corev1.PersistentVolumeClaimStatus{Phase: corev1.ClaimBound, Capacity: corev1.ResourceList{corev1.ResourceStorage: q}},
	}}
}

// Obj returns a deep copy of the claim built so far.
func (w *ClaimWrapper) Obj() *corev1.PersistentVolumeClaim { return w.pvc.DeepCopy() }

// Requests sets the storage the claim requests.
func (w *ClaimWrapper) Requests(size string) *ClaimWrapper {
	w.pvc.Spec.Resources.Requests[corev1.ResourceStorage] = resource.MustParse(size)
	return w
}

// Capacity sets the storage its volume reports.
func (w *ClaimWrapper) Capacity(size string) *ClaimWrapper {
	w.pvc.Status.Capacity[corev1.ResourceStorage] = resource.MustParse(size)
	return w
}

// FileSystemResizePending sets that condition, true since at.
func (w *ClaimWrapper) FileSystemResizePending(at metav1.Time) *ClaimWrapper {
	w.pvc.Status.Conditions = append(w.pvc.Status.Conditions, corev1.PersistentVolumeClaimCondition{
		Type: corev1.PersistentVolumeClaimFileSystemResizePending, Status: corev1.ConditionTrue, LastTransitionTime: at})
	return w
}
