package lookup

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strings"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// UsesPodDisruptionBudgets reports whether the group takes its members'
// maxUnavailable from PodDisruptionBudgets.
func UsesPodDisruptionBudgets(rg *v1alpha1.RolloutGroup) bool {
	return rg.Spec.MaxUnavailableFrom == v1alpha1.MaxUnavailableFromPodDisruptionBudget
}

// budgetsFor sets each member's MaxUnavailable from the PodDisruptionBudget
// of the group's namespace whose selector matches the member's pod template
// labels, when the group takes maxUnavailable from PodDisruptionBudgets, and
// says in MaxUnavailableFrom where the value came from: that budget, or the
// spec and why (no budget, several, one that allows nothing or cannot say
// yet). Members keep the spec's value otherwise.
func budgetsFor(ctx context.Context, c client.Reader, rg *v1alpha1.RolloutGroup, members []rollout.Member) error {
	if !UsesPodDisruptionBudgets(rg) {
		return nil
	}
	var list policyv1.PodDisruptionBudgetList
	if err := c.List(ctx, &list, client.InNamespace(rg.Namespace)); err != nil {
		return fmt.Errorf("list PodDisruptionBudgets for spec.maxUnavailableFrom: %w", err)
	}
	slices.SortFunc(list.Items, func(a, b policyv1.PodDisruptionBudget) int { return strings.Compare(a.Name, b.Name) })
	for i := range members {
		m := &members[i]
		if m.StatefulSet == nil {
			continue
		}
		var covering []*policyv1.PodDisruptionBudget
		for j := range list.Items {
			if Covers(&list.Items[j], m.StatefulSet.Spec.Template.Labels) {
				covering = append(covering, &list.Items[j])
			}
		}
		n, from := MaxUnavailableFromBudgets(covering)
		if n > 0 {
			m.MaxUnavailable = ptr.To(intstr.FromInt32(n))
		}
		m.MaxUnavailableFrom = from
	}
	return nil
}

// Covers reports whether the budget's selector matches pods with podLabels.
// As in policy/v1, a null selector matches no pod and an empty one every pod
// of the namespace.
func Covers(pdb *policyv1.PodDisruptionBudget, podLabels map[string]string) bool {
	if pdb.Spec.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	return err == nil && sel.Matches(labels.Set(podLabels))
}

// MaxUnavailableFromBudgets is the maxUnavailable the budgets that cover a
// member's pods give it, and a note for status.statefulSets[].maxUnavailableFrom.
// Exactly one budget must cover the pods (the Eviction API refuses to evict a
// pod that several cover), and it must let at least one pod be unavailable:
//
//   - maxUnavailable: N gives N;
//   - maxUnavailable: P% gives P% of its status.expectedPods, rounded down:
//     never more than the budget lets go;
//   - minAvailable: N gives status.expectedPods - N;
//   - minAvailable: P% gives status.expectedPods - P% of them rounded up,
//     as the disruption controller rounds it.
//
// Otherwise it returns 0, and the note says why the spec's value applies.
// expectedPods counts every pod the budget selects: a budget over all zones
// gives each zone the number of pods the whole group may miss, which the
// rollout spends one zone at a time.
func MaxUnavailableFromBudgets(covering []*policyv1.PodDisruptionBudget) (int32, string) {
	switch len(covering) {
	case 0:
		return 0, "spec: no PodDisruptionBudget selects the pods"
	case 1:
	default:
		names := make([]string, 0, len(covering))
		for _, pdb := range covering[:min(len(covering), 3)] {
			names = append(names, pdb.Name)
		}
		if len(covering) > 3 {
			names = append(names, fmt.Sprintf("%d more", len(covering)-3))
		}
		return 0, fmt.Sprintf("spec: %d PodDisruptionBudgets select the pods (%s)", len(covering), strings.Join(names, ", "))
	}
	pdb := covering[0]
	spec, expected := pdb.Spec, pdb.Status.ExpectedPods
	var n int32
	var how string
	switch {
	case spec.MaxUnavailable != nil && spec.MaxUnavailable.Type == intstr.Int:
		n, how = spec.MaxUnavailable.IntVal, fmt.Sprintf("maxUnavailable %d", spec.MaxUnavailable.IntVal)
	case spec.MaxUnavailable != nil:
		pct, ok := percent(spec.MaxUnavailable)
		if !ok {
			return 0, fmt.Sprintf("spec: PodDisruptionBudget %s has an invalid maxUnavailable %q", pdb.Name, spec.MaxUnavailable.StrVal)
		}
		if expected <= 0 {
			return 0, notReported(pdb)
		}
		n, how = int32(int64(expected)*int64(pct)/100), fmt.Sprintf("maxUnavailable %s of %d expected pods", spec.MaxUnavailable.StrVal, expected)
	case spec.MinAvailable != nil:
		if expected <= 0 {
			return 0, notReported(pdb)
		}
		minAvailable := spec.MinAvailable.IntVal
		if spec.MinAvailable.Type == intstr.String {
			pct, ok := percent(spec.MinAvailable)
			if !ok {
				return 0, fmt.Sprintf("spec: PodDisruptionBudget %s has an invalid minAvailable %q", pdb.Name, spec.MinAvailable.StrVal)
			}
			minAvailable = int32(math.Ceil(float64(expected) * float64(pct) / 100))
		}
		n, how = expected-minAvailable, fmt.Sprintf("%d expected pods - minAvailable %s", expected, spec.MinAvailable.String())
	default:
		return 0, fmt.Sprintf("spec: PodDisruptionBudget %s sets neither maxUnavailable nor minAvailable", pdb.Name)
	}
	if n <= 0 {
		return 0, fmt.Sprintf("spec: PodDisruptionBudget %s lets no pod be unavailable (%s), which would stop every rollout", pdb.Name, how)
	}
	return n, fmt.Sprintf("PodDisruptionBudget %s (%s)", pdb.Name, how)
}

func notReported(pdb *policyv1.PodDisruptionBudget) string {
	return fmt.Sprintf("spec: PodDisruptionBudget %s reports no status.expectedPods yet", pdb.Name)
}

// percent is the value of "P%", 0 to 100.
func percent(v *intstr.IntOrString) (int, bool) {
	var pct int
	if _, err := fmt.Sscanf(v.StrVal, "%d%%", &pct); err != nil || pct < 0 || pct > 100 || v.StrVal != fmt.Sprintf("%d%%", pct) {
		return 0, false
	}
	return pct, true
}
