package e2e

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// versionAnnotation is the template annotation the specs change to start a rollout.
const versionAnnotation = "echelon.dev/e2e-version"

// newStatefulSet is an OnDelete StatefulSet whose pods run under kwok. version
// goes into the pod template, so changing it creates a new revision.
func newStatefulSet(namespace, name string, replicas int32, version string) *appsv1.StatefulSet {
	labels := map[string]string{"app": name}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: map[string]string{"echelon.dev/e2e-group": "yes"}},
		Spec: appsv1.StatefulSetSpec{
			Replicas:            ptr.To(replicas),
			ServiceName:         name,
			PodManagementPolicy: appsv1.ParallelPodManagement,
			Selector:            &metav1.LabelSelector{MatchLabels: labels},
			UpdateStrategy:      appsv1.StatefulSetUpdateStrategy{Type: appsv1.OnDeleteStatefulSetStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: map[string]string{versionAnnotation: version}},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "app", Image: "example.com/ingester:1.0"}},
					Tolerations: []corev1.Toleration{{
						Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule,
					}},
				},
			},
		},
	}
}
