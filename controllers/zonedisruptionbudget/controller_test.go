package zonedisruptionbudget

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
)

func TestMain(m *testing.M) { controllertest.Main(m) }

// A budget over two StatefulSets' pods judges both; once a RolloutGroup
// claims one, the budget says that zone's pods are the group's to judge, and
// judges both again when the group goes.
func TestBudgetReportsTheZonesItJudges(t *testing.T) {
	e := controllertest.New(t, controllertest.Options{})
	if err := New(e.Manager).SetupWithManager(e.Manager); err != nil {
		t.Fatal(err)
	}
	e.Start()
	for _, name := range []string{"store-a", "store-b"} {
		e.Pods(e.StatefulSet(name, 2, "r1"), 2, "r1", controllertest.PodSpec{})
	}
	zdb := &v1alpha1.ZoneDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "store"},
		Spec: v1alpha1.ZoneDisruptionBudgetSpec{Selector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"store-a", "store-b"}},
		}}},
	}
	if err := e.Admin.Create(e.Ctx, zdb); err != nil {
		t.Fatal(err)
	}
	readyReason := func(reason string, contains ...string) func() (bool, error) {
		return func() (bool, error) {
			got := &v1alpha1.ZoneDisruptionBudget{}
			if err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(zdb), got); err != nil {
				return false, err
			}
			c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ZoneBudgetConditionReady)
			if c == nil || c.Reason != reason || c.ObservedGeneration != got.Generation {
				return false, nil
			}
			for _, s := range contains {
				if !strings.Contains(c.Message, s) {
					return false, nil
				}
			}
			return true, nil
		}
	}
	e.Eventually(10*time.Second, "Judging both zones", readyReason(v1alpha1.ZoneBudgetReasonJudging, "2 zones: store-a, store-b"))

	rg := e.Group("store", 1, "store-a")
	e.Eventually(10*time.Second, "store-a left to RolloutGroup store",
		readyReason(v1alpha1.ZoneBudgetReasonOverlapsGroup, "store-a (RolloutGroup store)", "1 zones: store-b"))

	if err := e.Admin.Delete(e.Ctx, rg); err != nil {
		t.Fatal(err)
	}
	e.Eventually(10*time.Second, "Judging both zones again", readyReason(v1alpha1.ZoneBudgetReasonJudging, "2 zones"))
}

// A regex that does not compile is reported, naming the field.
func TestBudgetReportsAnInvalidRegex(t *testing.T) {
	zdb := &v1alpha1.ZoneDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	zdb.Spec.PodNamePartitionRegex = "ingester-(["
	e := &Reconciler{}
	obs, err := e.observe(t.Context(), zdb)
	if err != nil {
		t.Fatal(err)
	}
	st := computeStatus(zdb, obs)
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ZoneBudgetConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1alpha1.ZoneBudgetReasonInvalidSpec ||
		!strings.HasPrefix(c.Message, "spec.podNamePartitionRegex") || c.ObservedGeneration != 2 {
		t.Errorf("condition %+v, want False InvalidSpec naming spec.podNamePartitionRegex at generation 2", c)
	}
}
