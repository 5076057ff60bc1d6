package webhooks

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

// TestGroupBudgets: every group claiming the pod's StatefulSet judges it, by
// name; one whose partition regex does not compile judges nothing, and says
// so.
func TestGroupBudgets(t *testing.T) {
	groups := []v1alpha1.RolloutGroup{
		*builders.MakeRolloutGroup(testNS, "zeta").Members(zoneA).Obj(),
		*builders.MakeRolloutGroup(testNS, "broken").Members(zoneA).DisruptionBudget(builders.MakeZoneBudget().Partitions("(")).Obj(),
		*builders.MakeRolloutGroup(testNS, "alpha").Members(zoneA).Obj(),
	}
	budgets, unusable := groupBudgets(groups, zoneA)
	if got := budgetNames(budgets); !slices.Equal(got, []string{"RolloutGroup alpha in " + zoneA, "RolloutGroup zeta in " + zoneA}) {
		t.Errorf("budgets %v", got)
	}
	if len(unusable) != 1 || !strings.HasPrefix(unusable[0], "RolloutGroup broken: spec.disruptionBudget.podNamePartitionRegex") {
		t.Errorf("unusable %q, want the broken group's regex named", unusable)
	}
}

// TestZDBBudgets: the ZoneDisruptionBudgets whose selector matches the pod
// judge it, by name; one with an invalid or empty selector selects nothing;
// a pod no StatefulSet owns is in no zone, and a budget whose regex does not
// compile judges nothing: both say so.
func TestZDBBudgets(t *testing.T) {
	pod := builders.MakePod(testNS, zoneA, 0).Label("app", "store").Obj()
	zdb := func(name, value string, b *builders.ZoneBudgetWrapper) v1alpha1.ZoneDisruptionBudget {
		return *builders.MakeZoneDisruptionBudget(testNS, name, "app", value, b)
	}
	invalid := zdb("invalid", "store", builders.MakeZoneBudget())
	invalid.Spec.Selector = metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}
	empty := zdb("empty", "store", builders.MakeZoneBudget())
	empty.Spec.Selector = metav1.LabelSelector{}
	zdbs := []v1alpha1.ZoneDisruptionBudget{
		zdb("store-2", "store", builders.MakeZoneBudget()),
		zdb("other", "other", builders.MakeZoneBudget()),
		zdb("broken", "store", builders.MakeZoneBudget().Partitions("(")),
		invalid, empty,
		zdb("store-1", "store", builders.MakeZoneBudget()),
	}
	budgets, unusable := zdbBudgets(zdbs, pod, zoneA)
	if got := budgetNames(budgets); !slices.Equal(got, []string{"ZoneDisruptionBudget store-1 in " + zoneA, "ZoneDisruptionBudget store-2 in " + zoneA}) {
		t.Errorf("budgets %v", got)
	}
	if len(unusable) != 1 || !strings.HasPrefix(unusable[0], "ZoneDisruptionBudget broken: spec.podNamePartitionRegex") {
		t.Errorf("unusable %q, want the broken budget's regex named", unusable)
	}

	budgets, unusable = zdbBudgets(zdbs[:1], pod, "")
	if len(budgets) != 0 || len(unusable) != 1 || !strings.Contains(unusable[0], "which no StatefulSet owns") {
		t.Errorf("a pod no StatefulSet owns: budgets %v, unusable %q", budgets, unusable)
	}
}

func budgetNames(budgets []Budget) []string {
	var out []string
	for _, b := range budgets {
		out = append(out, b.String()+" in "+b.Zone)
	}
	return out
}
