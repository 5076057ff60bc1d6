package e2e

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/echelon-operator/echelon/test/builders"
)

// versionAnnotation is the template annotation the specs change to start a rollout.
const versionAnnotation = "echelon.dev/e2e-version"

// kwokToleration tolerates the taint kwok's fake nodes carry, so that the pods
// can be scheduled onto them.
var kwokToleration = corev1.Toleration{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}

// zoneStatefulSet is an OnDelete StatefulSet whose pods run under kwok. version
// goes into the pod template, so changing it creates a new revision.
func zoneStatefulSet(namespace, name string, replicas int32, version string) *builders.StatefulSetWrapper {
	return builders.MakeStatefulSet(namespace, name).Replicas(replicas).OnDelete().Parallel().
		Label("echelon.dev/e2e-group", "yes").TemplateAnnotation(versionAnnotation, version).
		Image("example.com/ingester:1.0").Toleration(kwokToleration)
}
