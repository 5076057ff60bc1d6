package predicates

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/echelon-operator/echelon/test/builders"
)

func TestUpdatedWhen(t *testing.T) {
	replicasChanged := UpdatedWhen(func(o, n *appsv1.StatefulSet) bool { return *o.Spec.Replicas != *n.Spec.Replicas })
	three, four := builders.MakeStatefulSet("ns", "a").Replicas(3).Obj(), builders.MakeStatefulSet("ns", "a").Replicas(4).Obj()
	pod := builders.MakePod("ns", "a", 0).Obj()
	cases := []struct {
		name string
		ev   event.UpdateEvent
		want bool
	}{
		{"the change it watches", event.UpdateEvent{ObjectOld: three, ObjectNew: four}, true},
		{"another change", event.UpdateEvent{ObjectOld: three, ObjectNew: three.DeepCopy()}, false},
		{"another kind", event.UpdateEvent{ObjectOld: pod, ObjectNew: pod.DeepCopy()}, true},
	}
	for _, tc := range cases {
		if got := replicasChanged.Update(tc.ev); got != tc.want {
			t.Errorf("%s: Update = %v, want %v", tc.name, got, tc.want)
		}
	}
	if !replicasChanged.Create(event.CreateEvent{Object: three}) || !replicasChanged.Delete(event.DeleteEvent{Object: three}) ||
		!replicasChanged.Generic(event.GenericEvent{Object: three}) {
		t.Error("creations, deletions and generic events must pass")
	}
	if NoGeneric(replicasChanged).Generic(event.GenericEvent{Object: &corev1.Pod{}}) {
		t.Error("NoGeneric passed a generic event")
	}
}
