package rolloutgroup

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/internal/podname"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// A batch's ordinals are in the group's status on the API server before any
// of its pods is deleted; a process that takes over (an empty ledger, no
// expectations) counts the pod a drain deleted as leaked, and neither
// Echelon's own pods nor that leak twice.
func TestControllerLeakRecordSurvivesARestart(t *testing.T) {
	var e *env
	var unrecorded []string
	e = newEnv(t, envOptions{wrapClient: func(c client.Client) client.Client {
		return &deleteHook{Client: c, before: func(_ context.Context, pod client.Object) {
			ord, _ := podname.Ordinal("zone-a", pod.GetName())
			rec := leakRecordOf(e.GetGroup("ingester").Status, "zone-a")
			if rec == nil || !mustParse(t, rec.Removed).Has(ord) {
				unrecorded = append(unrecorded, pod.GetName())
			}
		}}
	}})
	a := e.StatefulSet("zone-a", 4, "r1")
	e.Pods(a, 4, "r1", controllertest.PodSpec{Bound: true})
	e.Group("ingester", 2, "zone-a")
	e.SetRevisions("zone-a", "r1", "r2")
	cached := func(what string, ok func([]corev1.Pod) bool) {
		t.Helper()
		e.Eventually(10*time.Second, what, func() (bool, error) {
			var list corev1.PodList
			if err := e.view.List(e.Ctx, &list, client.InNamespace(e.NS)); err != nil {
				return false, err
			}
			return ok(list.Items) && e.r.Get(e.Ctx, client.ObjectKeyFromObject(a), a) == nil && a.Status.UpdateRevision == "r2", nil
		})
	}
	onR2 := func(want int) func([]corev1.Pod) bool {
		return func(pods []corev1.Pod) bool {
			n := 0
			for _, p := range pods {
				if p.DeletionTimestamp == nil && p.Labels["controller-revision-hash"] == "r2" {
					n++
				}
			}
			return len(pods) == 4 && n == want
		}
	}
	cached("the pods and the revision", onR2(0))

	e.reconcile("ingester")
	if n := e.Terminating("zone-a"); n != 2 {
		t.Fatalf("first batch: %d pods terminating, want 2", n)
	}
	if len(unrecorded) > 0 {
		t.Errorf("pods %v deleted before their ordinals were on record", unrecorded)
	}
	if rec := leakRecordOf(e.GetGroup("ingester").Status, "zone-a"); rec == nil || rec.Removed != "2-3" || rec.LeakedPods != 0 {
		t.Fatalf("leak record %+v, want ordinals 2-3 removed and no leak", rec)
	}

	// Echelon's two pods come back on r2, and a drain takes zone-a-0, which
	// comes back on r2 too.
	e.RecreatePod(a, 3, "r2", controllertest.PodSpec{Bound: true})
	e.RecreatePod(a, 2, "r2", controllertest.PodSpec{Bound: true})
	e.RecreatePod(a, 0, "r2", controllertest.PodSpec{Bound: true})
	cached("the recreated pods", onR2(3))
	for pass := range 2 {
		// A new process: no status in memory, no expectations.
		e.r.status, e.r.deletions = newStatusLedger(), newDeletionExpectations()
		e.r.Reconcile(e.Ctx, reconcileRequest(e, "ingester")) //nolint:errcheck // judged by the status it writes
		rg := e.GetGroup("ingester")
		rec := leakRecordOf(rg.Status, "zone-a")
		if rg.Status.LeakedPods != 1 || rec == nil || rec.Leaked != "0" || rec.LeakedPods != 1 || rg.Status.StatefulSets[0].LeakedPods != 1 {
			t.Errorf("pass %d after a restart: leakedPods %d, record %+v; want zone-a-0 leaked, once", pass, rg.Status.LeakedPods, rec)
		}
		if pass == 0 && !strings.Contains(rg.Status.StatefulSets[0].Message, "1 pod leaked") {
			t.Errorf("member message %q does not tell the leak", rg.Status.StatefulSets[0].Message)
		}
	}
	if len(unrecorded) > 0 {
		t.Errorf("pods %v deleted before their ordinals were on record", unrecorded)
	}
}

func mustParse(t *testing.T, s string) interface{ Has(int) bool } {
	t.Helper()
	ords, err := rollout.ParseOrdinals(s)
	if err != nil {
		t.Fatal(err)
	}
	return ords
}
