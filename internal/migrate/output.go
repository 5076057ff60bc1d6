/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package migrate

import (
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"
)

// Objects lists the resources to create, in the order they should be
// created: budgets and policies before the groups that take over rollouts.
func (r *Result) Objects() ([]*unstructured.Unstructured, error) {
	var objs []any
	for i := range r.ZoneDisruptionBudgets {
		objs = append(objs, &r.ZoneDisruptionBudgets[i])
	}
	for i := range r.ScalingPolicies {
		objs = append(objs, &r.ScalingPolicies[i])
	}
	for i := range r.DelayedDownscales {
		objs = append(objs, &r.DelayedDownscales[i])
	}
	for i := range r.RolloutGroups {
		objs = append(objs, &r.RolloutGroups[i])
	}
	out := make([]*unstructured.Unstructured, 0, len(objs))
	for _, o := range objs {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
		if err != nil {
			return nil, err
		}
		// A new object has no status, and a zero creationTimestamp is noise.
		delete(m, "status")
		unstructured.RemoveNestedField(m, "metadata", "creationTimestamp")
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, nil
}

// WriteResources writes the resources as one YAML stream.
func (r *Result) WriteResources(w io.Writer) error {
	objs, err := r.Objects()
	if err != nil {
		return err
	}
	for _, o := range objs {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
			return err
		}
	}
	return nil
}

// WritePatches writes a shell script of kubectl commands: one merge patch
// per workload, which removes the keys migrate translated, then the
// deletion of the ZoneAwarePodDisruptionBudgets it replaced.
func (r *Result) WritePatches(w io.Writer) error {
	var b strings.Builder
	b.WriteString("#!/bin/sh\n# Written by echelon migrate. Run it once Echelon has taken over (see the\n# handover guide): it removes the Grafana rollout-operator's keys that were\n# translated. Keys that were not translated stay.\nset -e\n")
	for _, p := range r.Patches {
		fmt.Fprintf(&b, "kubectl -n %s patch %s %s --type merge -p '%s'\n", shellWord(p.Namespace), strings.ToLower(p.Kind), shellWord(p.Name), p.MergePatch())
	}
	for _, ref := range r.Replaced {
		ns, name, _ := strings.Cut(ref, "/")
		fmt.Fprintf(&b, "kubectl -n %s delete zoneawarepoddisruptionbudgets.%s %s\n", shellWord(ns), ZoneAwarePDBGroup, shellWord(name))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// WriteReport writes the findings, one per line, errors first.
func (r *Result) WriteReport(w io.Writer) error {
	var b strings.Builder
	fmt.Fprintf(&b, "# %d RolloutGroups, %d ScalingPolicies, %d DelayedDownscales, %d ZoneDisruptionBudgets, %d patches\n",
		len(r.RolloutGroups), len(r.ScalingPolicies), len(r.DelayedDownscales), len(r.ZoneDisruptionBudgets), len(r.Patches))
	for _, sev := range []Severity{SeverityError, SeverityWarning} {
		for _, f := range r.Findings {
			if f.Severity != sev {
				continue
			}
			key := ""
			if f.Key != "" {
				key = " " + f.Key
			}
			fmt.Fprintf(&b, "%s: %s%s: %s\n", f.Severity, f.Object, key, f.Message)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// shellWord quotes s for sh if it needs it. Names and namespaces are DNS
// names, which never do; this guards against a hand-written input.
func shellWord(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyz0123456789-.") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
