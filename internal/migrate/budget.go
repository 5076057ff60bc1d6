/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package migrate

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// zoneAwarePDBSpec is the spec of a Grafana ZoneAwarePodDisruptionBudget.
type zoneAwarePDBSpec struct {
	MaxUnavailable           *int32                `json:"maxUnavailable"`
	MaxUnavailablePercentage *int32                `json:"maxUnavailablePercentage"`
	Selector                 *metav1.LabelSelector `json:"selector"`
	PodNamePartitionRegex    string                `json:"podNamePartitionRegex"`
	PodNameRegexGroup        *int32                `json:"podNameRegexGroup"`
}

// zoneBudget moves a ZoneAwarePodDisruptionBudget into the RolloutGroup
// whose members' pods it selects, so that the group's rollouts, downscales
// and evictions share one hold, or else into a ZoneDisruptionBudget.
func (t *translation) zoneBudget(pdb ZoneAwarePDB) {
	ref := "ZoneAwarePodDisruptionBudget " + pdb.Namespace + "/" + pdb.Name
	var spec zoneAwarePDBSpec
	if b, err := json.Marshal(pdb.Spec); err != nil || json.Unmarshal(b, &spec) != nil {
		t.fail(ref, "spec", "cannot be read: a field has the wrong type")
		return
	}
	budget, ok := t.budget(ref, spec)
	if !ok {
		return
	}
	if spec.Selector == nil || len(spec.Selector.MatchLabels)+len(spec.Selector.MatchExpressions) == 0 {
		t.fail(ref, "spec.selector", "empty or missing: it would select every pod of the namespace")
		return
	}
	selector, err := metav1.LabelSelectorAsSelector(spec.Selector)
	if err != nil {
		t.fail(ref, "spec.selector", "%v", err)
		return
	}
	zones, groups := t.selectedZones(pdb.Namespace, selector)
	if len(groups) == 1 && !groups[""] {
		group := slices.Collect(maps.Keys(groups))[0]
		if t.setGroupBudget(ref, pdb.Namespace, group, zones, budget) {
			t.result.Replaced = append(t.result.Replaced, pdb.Namespace+"/"+pdb.Name)
			return
		}
	}
	if len(groups) > 1 || (len(groups) == 1 && !groups[""]) {
		t.warn(ref, "spec.selector", "selects pods of RolloutGroup members (%s): a ZoneDisruptionBudget leaves those to their group, whose spec.disruptionBudget (else its rollout maxUnavailable) judges them", strings.Join(slices.Sorted(maps.Keys(groups)), ", "))
	}
	if len(zones) == 0 {
		t.warn(ref, "spec.selector", "selects no StatefulSet's pods in the input: check the selector against the pods")
	}
	zdb := v1alpha1.ZoneDisruptionBudget{TypeMeta: typeMeta("ZoneDisruptionBudget"), ObjectMeta: objectMeta(pdb.Namespace, pdb.Name)}
	zdb.Spec.Selector = *spec.Selector
	zdb.Spec.ZoneBudget = budget
	t.result.ZoneDisruptionBudgets = append(t.result.ZoneDisruptionBudgets, zdb)
	t.result.Replaced = append(t.result.Replaced, pdb.Namespace+"/"+pdb.Name)
}

