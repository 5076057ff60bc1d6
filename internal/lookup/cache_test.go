package lookup

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// fullStatefulSet has every field a real StatefulSet commonly carries.
func fullStatefulSet() *appsv1.StatefulSet {
	now := metav1.Now()
	return &appsv1.StatefulSet{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "StatefulSet"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "ingester-zone-a", Namespace: "ns", UID: "uid-1", ResourceVersion: "42", Generation: 7,
			CreationTimestamp: now, DeletionTimestamp: &now, Finalizers: []string{"f"},
			Labels: map[string]string{"app": "ingester", "rollout-group": "ingester"},
			Annotations: map[string]string{
				"grafana.com/rollout-downscale-leader": "ingester-zone-b",
				lastAppliedAnnotation:                  `{"a whole copy":"of the object"}`,
			},
			OwnerReferences: []metav1.OwnerReference{{Kind: "Thing", Name: "owner", UID: "o"}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To[int32](5),
			Selector:            &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ingester"}},
			ServiceName:         "ingester",
			PodManagementPolicy: appsv1.ParallelPodManagement,
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To[int32](3), MaxUnavailable: ptr.To(intstr.FromInt32(2))}},
			RevisionHistoryLimit: ptr.To[int32](10),
			MinReadySeconds:      4,
			Ordinals:             &appsv1.StatefulSetOrdinals{Start: 1},
			PersistentVolumeClaimRetentionPolicy: &appsv1.StatefulSetPersistentVolumeClaimRetentionPolicy{
				WhenDeleted: appsv1.RetainPersistentVolumeClaimRetentionPolicyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{
					Labels:      map[string]string{"app": "ingester", "zone": "a"},
					Annotations: map[string]string{v1alpha1.AnnotationRotate: "2026-01-01T00:00:00Z"},
				},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "ingester:2", Args: []string{"-target=ingester"},
						Env: []corev1.EnvVar{{Name: "A", Value: "b"}}}},
					Volumes:      []corev1.Volume{{Name: "data"}},
					NodeSelector: map[string]string{"zone": "a"},
				},
			},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{Resources: corev1.VolumeResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")}}}}},
		},
		Status: appsv1.StatefulSetStatus{
			ObservedGeneration: 7, Replicas: 5, ReadyReplicas: 4, CurrentReplicas: 3, UpdatedReplicas: 2, AvailableReplicas: 4,
			CurrentRevision: "ingester-zone-a-1", UpdateRevision: "ingester-zone-a-2", CollisionCount: ptr.To[int32](0),
			Conditions: []appsv1.StatefulSetCondition{{Type: "Custom", Status: corev1.ConditionTrue}},
		},
	}
}

// TestStripStatefulSetKeepsWhatIsRead checks that the cached StatefulSet keeps
// every field the controllers, the planners and the webhooks read: its
// metadata (labels, annotations, owners, deletion), its whole spec but the
// pod template's spec and the volume claim templates (the template's labels,
// which PodDisruptionBudgets select, and annotations, where echelon.dev/rotate
// may be templated, stay), and its whole status.
func TestStripStatefulSetKeepsWhatIsRead(t *testing.T) {
	in := fullStatefulSet()
	out, err := stripStatefulSet(in.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*appsv1.StatefulSet)

	want := in.DeepCopy()
	want.ManagedFields = nil
	delete(want.Annotations, lastAppliedAnnotation)
	want.Spec.Template.Spec = corev1.PodSpec{}
	want.Spec.VolumeClaimTemplates = nil
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("stripped StatefulSet:\n got %+v\nwant %+v", got, want)
	}
	// What the readers use, named one by one so that a change of the
	// transform that drops one fails here with its name.
	checks := map[string]bool{
		"labels":                          got.Labels["app"] == "ingester",
		"Grafana annotations":             got.Annotations["grafana.com/rollout-downscale-leader"] == "ingester-zone-b",
		"spec.replicas":                   ptr.Deref(got.Spec.Replicas, 0) == 5,
		"spec.selector":                   got.Spec.Selector != nil && got.Spec.Selector.MatchLabels["app"] == "ingester",
		"spec.updateStrategy":             got.Spec.UpdateStrategy.RollingUpdate != nil && *got.Spec.UpdateStrategy.RollingUpdate.Partition == 3,
		"spec.minReadySeconds":            got.Spec.MinReadySeconds == 4,
		"spec.ordinals":                   got.Spec.Ordinals != nil && got.Spec.Ordinals.Start == 1,
		"spec.podManagementPolicy":        got.Spec.PodManagementPolicy == appsv1.ParallelPodManagement,
		"spec.serviceName":                got.Spec.ServiceName == "ingester",
		"spec.template.metadata.labels":   got.Spec.Template.Labels["zone"] == "a",
		"spec.template rotate annotation": got.Spec.Template.Annotations[v1alpha1.AnnotationRotate] != "",
		"status revisions":                got.Status.UpdateRevision == "ingester-zone-a-2" && got.Status.CurrentRevision == "ingester-zone-a-1",
		"status counts":                   got.Status.ReadyReplicas == 4 && got.Status.UpdatedReplicas == 2 && got.Status.ObservedGeneration == 7,
		"deletionTimestamp":               got.DeletionTimestamp != nil,
		"no managed fields":               got.ManagedFields == nil,
		"no pod spec":                     len(got.Spec.Template.Spec.Containers) == 0,
	}
	for field, ok := range checks {
		if !ok {
			t.Errorf("%s not as expected after the transform", field)
		}
	}
}

