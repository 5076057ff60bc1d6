/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package migrate

import (
	"strconv"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// rolloutGroups writes a RolloutGroup per namespace and rollout-group value.
// Members are listed in name order, the order the Grafana operator rolls
// them in (after any member with not-Ready pods, which Echelon finishes first
// too), so that the rollout-group label can go.
func (t *translation) rolloutGroups() {
	type key struct{ namespace, group string }
	var keys []key
	members := map[key][]*workload{}
	for _, w := range t.order { // sorted by namespace, then name
		if w.sts == nil {
			continue
		}
		group, ok := w.labels[labelRolloutGroup]
		if !ok {
			if _, has := w.annotations[annotationMaxUnavailable]; has {
				w.consume(annotationMaxUnavailable)
				t.warn(w.ref(), annotationMaxUnavailable, "dropped: without a %s label the Grafana operator does not roll this StatefulSet either", labelRolloutGroup)
			}
			continue
		}
		k := key{w.namespace, group}
		if _, seen := members[k]; !seen {
			keys = append(keys, k)
		}
		members[k] = append(members[k], w)
	}
	for _, k := range keys {
		t.rolloutGroup(k.namespace, k.group, members[k])
	}
}

func (t *translation) rolloutGroup(namespace, group string, members []*workload) {
	if !isDNSName(group) {
		for _, w := range members {
			t.fail(w.ref(), labelRolloutGroup, "%q cannot name a RolloutGroup (a lowercase DNS name): no group written; rename the group", group)
		}
		return
	}
	rg := v1alpha1.RolloutGroup{TypeMeta: typeMeta("RolloutGroup"), ObjectMeta: objectMeta(namespace, group)}
	rg.Spec.Paused = t.opts.PausedGroups
	values := map[int32]int{}
	for _, w := range members {
		member := v1alpha1.RolloutMember{Name: w.name}
		if n, ok := t.maxUnavailable(w); ok {
			member.MaxUnavailable = new(intstr.FromInt32(n))
			values[n]++
		}
		rg.Spec.StatefulSets = append(rg.Spec.StatefulSets, member)
		w.consume(labelRolloutGroup)
		if s := w.sts.Spec.UpdateStrategy.Type; s != appsv1.OnDeleteStatefulSetStrategyType {
			strategy := string(s)
			if strategy == "" {
				strategy = string(appsv1.RollingUpdateStatefulSetStrategyType) + " (the default)"
			}
			rg.Spec.Paused = true
			t.warn(w.ref(), "spec.updateStrategy", "%s, not OnDelete: the Grafana operator skips the whole group, Echelon would roll this member by its partition; the RolloutGroup is written paused: unpause it once that is what you want", strategy)
		}
	}
	// One value on every member: say it once, for the group.
	if len(values) == 1 {
		for n, count := range values {
			if count == len(members) {
				rg.Spec.MaxUnavailable = new(intstr.FromInt32(n))
				for i := range rg.Spec.StatefulSets {
					rg.Spec.StatefulSets[i].MaxUnavailable = nil
				}
			}
		}
	}
	t.result.RolloutGroups = append(t.result.RolloutGroups, rg)
}

// maxUnavailable reads rollout-max-unavailable. The Grafana operator uses 1
// for a value it cannot use, and so does the RolloutGroup (its default), so
// an unusable value is dropped with a warning rather than kept.
func (t *translation) maxUnavailable(w *workload) (int32, bool) {
	v, ok := w.annotations[annotationMaxUnavailable]
	if !ok {
		return 0, false
	}
	w.consume(annotationMaxUnavailable)
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
	switch {
	case err != nil && strings.HasSuffix(strings.TrimSpace(v), "%"):
		t.warn(w.ref(), annotationMaxUnavailable, "%q: the Grafana operator reads an integer only, so it rolled one pod at a time; so will Echelon (the default, 1). To roll a percentage, set spec.maxUnavailable after checking it", v)
		return 0, false
	case err != nil:
		t.warn(w.ref(), annotationMaxUnavailable, "%q is not an integer: the Grafana operator used 1; so will Echelon (the default)", v)
		return 0, false
	case n <= 0:
		t.warn(w.ref(), annotationMaxUnavailable, "%d is below 1: the Grafana operator used 1; so will Echelon (the default)", n)
		return 0, false
	}
	return int32(n), true
}
