package resize

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// RecreateObject is the StatefulSet that replaces sts: the same name,
// namespace, labels, annotations, owner references and spec, with each
// volumeClaimTemplate named in sizes asking for its size. What the API
// server sets on a create (UID, resourceVersion, generation, timestamps,
// managed fields, status) is left out, and so are finalizers: each served
// the deleted object's end (the orphaning delete adds one of its own), and
// a controller that wants one on the new object adds it again.
func RecreateObject(sts *appsv1.StatefulSet, sizes []v1alpha1.VolumeClaimSize) *appsv1.StatefulSet {
	out := &appsv1.StatefulSet{
		TypeMeta: metav1.TypeMeta{APIVersion: appsv1.SchemeGroupVersion.String(), Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: sts.Name, Namespace: sts.Namespace, Labels: sts.Labels, Annotations: sts.Annotations,
			OwnerReferences: sts.OwnerReferences,
		},
		Spec: *sts.Spec.DeepCopy(),
	}
	out.ObjectMeta = *out.ObjectMeta.DeepCopy()
	for i := range out.Spec.VolumeClaimTemplates {
		t := &out.Spec.VolumeClaimTemplates[i]
		if size, ok := sizeOf(sizes, t.Name); ok {
			if t.Spec.Resources.Requests == nil {
				t.Spec.Resources.Requests = corev1.ResourceList{}
			}
			t.Spec.Resources.Requests[corev1.ResourceStorage] = size
		}
	}
	return out
}

// recordOf is the status record of obj, replacing the StatefulSet of uid.
func recordOf(obj *appsv1.StatefulSet, uid types.UID) (*v1alpha1.StatefulSetRecreate, error) {
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, fmt.Errorf("encode StatefulSet %s: %w", obj.Name, err)
	}
	return &v1alpha1.StatefulSetRecreate{Name: obj.Name, UID: string(uid), Object: runtime.RawExtension{Raw: raw}}, nil
}

// decodeRecreate is the StatefulSet a record holds.
func decodeRecreate(rec *v1alpha1.StatefulSetRecreate) (*appsv1.StatefulSet, error) {
	obj := &appsv1.StatefulSet{}
	if err := json.Unmarshal(rec.Object.Raw, obj); err != nil {
		return nil, fmt.Errorf("decode StatefulSet %s: %w", rec.Name, err)
	}
	if obj.Name != rec.Name {
		return nil, fmt.Errorf("object names StatefulSet %q, not %q", obj.Name, rec.Name)
	}
	return obj, nil
}

// ClaimOf is pvc as a claim of sts's template, when its name is
// <template>-<sts>-<ordinal> for one of sts's volumeClaimTemplates.
func ClaimOf(pvc *corev1.PersistentVolumeClaim, sts *appsv1.StatefulSet) (Claim, bool) {
	for _, t := range sts.Spec.VolumeClaimTemplates {
		re := regexp.MustCompile("^" + regexp.QuoteMeta(t.Name+"-"+sts.Name+"-") + "([0-9]+)$")
		m := re.FindStringSubmatch(pvc.Name)
		if m == nil {
			continue
		}
		ord, err := strconv.Atoi(m[1])
		if err != nil {
			continue
		}
		c := Claim{Name: pvc.Name, Template: t.Name, Ordinal: ord,
			Requested: pvc.Spec.Resources.Requests[corev1.ResourceStorage], Capacity: pvc.Status.Capacity[corev1.ResourceStorage]}
		if pvc.Spec.StorageClassName != nil {
			c.Class = *pvc.Spec.StorageClassName
		}
		for _, cond := range pvc.Status.Conditions {
			if cond.Type == corev1.PersistentVolumeClaimFileSystemResizePending && cond.Status == corev1.ConditionTrue {
				c.FileSystemResizePending, c.PendingSince = true, cond.LastTransitionTime.Time
			}
		}
		return c, true
	}
	return Claim{}, false
}
