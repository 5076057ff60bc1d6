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
	"github.com/echelon-operator/echelon/test/builders"
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

// A selector group that matches nothing (a label renamed in the same
// upgrade that changes the templates) is Blocked and touches nothing: it
// hands back no partition, so the StatefulSet controller does not roll
// every zone at once (issue 29, finding 3). Partitions go back only when
// the group is deleted or a StatefulSet leaves an explicit list.
func TestControllerKeepsPartitionsOfAnEmptySelector(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, name := range []string{"zone-a", "zone-b"} {
		sts := e.StatefulSet(name, 3, "r1")
		e.Pods(sts, 3, "r1", controllertest.PodSpec{Bound: true})
		e.setStrategy(name, appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType})
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := e.GetSTS(name)
			if got.Labels == nil {
				got.Labels = map[string]string{}
			}
			got.Labels["group"] = "ingester"
			return e.Admin.Update(e.Ctx, got)
		}); err != nil {
			t.Fatal(err)
		}
	}
	rg := builders.MakeRolloutGroup(e.NS, "ingester").MaxUnavailable(1).Selector("group", "ingester").Obj()
	if err := e.Admin.Create(e.Ctx, rg); err != nil {
		t.Fatal(err)
	}
	e.reconcileUntil(e.r, "ingester", 10*time.Second, "both partitions held", func(*v1alpha1.RolloutGroup) (bool, error) {
		return e.partitionOf("zone-a") == 3 && e.partitionOf("zone-b") == 3, nil
	})

	// The selector is renamed: it matches nothing, and the group is Blocked.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := e.GetGroup("ingester")
		got.Spec.Selector.MatchLabels = map[string]string{"group": "renamed"}
		return e.Admin.Update(e.Ctx, got)
	}); err != nil {
		t.Fatal(err)
	}
	e.reconcileUntil(e.r, "ingester", 10*time.Second, "the group Blocked", func(rg *v1alpha1.RolloutGroup) (bool, error) {
		return rg.Status.Phase == v1alpha1.PhaseBlocked, nil
	})
	for range 3 {
		if _, err := e.r.Reconcile(e.Ctx, reconcileRequest(e, "ingester")); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"zone-a", "zone-b"} {
		if p, label := e.partitionOf(name), e.GetSTS(name).Labels[partitionHolderLabel]; p != 3 || label != string(rg.UID) {
			t.Errorf("%s while its selector group is Blocked: partition %d, holder label %q; want 3 and %s", name, p, label, rg.UID)
		}
	}
}
