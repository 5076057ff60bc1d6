/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package migrate translates the Grafana rollout-operator's labels,
// annotations and ZoneAwarePodDisruptionBudgets into Echelon's typed
// resources: a RolloutGroup per rollout-group, a ScalingPolicy per scaled or
// guarded workload, a DelayedDownscale per delayed target, and the zone
// budgets. It also writes, per workload, the merge patch that removes the
// keys it translated, and a finding for everything it could not translate.
//
// The package is pure: objects in, objects out. Reading files or a cluster
// and applying the result is the command's job.
package migrate

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// MigratedFromLabel marks every object migrate writes, so that they can be
// listed (and removed, to switch back) with one selector.
const MigratedFromLabel = "echelon.dev/migrated-from"

// migratedFrom is MigratedFromLabel's value.
const migratedFrom = "grafana-rollout-operator"

// Options change what a migration writes.
type Options struct {
	// PausedGroups writes every RolloutGroup with spec.paused: true, for a
	// handover where the groups are created before the Grafana operator stops.
	PausedGroups bool
}

// Severity says what a finding means for the user.
type Severity string

const (
	// SeverityError: the key was not translated and stays on the object.
	SeverityError Severity = "error"
	// SeverityWarning: translated, but Echelon behaves differently, or the
	// result needs a look before it is applied.
	SeverityWarning Severity = "warning"
)

// Finding is one thing a user must know about the migration of an object.
type Finding struct {
	Severity Severity
	// Object is "<Kind> <namespace>/<name>".
	Object string
	// Key is the label, annotation or field concerned, if any.
	Key     string
	Message string
}

// Result is what a migration writes.
type Result struct {
	RolloutGroups         []v1alpha1.RolloutGroup
	ScalingPolicies       []v1alpha1.ScalingPolicy
	DelayedDownscales     []v1alpha1.DelayedDownscale
	ZoneDisruptionBudgets []v1alpha1.ZoneDisruptionBudget
	// Patches remove the translated keys, one per workload that has any.
	Patches []Patch
	// Replaced names the ZoneAwarePodDisruptionBudgets translated
	// ("<namespace>/<name>"), to delete once Echelon judges evictions.
	Replaced []string
	Findings []Finding
}

// HasErrors says whether something was left untranslated.
func (r *Result) HasErrors() bool {
	return slices.ContainsFunc(r.Findings, func(f Finding) bool { return f.Severity == SeverityError })
}

// Translate migrates in. The result is ordered (by namespace, then name) so
// that the same input always gives the same output.
func Translate(in Input, opts Options) Result {
	t := &translation{opts: opts, workloads: map[string]*workload{}}
	for i := range in.StatefulSets {
		sts := &in.StatefulSets[i]
		t.add(newWorkload(v1alpha1.TargetKindStatefulSet, &sts.ObjectMeta)).sts = sts
	}
	for i := range in.Deployments {
		t.add(newWorkload(v1alpha1.TargetKindDeployment, &in.Deployments[i].ObjectMeta))
	}
	for i := range in.ReplicaSets {
		t.add(newWorkload(v1alpha1.TargetKindReplicaSet, &in.ReplicaSets[i].ObjectMeta))
	}

	t.rolloutGroups()
	for _, w := range t.order {
		t.scalingPolicy(w)
		if w.sts != nil {
			t.delayedDownscale(w)
		}
	}
	pdbs := slices.Clone(in.ZoneAwarePDBs)
	slices.SortFunc(pdbs, func(a, b ZoneAwarePDB) int {
		return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	for _, pdb := range pdbs {
		t.zoneBudget(pdb)
	}
	for _, w := range t.order {
		t.leftovers(w)
		if p := w.patch(); p != nil {
			t.result.Patches = append(t.result.Patches, *p)
		}
	}
	for _, name := range slices.Sorted(slices.Values(in.WebhookConfigurations)) {
		t.warn(strings.Replace(name, "/", " ", 1), labelInjectCA, "a webhook configuration of the Grafana operator: delete it when that operator stops (see the handover guide), or it refuses what it guards while nothing answers it")
	}
	slices.SortStableFunc(t.result.Findings, func(a, b Finding) int {
		return cmp.Or(cmp.Compare(a.Object, b.Object), cmp.Compare(a.Key, b.Key))
	})
	return t.result
}

type translation struct {
	opts      Options
	result    Result
	workloads map[string]*workload // by kind/namespace/name
	order     []*workload          // sorted by namespace, name, kind
	policies  map[string]bool      // namespace/name of the ScalingPolicies written
}

// add adds a workload, unless one of the same kind and name was added
// before: then the later one is reported and translated nowhere.
func (t *translation) add(w *workload) *workload {
	key := w.kind + "/" + w.namespace + "/" + w.name
	if _, dup := t.workloads[key]; dup {
		t.fail(w.ref(), "", "appears more than once in the input: the first one is translated, the others ignored")
		return &workload{}
	}
	t.workloads[key] = w
	i, _ := slices.BinarySearchFunc(t.order, w, compareWorkloads)
	t.order = slices.Insert(t.order, i, w)
	return w
}

func compareWorkloads(a, b *workload) int {
	return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name), cmp.Compare(kindRank[a.kind], kindRank[b.kind]))
}

// kindRank orders workloads of the same name: a StatefulSet's policy gets
// the plain name.
var kindRank = map[string]int{v1alpha1.TargetKindStatefulSet: 0, v1alpha1.TargetKindDeployment: 1, v1alpha1.TargetKindReplicaSet: 2}

func (t *translation) statefulSet(namespace, name string) *workload {
	return t.workloads[v1alpha1.TargetKindStatefulSet+"/"+namespace+"/"+name]
}

func (t *translation) fail(object, key, format string, args ...any) {
	t.result.Findings = append(t.result.Findings, Finding{Severity: SeverityError, Object: object, Key: key, Message: fmt.Sprintf(format, args...)})
}

func (t *translation) warn(object, key, format string, args ...any) {
	t.result.Findings = append(t.result.Findings, Finding{Severity: SeverityWarning, Object: object, Key: key, Message: fmt.Sprintf(format, args...)})
}

// objectMeta is the metadata of an object migrate writes.
func objectMeta(namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{MigratedFromLabel: migratedFrom}}
}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: v1alpha1.GroupVersion.String(), Kind: kind}
}

// leftovers reports the Grafana-looking keys of w that migrate does not know,
// and drops last-downscale, which is the Grafana operator's own record.
func (t *translation) leftovers(w *workload) {
	for _, key := range w.keys() {
		switch {
		case key == annotationLastDownscale:
			w.consume(key)
			if _, ok := w.get(labelPrepareDownscale); ok {
				t.warn(w.ref(), key, "not carried over: the ScalingPolicy's status.lastDownscaleTime starts empty, so the group's next downscale does not wait for the zone delay after %s", w.annotations[key])
			}
		case !knownWorkloadKeys[key] && isGrafanaKey(key):
			t.fail(w.ref(), key, "unknown to migrate: left in place, and Echelon does not read it")
		}
	}
}

// isDNSName says whether name can name an Echelon object.
func isDNSName(name string) bool {
	return len(validation.IsDNS1123Subdomain(name)) == 0
}

// parseBool reads a Grafana boolean. The Grafana operator compares with
// "true", so "True" or "1" were false there: anything but "true" and "false"
// is reported rather than guessed.
func parseBool(v string) (bool, error) {
	switch v {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("%q is neither \"true\" nor \"false\"", v)
}
