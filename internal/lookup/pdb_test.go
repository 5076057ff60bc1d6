package lookup

import (
	"strings"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

func pdb(name string, spec policyv1.PodDisruptionBudgetSpec, expected int32) *policyv1.PodDisruptionBudget {
	return &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: spec,
		Status: policyv1.PodDisruptionBudgetStatus{ExpectedPods: expected}}
}

func maxUnavailable(v intstr.IntOrString) policyv1.PodDisruptionBudgetSpec {
	return policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr.To(v)}
}

func minAvailable(v intstr.IntOrString) policyv1.PodDisruptionBudgetSpec {
	return policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(v)}
}

func TestMaxUnavailableFromBudgets(t *testing.T) {
	for _, tc := range []struct {
		name     string
		covering []*policyv1.PodDisruptionBudget
		want     int32
		// from is a substring of the note; a fallback's starts with "spec: ".
		from string
	}{
		{"maxUnavailable N", []*policyv1.PodDisruptionBudget{pdb("ingester", maxUnavailable(intstr.FromInt32(2)), 0)}, 2,
			"PodDisruptionBudget ingester (maxUnavailable 2)"},
		{"maxUnavailable P% of the expected pods, rounded down", []*policyv1.PodDisruptionBudget{pdb("ingester", maxUnavailable(intstr.FromString("10%")), 39)}, 3,
			"PodDisruptionBudget ingester (maxUnavailable 10% of 39 expected pods)"},
		{"minAvailable N", []*policyv1.PodDisruptionBudget{pdb("ingester", minAvailable(intstr.FromInt32(28)), 30)}, 2,
			"PodDisruptionBudget ingester (30 expected pods - minAvailable 28)"},
		{"minAvailable P% rounded up, as the disruption controller does", []*policyv1.PodDisruptionBudget{pdb("ingester", minAvailable(intstr.FromString("90%")), 25)}, 2,
			"(25 expected pods - minAvailable 90%)"},
		{"no budget", nil, 0, "spec: no PodDisruptionBudget selects the pods"},
		{"several budgets", []*policyv1.PodDisruptionBudget{pdb("a", maxUnavailable(intstr.FromInt32(1)), 3), pdb("b", maxUnavailable(intstr.FromInt32(1)), 3)}, 0,
			"spec: 2 PodDisruptionBudgets select the pods (a, b)"},
		{"many budgets are not all named", []*policyv1.PodDisruptionBudget{pdb("a", maxUnavailable(intstr.FromInt32(1)), 3), pdb("b", maxUnavailable(intstr.FromInt32(1)), 3),
			pdb("c", maxUnavailable(intstr.FromInt32(1)), 3), pdb("d", maxUnavailable(intstr.FromInt32(1)), 3), pdb("e", maxUnavailable(intstr.FromInt32(1)), 3)}, 0,
			"spec: 5 PodDisruptionBudgets select the pods (a, b, c, 2 more)"},
		{"maxUnavailable 0 would stop every rollout", []*policyv1.PodDisruptionBudget{pdb("frozen", maxUnavailable(intstr.FromInt32(0)), 3)}, 0,
			"spec: PodDisruptionBudget frozen lets no pod be unavailable (maxUnavailable 0)"},
		{"a percentage rounding down to 0", []*policyv1.PodDisruptionBudget{pdb("small", maxUnavailable(intstr.FromString("10%")), 5)}, 0,
			"spec: PodDisruptionBudget small lets no pod be unavailable"},
		{"minAvailable of every expected pod", []*policyv1.PodDisruptionBudget{pdb("all", minAvailable(intstr.FromString("100%")), 3)}, 0,
			"spec: PodDisruptionBudget all lets no pod be unavailable"},
		{"expected pods not reported yet", []*policyv1.PodDisruptionBudget{pdb("new", minAvailable(intstr.FromInt32(2)), 0)}, 0,
			"spec: PodDisruptionBudget new reports no status.expectedPods yet"},
		{"neither field", []*policyv1.PodDisruptionBudget{pdb("empty", policyv1.PodDisruptionBudgetSpec{}, 3)}, 0,
			"spec: PodDisruptionBudget empty sets neither maxUnavailable nor minAvailable"},
		{"an invalid percentage", []*policyv1.PodDisruptionBudget{pdb("bad", maxUnavailable(intstr.FromString("ten%")), 3)}, 0,
			"spec: PodDisruptionBudget bad has an invalid maxUnavailable"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, from := MaxUnavailableFromBudgets(tc.covering)
			if got != tc.want || !strings.Contains(from, tc.from) {
				t.Errorf("= %d, %q; want %d, %q", got, from, tc.want, tc.from)
			}
			if (got == 0) != strings.HasPrefix(from, "spec: ") {
				t.Errorf("note %q: a fallback to the spec must say so, and only a fallback", from)
			}
		})
	}
}

func TestCovers(t *testing.T) {
	pods := map[string]string{"app": "ingester", "zone": "a"}
	for _, tc := range []struct {
		name string
		sel  *metav1.LabelSelector
		want bool
	}{
		{"a matching selector", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ingester"}}, true},
		{"another app", &metav1.LabelSelector{MatchLabels: map[string]string{"app": "querier"}}, false},
		{"an expression", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "zone", Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}, true},
		// policy/v1: a null selector selects no pod, an empty one every pod.
		{"a null selector", nil, false},
		{"an empty selector", &metav1.LabelSelector{}, true},
		{"an invalid selector", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Covers(&policyv1.PodDisruptionBudget{Spec: policyv1.PodDisruptionBudgetSpec{Selector: tc.sel}}, pods); got != tc.want {
				t.Errorf("Covers = %v, want %v", got, tc.want)
			}
		})
	}
}
