package kube

import (
	"errors"
	"fmt"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/echelon-operator/echelon/test/builders"
)

func TestReplicasAndStatefulSetReady(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sts      *appsv1.StatefulSet
		replicas int32
		ready    bool
	}{
		{"unset replicas default to 1", builders.MakeStatefulSet("ns", "a").NilReplicas().StatusReplicas(1, 1).Obj(), 1, true},
		{"all replicas Ready", builders.MakeStatefulSet("ns", "a").Replicas(3).StatusReplicas(3, 3).Obj(), 3, true},
		{"one replica not Ready", builders.MakeStatefulSet("ns", "a").Replicas(3).StatusReplicas(3, 2).Obj(), 3, false},
		{"a replica missing", builders.MakeStatefulSet("ns", "a").Replicas(3).StatusReplicas(2, 2).Obj(), 3, false},
		{"a spec its controller has not observed", builders.MakeStatefulSet("ns", "a").Replicas(3).StatusReplicas(3, 3).NotObserved().Obj(), 3, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Replicas(tc.sts); got != tc.replicas {
				t.Errorf("Replicas = %d, want %d", got, tc.replicas)
			}
			if got := StatefulSetReady(tc.sts); got != tc.ready {
				t.Errorf("StatefulSetReady = %v, want %v", got, tc.ready)
			}
		})
	}
}

func TestPodReadiness(t *testing.T) {
	since := time.Date(2026, time.November, 24, 9, 0, 0, 0, time.UTC)
	noCondition := builders.MakePod("ns", "a", 0).Obj()
	noCondition.Status.Conditions = nil
	for _, tc := range []struct {
		name       string
		pod        *corev1.Pod
		condition  corev1.ConditionStatus
		readySince bool
	}{
		{"Running and Ready", builders.MakePod("ns", "a", 0).Ready(since).Obj(), corev1.ConditionTrue, true},
		{"Running, not Ready", builders.MakePod("ns", "a", 0).NotReady().Obj(), corev1.ConditionFalse, false},
		{"Ready but Pending", builders.MakePod("ns", "a", 0).Ready(since).Phase(corev1.PodPending).Obj(), corev1.ConditionTrue, false},
		{"no Ready condition", noCondition, corev1.ConditionUnknown, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := PodReadyCondition(tc.pod); got != tc.condition {
				t.Errorf("PodReadyCondition = %s, want %s", got, tc.condition)
			}
			if got := PodReady(tc.pod); got != (tc.condition == corev1.ConditionTrue) {
				t.Errorf("PodReady = %v", got)
			}
			at, ok := PodReadySince(tc.pod)
			if ok != tc.readySince || (ok && !at.Equal(since)) {
				t.Errorf("PodReadySince = %v, %v; want %v since %v", at, ok, tc.readySince, since)
			}
		})
	}
}

func TestControlledBy(t *testing.T) {
	sts := builders.MakeStatefulSet("ns", "a").UID("new").Obj()
	old := builders.MakeStatefulSet("ns", "a").UID("old").Obj()
	items := []corev1.Pod{
		*builders.MakePod("ns", "a", 0).ControlledBy(sts).Obj(),
		*builders.MakePod("ns", "a", 1).ControlledBy(old).Obj(),
		*builders.MakePod("ns", "a", 2).Obj(),
	}
	got := ControlledBy(items, sts)
	if len(got) != 1 || got[0].Name != "a-0" {
		t.Errorf("ControlledBy = %v, want only a-0 (a-1 belongs to a deleted StatefulSet of the same name)", got)
	}
}

func TestAPIMessage(t *testing.T) {
	conflict := apierrors.NewConflict(schema.GroupResource{Resource: "pods"}, "a-0", errors.New("the object has been modified"))
	if got, want := APIMessage(fmt.Errorf("delete pod a-0: %w", conflict)), conflict.Status().Message; got != want {
		t.Errorf("APIMessage = %q, want the API server's %q", got, want)
	}
	if got := APIMessage(errors.New("dial tcp: refused")); got != "dial tcp: refused" {
		t.Errorf("APIMessage of a plain error = %q", got)
	}
}
