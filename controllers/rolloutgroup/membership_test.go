package rolloutgroup

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
)

// MemberLabeler: every member of a group carries the member label with the
// group's UID, the mark the downscale-budget webhook's objectSelector
// reaches; a StatefulSet that leaves the group loses it, a label removed by
// someone else comes back, and every member loses it once the group is
// deleted. A StatefulSet of no group is never labelled.
func TestControllerLabelsMembers(t *testing.T) {
	e := newEnv(t, envOptions{})
	for _, name := range []string{"zone-a", "zone-b", "other"} {
		sts := e.StatefulSet(name, 2, "r1")
		e.Pods(sts, 2, "r1", controllertest.PodSpec{})
	}
	rg := e.Group("ingester", 1, "zone-a", "zone-b")
	labeler := &MemberLabeler{Client: e.r.Client}
	labelled := func(name string) string { return e.GetSTS(name).Labels[v1alpha1.MemberLabel] }
	labelUntil := func(what string, done func() bool) {
		t.Helper()
		e.Eventually(10*time.Second, what, func() (bool, error) {
			if _, err := labeler.Reconcile(e.Ctx, reconcileRequest(e, "ingester")); err != nil {
				t.Logf("Reconcile: %v", err)
			}
			return done(), nil
		})
	}
	labelUntil("both members labelled", func() bool {
		return labelled("zone-a") == string(rg.UID) && labelled("zone-b") == string(rg.UID)
	})
	if _, ok := e.GetSTS("other").Labels[v1alpha1.MemberLabel]; ok {
		t.Errorf("StatefulSet other, in no group, is labelled a member")
	}

	// Someone (a GitOps sync, kubectl replace) takes zone-a's label off: the
	// next pass puts it back.
	if err := e.Admin.Patch(e.Ctx, e.GetSTS("zone-a"), client.RawPatch(types.MergePatchType,
		[]byte(`{"metadata":{"labels":{"`+v1alpha1.MemberLabel+`":null}}}`))); err != nil {
		t.Fatal(err)
	}
	labelUntil("zone-a labelled again", func() bool { return labelled("zone-a") == string(rg.UID) })

	// zone-b leaves the group: its label goes.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		got := e.GetGroup("ingester")
		got.Spec.StatefulSets = got.Spec.StatefulSets[:1]
		return e.Admin.Update(e.Ctx, got)
	}); err != nil {
		t.Fatal(err)
	}
	labelUntil("zone-b unlabelled", func() bool {
		_, ok := e.GetSTS("zone-b").Labels[v1alpha1.MemberLabel]
		return !ok
	})
	if got := labelled("zone-a"); got != string(rg.UID) {
		t.Errorf("zone-a label %q, want %s: it is still a member", got, rg.UID)
	}

	// The group is deleted: zone-a's label goes.
	if err := e.Admin.Delete(e.Ctx, e.GetGroup("ingester")); err != nil {
		t.Fatal(err)
	}
	e.Eventually(10*time.Second, "the group gone and zone-a unlabelled", func() (bool, error) {
		err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(rg), &v1alpha1.RolloutGroup{})
		if !apierrors.IsNotFound(err) {
			return false, client.IgnoreNotFound(err)
		}
		if _, err := labeler.Reconcile(e.Ctx, reconcileRequest(e, "ingester")); err != nil {
			return false, err
		}
		_, ok := e.GetSTS("zone-a").Labels[v1alpha1.MemberLabel]
		return !ok, nil
	})
}
