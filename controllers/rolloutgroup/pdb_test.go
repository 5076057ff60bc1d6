package rolloutgroup

// spec.maxUnavailableFrom: PodDisruptionBudget, against the API server: the
// budget that selects a member's pods gives its maxUnavailable, and a change
// of the budget while the group rolls applies from the next batch.

import (
	"testing"
	"time"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/test/builders"
)

// budgetGroup creates a group of members taking maxUnavailable from
// PodDisruptionBudgets, with spec.maxUnavailable 1 to fall back to.
func (e *env) budgetGroup(name string, members ...string) {
	e.T.Helper()
	rg := builders.MakeRolloutGroup(e.NS, name).MaxUnavailable(1).Members(members...).
		MaxUnavailableFrom(v1alpha1.MaxUnavailableFromPodDisruptionBudget).Obj()
	if err := e.Admin.Create(e.Ctx, rg); err != nil {
		e.T.Fatal(err)
	}
}

// budget creates a PodDisruptionBudget selecting app=<app> with
// maxUnavailable n.
func (e *env) budget(name, app string, n int32) *policyv1.PodDisruptionBudget {
	e.T.Helper()
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.NS},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(intstr.FromInt32(n)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}},
	}
	if err := e.Admin.Create(e.Ctx, pdb); err != nil {
		e.T.Fatal(err)
	}
	return pdb
}

// setBudget changes the budget's maxUnavailable and waits until the
// reconciler's cache shows it.
func (e *env) setBudget(name string, n int32) {
	e.T.Helper()
	key := types.NamespacedName{Namespace: e.NS, Name: name}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		pdb := &policyv1.PodDisruptionBudget{}
		if err := e.Admin.Get(e.Ctx, key, pdb); err != nil {
			return err
		}
		pdb.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(n))
		return e.Admin.Update(e.Ctx, pdb)
	}); err != nil {
		e.T.Fatal(err)
	}
	e.Eventually(10*time.Second, "the cache to see the budget's change", func() (bool, error) {
		pdb := &policyv1.PodDisruptionBudget{}
		err := e.r.Get(e.Ctx, key, pdb)
		return err == nil && pdb.Spec.MaxUnavailable.IntVal == n, err
	})
}

// memberStatus is the group's status of member.
func memberStatus(rg *v1alpha1.RolloutGroup, member string) v1alpha1.MemberStatus {
	for _, m := range rg.Status.StatefulSets {
		if m.Name == member {
			return m
		}
	}
	return v1alpha1.MemberStatus{}
}

// Each batch takes the budget's maxUnavailable, as it is at that batch: a
// budget raised while the group rolls lets the next batch be larger, and
// one deleted falls back to the spec's value, and the status says where
// each came from.
func TestControllerMaxUnavailableFromAPodDisruptionBudget(t *testing.T) {
	e := newEnv(t, envOptions{liveReadsAsOperator: true})
	a := e.StatefulSet("zone-a", 6, "r1")
	e.Pods(a, 6, "r1", controllertest.PodSpec{Bound: true})
	pdb := e.budget("zone-a", "zone-a", 2)
	e.budgetGroup("ingester", "zone-a")
	e.SetRevisions("zone-a", "r1", "r2")
	e.Eventually(10*time.Second, "the cache to see the group, the budget and the revision", func() (bool, error) {
		return e.r.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "ingester"}, &v1alpha1.RolloutGroup{}) == nil &&
			e.r.Get(e.Ctx, client.ObjectKeyFromObject(pdb), &policyv1.PodDisruptionBudget{}) == nil &&
			e.r.Get(e.Ctx, client.ObjectKeyFromObject(a), a) == nil && a.Status.UpdateRevision == "r2", nil
	})

	for _, step := range []struct {
		name        string
		change      func()
		terminating int
		max         int32
		from        string
	}{
		{"the budget's maxUnavailable 2", func() {}, 2, 2, "PodDisruptionBudget zone-a (maxUnavailable 2)"},
		{"the budget raised to 3 while rolling", func() { e.setBudget("zone-a", 3) }, 3, 3, "PodDisruptionBudget zone-a (maxUnavailable 3)"},
		{"the budget deleted: the spec's 1, nothing more deleted", func() {
			if err := e.Admin.Delete(e.Ctx, pdb); err != nil {
				t.Fatal(err)
			}
			e.Eventually(10*time.Second, "the cache to see the budget gone", func() (bool, error) {
				err := e.r.Get(e.Ctx, client.ObjectKeyFromObject(pdb), &policyv1.PodDisruptionBudget{})
				return err != nil, client.IgnoreNotFound(err)
			})
		}, 3, 1, "spec: no PodDisruptionBudget selects the pods"},
	} {
		step.change()
		e.reconcile("ingester")
		if n := e.Terminating("zone-a"); n != step.terminating {
			t.Errorf("%s: %d pods of zone-a terminating, want %d", step.name, n, step.terminating)
		}
		ms := memberStatus(e.GetGroup("ingester"), "zone-a")
		if ms.MaxUnavailable != step.max || ms.MaxUnavailableFrom != step.from {
			t.Errorf("%s: status maxUnavailable %d from %q, want %d from %q", step.name, ms.MaxUnavailable, ms.MaxUnavailableFrom, step.max, step.from)
		}
	}
}

// The watch: a budget changed while the group waits for its replaced pods
// wakes the group, which deletes the next pods at once.
func TestControllerPodDisruptionBudgetChangeWakesTheGroup(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	a := e.StatefulSet("zone-a", 6, "r1")
	e.Pods(a, 6, "r1", controllertest.PodSpec{Bound: true}) // deleted pods stay terminating
	e.budget("zone-a", "zone-a", 1)
	e.budgetGroup("ingester", "zone-a")
	e.budgetGroup("other", "zone-b")
	e.Group("spec-only", 1, "zone-c")
	e.waitPhase("ingester", v1alpha1.PhaseComplete, 20*time.Second)

	want := []reconcile.Request{
		{NamespacedName: types.NamespacedName{Namespace: e.NS, Name: "ingester"}},
		{NamespacedName: types.NamespacedName{Namespace: e.NS, Name: "other"}},
	}
	got := e.r.requestsForBudget(e.Ctx, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "any"}})
	if len(got) != 2 || !(got[0] == want[0] && got[1] == want[1] || got[0] == want[1] && got[1] == want[0]) {
		t.Errorf("a budget's event maps to %v, want the groups taking maxUnavailable from budgets %v", got, want)
	}

	e.SetRevisions("zone-a", "r1", "r2")
	e.Eventually(10*time.Second, "the first batch", func() (bool, error) { return e.Terminating("zone-a") == 1, nil })
	time.Sleep(500 * time.Millisecond) // the group settles waiting for zone-a-5
	if n := e.Terminating("zone-a"); n != 1 {
		t.Fatalf("%d pods terminating with the budget's maxUnavailable 1, want 1", n)
	}
	e.setBudget("zone-a", 3)
	// Well within statusProgressInterval, after which a deferred status
	// write would wake the group anyway.
	e.Eventually(3*time.Second, "the batch the raised budget allows", func() (bool, error) { return e.Terminating("zone-a") == 3, nil })
}
