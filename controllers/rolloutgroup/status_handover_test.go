package rolloutgroup

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
)

// A leader dies mid-rollout, its second batch's pod still terminating. The
// batch's counters (one more pod rolled, the batch time) were written with
// the batch's intent, before the pod was deleted (statusAfterAct), so the
// next leader, a new reconciler over the same API server, finds them; what
// it would otherwise recover from the pods (recoverDeferred: the pod deleted
// and not yet replaced, the pods replaced since the rollout began) agrees.
// podsRolled ends at the number of pods rolled, not one short or one over.
func TestControllerHandoverKeepsDeferredCounters(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.StatefulSet("zone-a", 3, "r1")
	e.Pods(a, 3, "r1", controllertest.PodSpec{Bound: true})
	e.Group("ingester", 1, "zone-a")
	e.PlayStatefulSetController(controllertest.KubeletTiming{ReadyAfter: 50 * time.Millisecond, TerminateAfter: 3 * time.Second}, "zone-a")
	e.SetRevisions("zone-a", "r1", "r2")
	e.Eventually(10*time.Second, "the cache to show update revision r2", func() (bool, error) {
		return e.r.Get(e.Ctx, client.ObjectKeyFromObject(a), a) == nil && a.Status.UpdateRevision == "r2", nil
	})

	// First batch: the rollout starts, written at once.
	e.reconcile("ingester")
	if rg := e.GetGroup("ingester"); rg.Status.PodsRolled != 1 {
		t.Fatalf("podsRolled %d after the first batch, want 1 written", rg.Status.PodsRolled)
	}
	// Second batch, once the first pod is back: its counters go with its
	// intent's write.
	e.Eventually(20*time.Second, "the first batch's pod back on r2", func() (bool, error) {
		return e.Terminating("zone-a") == 0 && e.podRevisions("zone-a")["r2"] == 1, nil
	})
	deletedAt := time.Now().Truncate(time.Second) // lastBatchTime has seconds only
	e.Eventually(10*time.Second, "the second batch", func() (bool, error) {
		e.reconcile("ingester")
		return e.Terminating("zone-a") == 1, nil
	})
	secondBatch := e.GetGroup("ingester")
	if secondBatch.Status.PodsRolled != 2 || secondBatch.Status.LastBatchTime == nil || secondBatch.Status.LastBatchTime.Time.Before(deletedAt) {
		t.Fatalf("right after the second batch podsRolled %d, lastBatchTime %v: want 2 and the batch's time written with its intent",
			secondBatch.Status.PodsRolled, secondBatch.Status.LastBatchTime)
	}

	// The leader dies; the next one takes over while the second batch's pod
	// is still terminating.
	next := e.restarted()
	if _, err := next.Reconcile(e.Ctx, reconcileRequest(e, "ingester")); err != nil {
		t.Fatal(err)
	}
	rg := e.GetGroup("ingester")
	if rg.Status.PodsRolled != 2 || rg.Status.LastBatchTime == nil || rg.Status.LastBatchTime.Time.Before(deletedAt) {
		t.Errorf("after the handover podsRolled %d, lastBatchTime %v: want 2 and the second batch's time (>= %v)",
			rg.Status.PodsRolled, rg.Status.LastBatchTime, deletedAt)
	}
	e.reconcileUntil(next, "ingester", 30*time.Second, "the rollout to complete", func(rg *v1alpha1.RolloutGroup) (bool, error) {
		return rg.Status.Phase == v1alpha1.PhaseComplete, nil
	})
	if rg := e.GetGroup("ingester"); rg.Status.PodsRolled != 3 {
		t.Errorf("podsRolled %d once complete, want 3 (every pod rolled once)", rg.Status.PodsRolled)
	}
}
