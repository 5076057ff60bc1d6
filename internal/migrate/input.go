/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package migrate

import (
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// ZoneAwarePDBGroup is the API group of the Grafana rollout-operator's
// ZoneAwarePodDisruptionBudget.
const ZoneAwarePDBGroup = "rollout-operator.grafana.com"

// ZoneAwarePDB is the part of a Grafana ZoneAwarePodDisruptionBudget that
// migrate reads. Its spec is kept as decoded so that a field of the wrong
// type is reported, not a decode failure of the whole stream.
type ZoneAwarePDB struct {
	Namespace string
	Name      string
	Spec      map[string]any
}

// Input is what a migration reads: the workloads that may carry the Grafana
// operator's labels and annotations, and its budgets.
type Input struct {
	StatefulSets  []appsv1.StatefulSet
	Deployments   []appsv1.Deployment
	ReplicaSets   []appsv1.ReplicaSet
	ZoneAwarePDBs []ZoneAwarePDB
	// WebhookConfigurations names the webhook configurations labelled for the
	// Grafana operator's CA injection ("Validating/name"), which a handover
	// deletes.
	WebhookConfigurations []string
}

// Decode reads a stream of YAML or JSON documents, as `helm template`,
// jsonnet or `kubectl get -o yaml` write them (a List's items are read one by
// one), and adds the objects migrate reads to in. Every other kind is
// skipped. defaultNamespace is given to namespaced objects without one.
func (in *Input) Decode(r io.Reader, defaultNamespace string) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(r, 4096)
	for doc := 1; ; doc++ {
		var obj map[string]any
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("document %d: %w", doc, err)
		}
		if obj == nil {
			continue
		}
		if err := in.add(&unstructured.Unstructured{Object: obj}, defaultNamespace); err != nil {
			return fmt.Errorf("document %d: %w", doc, err)
		}
	}
}

// Add adds one object read from a cluster or a file.
func (in *Input) add(u *unstructured.Unstructured, defaultNamespace string) error {
	if u.IsList() {
		return u.EachListItem(func(item runtime.Object) error {
			return in.add(item.(*unstructured.Unstructured), defaultNamespace)
		})
	}
	gvk := u.GroupVersionKind()
	if u.GetNamespace() == "" && gvk.Kind != "ValidatingWebhookConfiguration" && gvk.Kind != "MutatingWebhookConfiguration" {
		u.SetNamespace(defaultNamespace)
	}
	switch {
	case gvk.Group == "apps" && gvk.Kind == "StatefulSet":
		var sts appsv1.StatefulSet
		if err := fromUnstructured(u, &sts); err != nil {
			return err
		}
		in.StatefulSets = append(in.StatefulSets, sts)
	case gvk.Group == "apps" && gvk.Kind == "Deployment":
		var d appsv1.Deployment
		if err := fromUnstructured(u, &d); err != nil {
			return err
		}
		in.Deployments = append(in.Deployments, d)
	case gvk.Group == "apps" && gvk.Kind == "ReplicaSet":
		if len(u.GetOwnerReferences()) > 0 {
			return nil // a Deployment's: its labels come from the pod template, the Deployment is read instead
		}
		var rs appsv1.ReplicaSet
		if err := fromUnstructured(u, &rs); err != nil {
			return err
		}
		in.ReplicaSets = append(in.ReplicaSets, rs)
	case gvk.Group == ZoneAwarePDBGroup && gvk.Kind == ZoneAwarePDBKind:
		spec, _, _ := unstructured.NestedMap(u.Object, "spec")
		in.ZoneAwarePDBs = append(in.ZoneAwarePDBs, ZoneAwarePDB{Namespace: u.GetNamespace(), Name: u.GetName(), Spec: spec})
	case gvk.Group == "admissionregistration.k8s.io" && (gvk.Kind == "ValidatingWebhookConfiguration" || gvk.Kind == "MutatingWebhookConfiguration"):
		if u.GetLabels()[labelInjectCA] == "true" {
			in.WebhookConfigurations = append(in.WebhookConfigurations, gvk.Kind+"/"+u.GetName())
		}
	}
	return nil
}

// AddObject adds one object read from a cluster.
func (in *Input) AddObject(u *unstructured.Unstructured) error {
	return in.add(u, "")
}

func fromUnstructured(u *unstructured.Unstructured, into any) error {
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into); err != nil {
		return fmt.Errorf("%s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}
