package rolloutgroup

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
)

// A complete RollingUpdate member's partition is held at its replicas, with
// the group's finalizer and the StatefulSet's holder label; a StatefulSet that
// leaves the group gets its partition back, and so does every one when the
// group is deleted, after which the finalizer goes.
func TestControllerHoldsAndHandsBackPartitions(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, name := range []string{"zone-a", "zone-b"} {
		sts := e.StatefulSet(name, 3, "r1")
		e.Pods(sts, 3, "r1", controllertest.PodSpec{Bound: true})
		e.setStrategy(name, appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType})
	}
	rg := e.Group("ingester", 1, "zone-a", "zone-b")
	e.reconcileUntil(e.r, "ingester", 10*time.Second, "both partitions held", func(*v1alpha1.RolloutGroup) (bool, error) {
		return e.partitionOf("zone-a") == 3 && e.partitionOf("zone-b") == 3, nil
	})
	if got := e.GetGroup("ingester"); !controllerutil.ContainsFinalizer(got, partitionFinalizer) {
		t.Errorf("finalizers %v, want %s", got.Finalizers, partitionFinalizer)
	}
	if got := e.GetSTS("zone-b").Labels[partitionHolderLabel]; got != string(rg.UID) {
		t.Errorf("zone-b holder label %q, want the group's UID %s", got, rg.UID)
	}

	// zone-b leaves the group: its partition is handed back.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := e.GetGroup("ingester")
		got.Spec.StatefulSets = got.Spec.StatefulSets[:1]
		return e.Admin.Update(e.Ctx, got)
	}); err != nil {
		t.Fatal(err)
	}
	e.reconcileUntil(e.r, "ingester", 10*time.Second, "zone-b handed back", func(*v1alpha1.RolloutGroup) (bool, error) {
		_, held := e.GetSTS("zone-b").Labels[partitionHolderLabel]
		return !held && e.partitionOf("zone-b") == 0, nil
	})
	if p := e.partitionOf("zone-a"); p != 3 {
		t.Errorf("zone-a partition %d, want 3: it is still a member", p)
	}

	// The group is deleted: zone-a is handed back and the finalizer goes.
	if err := e.Admin.Delete(e.Ctx, e.GetGroup("ingester")); err != nil {
		t.Fatal(err)
	}
	e.Eventually(10*time.Second, "the group gone", func() (bool, error) {
		if _, err := e.r.Reconcile(e.Ctx, reconcileRequest(e, "ingester")); err != nil {
			return false, err
		}
		err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(rg), &v1alpha1.RolloutGroup{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if _, held := e.GetSTS("zone-a").Labels[partitionHolderLabel]; held || e.partitionOf("zone-a") != 0 {
		t.Errorf("zone-a after the group's deletion: partition %d, labels %v; want 0 and no holder label", e.partitionOf("zone-a"), e.GetSTS("zone-a").Labels)
	}
}

func (e *env) setStrategy(name string, strategy appsv1.StatefulSetUpdateStrategy) {
	e.T.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := e.GetSTS(name)
		sts.Spec.UpdateStrategy = strategy
		return e.Admin.Update(e.Ctx, sts)
	}); err != nil {
		e.T.Fatal(err)
	}
	e.SetRevisions(name, "r1", "r1") // observed again
}

func (e *env) partitionOf(name string) int32 {
	e.T.Helper()
	if ru := e.GetSTS(name).Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return *ru.Partition
	}
	return 0
}