// TestStripPodKeepsWhatIsRead does the same for pods.
func TestStripPodKeepsWhatIsRead(t *testing.T) {
	now := metav1.Now()
	in := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "ingester-zone-a-0", Namespace: "ns", UID: "uid", ResourceVersion: "9", CreationTimestamp: now,
			DeletionTimestamp: &now, DeletionGracePeriodSeconds: ptr.To[int64](30),
			Labels:          map[string]string{appsv1.ControllerRevisionHashLabelKey: "ingester-zone-a-2"},
			Annotations:     map[string]string{v1alpha1.AnnotationRotate: "x", "other": "y"},
			OwnerReferences: []metav1.OwnerReference{{Kind: "StatefulSet", Name: "ingester-zone-a", UID: "uid-1", Controller: ptr.To(true)}},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubelet"}},
		},
		Spec: corev1.PodSpec{NodeName: "node", Containers: []corev1.Container{{Name: "app", Image: "ingester:2"}}},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: []corev1.PodIP{{IP: "10.0.0.1"}},
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "r", Message: "m"},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true}},
		},
	}
	out, err := stripPod(in.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Pod)
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: in.Name, Namespace: in.Namespace, UID: in.UID, ResourceVersion: in.ResourceVersion, CreationTimestamp: now,
			DeletionTimestamp: &now, DeletionGracePeriodSeconds: in.DeletionGracePeriodSeconds,
			Labels: in.Labels, Annotations: map[string]string{v1alpha1.AnnotationRotate: "x"}, OwnerReferences: in.OwnerReferences,
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", PodIPs: in.Status.PodIPs,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}},
	}
	if !equality.Semantic.DeepEqual(got, want) {
		t.Errorf("stripped pod:\n got %+v\nwant %+v", got, want)
	}
}

// TestStrippedStatefulSetPatchesOnlyWhatChanged holds the argument that makes
// the transform safe for writes: Echelon's writes are merge patches between a
// cached object and a changed copy, so what the cache stripped is absent from
// both and the patch leaves it alone on the API server.
func TestStrippedStatefulSetPatchesOnlyWhatChanged(t *testing.T) {
	out, err := stripStatefulSet(fullStatefulSet())
	if err != nil {
		t.Fatal(err)
	}
	cached := out.(*appsv1.StatefulSet)
	changed := cached.DeepCopy()
	changed.Spec.Replicas = ptr.To[int32](6)
	for name, patch := range map[string]client.Patch{
		"merge":                      client.MergeFrom(cached),
		"merge with optimistic lock": client.MergeFromWithOptions(cached, client.MergeFromWithOptimisticLock{}),
	} {
		data, err := patch.Data(changed)
		if err != nil {
			t.Fatal(err)
		}
		want := `{"spec":{"replicas":6}}`
		if name != "merge" {
			want = `{"metadata":{"resourceVersion":"42"},"spec":{"replicas":6}}`
		}
		if string(data) != want {
			t.Errorf("%s patch = %s, want %s", name, data, want)
		}
	}
}

func TestCacheOptionsTransforms(t *testing.T) {
	co := CacheOptions([]string{"a"})
	if co.DefaultTransform == nil {
		t.Error("no default transform: managed fields of every type would be cached")
	}
	var pods, statefulSets bool
	for obj, by := range co.ByObject {
		switch obj.(type) {
		case *corev1.Pod:
			pods = by.Transform != nil
		case *appsv1.StatefulSet:
			statefulSets = by.Transform != nil
		}
	}
	if !pods || !statefulSets {
		t.Errorf("transforms: pods %v, StatefulSets %v; want both", pods, statefulSets)
	}
	raw := WithoutTransforms(co)
	if raw.DefaultTransform != nil || len(raw.ByObject) != 0 {
		t.Errorf("WithoutTransforms kept a transform: %+v", raw)
	}
	if _, ok := raw.DefaultNamespaces["a"]; !ok {
		t.Error("WithoutTransforms dropped the namespaces")
	}
	// A tombstone passes as it is.
	if out, err := stripStatefulSet("tombstone"); err != nil || out != "tombstone" {
		t.Errorf("tombstone: %v, %v", out, err)
	}
}
