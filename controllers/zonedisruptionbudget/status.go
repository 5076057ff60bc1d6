package zonedisruptionbudget

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// observation is what a pass read of a ZoneDisruptionBudget's pods.
type observation struct {
	// invalid says why the spec cannot be used, "" when it can.
	invalid string
	// zones are the StatefulSets that own selected pods, sorted.
	zones []string
	// overlaps maps a zone some RolloutGroup claims to that group's name: its
	// pods are judged by the group's budget instead.
	overlaps map[string]string
}

// computeStatus derives the budget's status. The hold (status.disruption) is
// the eviction webhook's to write, through an optimistic lock: it is carried
// over untouched. It has no client.
func computeStatus(zdb *v1alpha1.ZoneDisruptionBudget, obs observation) v1alpha1.ZoneDisruptionBudgetStatus {
	st := v1alpha1.ZoneDisruptionBudgetStatus{
		ObservedGeneration: zdb.Generation,
		Disruption:         zdb.Status.Disruption,
		Conditions:         append([]metav1.Condition(nil), zdb.Status.Conditions...),
	}
	cond := metav1.Condition{Type: v1alpha1.ZoneBudgetConditionReady, ObservedGeneration: zdb.Generation}
	switch {
	case obs.invalid != "":
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, v1alpha1.ZoneBudgetReasonInvalidSpec, obs.invalid
	case len(obs.overlaps) > 0:
		var claimed []string
		for zone, group := range obs.overlaps {
			claimed = append(claimed, fmt.Sprintf("%s (RolloutGroup %s)", zone, group))
		}
		slices.Sort(claimed)
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ZoneBudgetReasonOverlapsGroup
		cond.Message = fmt.Sprintf("the pods of %s are judged by their RolloutGroup's spec.disruptionBudget, not by this budget; %s",
			strings.Join(claimed, ", "), zonesMessage(obs.zones, obs.overlaps))
	default:
		cond.Status, cond.Reason = metav1.ConditionTrue, v1alpha1.ZoneBudgetReasonJudging
		cond.Message = zonesMessage(obs.zones, nil)
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	return st
}

// zonesMessage names the zones the budget judges.
func zonesMessage(zones []string, except map[string]string) string {
	var judged []string
	for _, z := range zones {
		if _, ok := except[z]; !ok {
			judged = append(judged, z)
		}
	}
	if len(judged) == 0 {
		return "it judges no zone: no selected pod is owned by a StatefulSet outside a RolloutGroup"
	}
	return fmt.Sprintf("judging evictions in %d zones: %s", len(judged), strings.Join(judged, ", "))
}
