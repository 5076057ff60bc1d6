/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package migrate

import (
	"encoding/json"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// workload is a StatefulSet, Deployment or ReplicaSet with the keys migrate
// has translated so far.
type workload struct {
	kind, namespace, name string
	labels, annotations   map[string]string
	sts                   *appsv1.StatefulSet // nil for a Deployment or ReplicaSet
	consumed              map[string]bool
}

func newWorkload(kind string, meta *metav1.ObjectMeta) *workload {
	return &workload{
		kind: kind, namespace: meta.Namespace, name: meta.Name,
		labels: meta.Labels, annotations: meta.Annotations,
		consumed: map[string]bool{},
	}
}

// ref names the workload in findings.
func (w *workload) ref() string {
	return w.kind + " " + w.namespace + "/" + w.name
}

// get reads key from the annotations, then from the labels: the Grafana
// operator reads some keys as labels and the others as annotations, and
// users have put each in either place.
func (w *workload) get(key string) (string, bool) {
	if v, ok := w.annotations[key]; ok {
		return v, true
	}
	v, ok := w.labels[key]
	return v, ok
}

// consume marks key as translated: the patch removes it.
func (w *workload) consume(keys ...string) {
	for _, k := range keys {
		if _, ok := w.get(k); ok {
			w.consumed[k] = true
		}
	}
}

// keys lists every label and annotation key, sorted.
func (w *workload) keys() []string {
	all := slices.Collect(maps.Keys(w.annotations))
	all = append(all, slices.Collect(maps.Keys(w.labels))...)
	slices.Sort(all)
	return slices.Compact(all)
}

// Patch is a JSON merge patch that removes translated keys from a workload.
type Patch struct {
	Kind, Namespace, Name string
	Labels, Annotations   []string // keys to remove, sorted
}

// MergePatch is the patch's body, for kubectl patch --type merge.
func (p Patch) MergePatch() []byte {
	nulls := func(keys []string) map[string]any {
		m := map[string]any{}
		for _, k := range keys {
			m[k] = nil
		}
		return m
	}
	meta := map[string]any{}
	if len(p.Labels) > 0 {
		meta["labels"] = nulls(p.Labels)
	}
	if len(p.Annotations) > 0 {
		meta["annotations"] = nulls(p.Annotations)
	}
	b, _ := json.Marshal(map[string]any{"metadata": meta}) // maps of strings and nil always marshal
	return b
}

func (w *workload) patch() *Patch {
	p := Patch{Kind: w.kind, Namespace: w.namespace, Name: w.name}
	for _, k := range slices.Sorted(maps.Keys(w.consumed)) {
		if _, ok := w.labels[k]; ok {
			p.Labels = append(p.Labels, k)
		}
		if _, ok := w.annotations[k]; ok {
			p.Annotations = append(p.Annotations, k)
		}
	}
	if len(p.Labels)+len(p.Annotations) == 0 {
		return nil
	}
	return &p
}