// budget translates the limits and the partition regex.
func (t *translation) budget(ref string, spec zoneAwarePDBSpec) (v1alpha1.ZoneBudget, bool) {
	var b v1alpha1.ZoneBudget
	switch {
	case spec.MaxUnavailable != nil && spec.MaxUnavailablePercentage != nil:
		t.fail(ref, "spec.maxUnavailablePercentage", "set together with maxUnavailable: keep one")
		return b, false
	case spec.MaxUnavailablePercentage != nil:
		p := *spec.MaxUnavailablePercentage
		if p < 0 || p > 100 {
			t.fail(ref, "spec.maxUnavailablePercentage", "%d is not a percentage (0-100)", p)
			return b, false
		}
		b.MaxUnavailable = new(intstr.FromString(fmt.Sprintf("%d%%", p)))
		t.warn(ref, "spec.maxUnavailablePercentage", "the Grafana operator never rounds %d%% below 1 pod; Echelon rounds down, to 0 in a zone of fewer than %d pods, which admits no eviction of an available pod there", p, ceilDiv(100, max(p, 1)))
	case spec.MaxUnavailable != nil:
		n := *spec.MaxUnavailable
		if n < 0 {
			t.fail(ref, "spec.maxUnavailable", "%d is negative", n)
			return b, false
		}
		b.MaxUnavailable = new(intstr.FromInt32(n))
		if n == 0 {
			t.warn(ref, "spec.maxUnavailable", "0: Echelon refuses those evictions with 429 instead of 403, so kubectl drain keeps retrying instead of stopping")
		}
	default:
		b.MaxUnavailable = new(intstr.FromInt32(1)) // the Grafana default, written out: a group's default differs
	}
	if spec.PodNamePartitionRegex != "" {
		re := anchor(spec.PodNamePartitionRegex)
		compiled, err := regexp.Compile(re)
		if err != nil {
			t.fail(ref, "spec.podNamePartitionRegex", "%v", err)
			return b, false
		}
		group := int32(1)
		if spec.PodNameRegexGroup != nil {
			group = *spec.PodNameRegexGroup
		}
		if group < 0 || int(group) > compiled.NumSubexp() {
			t.fail(ref, "spec.podNameRegexGroup", "%d: the regex has %d groups", group, compiled.NumSubexp())
			return b, false
		}
		b.PodNamePartitionRegex = re
		if group != 1 {
			b.PodNamePartitionGroup = new(group)
		}
	} else if spec.PodNameRegexGroup != nil {
		t.warn(ref, "spec.podNameRegexGroup", "dropped: it applies only with podNamePartitionRegex")
	}
	return b, true
}

// anchor makes a regex match whole pod names, as the Grafana operator
// matches it; Echelon matches anywhere in the name. The groups keep their
// numbers.
func anchor(re string) string {
	if strings.HasPrefix(re, "^") && strings.HasSuffix(re, "$") {
		return re
	}
	if strings.Contains(re, "|") {
		return "^(?:" + re + ")$"
	}
	return "^" + strings.TrimPrefix(strings.TrimSuffix(re, "$"), "^") + "$"
}

func ceilDiv(a, b int32) int32 { return (a + b - 1) / b }

// selectedZones lists the StatefulSets whose pod template the selector
// matches, and the rollout-groups they belong to ("" for none).
func (t *translation) selectedZones(namespace string, selector labels.Selector) ([]*workload, map[string]bool) {
	var zones []*workload
	groups := map[string]bool{}
	for _, w := range t.order {
		if w.sts == nil || w.namespace != namespace || !selector.Matches(labels.Set(w.sts.Spec.Template.Labels)) {
			continue
		}
		zones = append(zones, w)
		groups[w.labels[labelRolloutGroup]] = true
	}
	return zones, groups
}

// setGroupBudget puts budget in the group's spec.disruptionBudget, unless a
// budget is there already or the group was not written.
func (t *translation) setGroupBudget(ref, namespace, group string, zones []*workload, budget v1alpha1.ZoneBudget) bool {
	for i := range t.result.RolloutGroups {
		rg := &t.result.RolloutGroups[i]
		if rg.Namespace != namespace || rg.Name != group {
			continue
		}
		if rg.Spec.DisruptionBudget != nil {
			t.warn(ref, "spec.selector", "a second budget for RolloutGroup %s, which has one already: written as a ZoneDisruptionBudget, which leaves the group's pods to the group", group)
			return false
		}
		rg.Spec.DisruptionBudget = &budget
		if len(zones) < len(rg.Spec.StatefulSets) {
			t.warn(ref, "spec.selector", "selects the pods of %d of the %d members of RolloutGroup %s: the group's disruptionBudget covers every member", len(zones), len(rg.Spec.StatefulSets), group)
		}
		return true
	}
	return false
}

// ZoneAwarePDBKind is the kind of the Grafana operator's zone-aware
// budgets, in ZoneAwarePDBGroup.
const ZoneAwarePDBKind = "ZoneAwarePodDisruptionBudget"

// ValidateZoneAwarePDB checks a ZoneAwarePodDisruptionBudget's fields
// alone, as the Grafana operator's zpdb-validation webhook does: the errors
// (Key names the field) are those that keep it from being translated.
func ValidateZoneAwarePDB(pdb ZoneAwarePDB) []Finding {
	t := &translation{workloads: map[string]*workload{}}
	t.zoneBudget(pdb)
	return slices.DeleteFunc(t.result.Findings, func(f Finding) bool { return f.Severity != SeverityError })
}
