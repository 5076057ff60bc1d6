/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package grafanacompat

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/structured-merge-diff/v6/value"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// AppliedAnnotation holds the digest of what compat mode last applied.
const AppliedAnnotation = v1alpha1.GrafanaCompatAppliedAnnotation

// stampDigest sets on obj, a translated object about to be applied, the
// digest of its content (without the digest).
func stampDigest(obj *unstructured.Unstructured) error {
	annotations := obj.GetAnnotations()
	delete(annotations, AppliedAnnotation)
	obj.SetAnnotations(annotations)
	// json.Marshal writes map keys sorted: the same content, the same bytes.
	content, err := json.Marshal(obj.Object)
	if err != nil {
		return fmt.Errorf("digest %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	sum := sha256.Sum256(content)
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AppliedAnnotation] = hex.EncodeToString(sum[:])
	obj.SetAnnotations(annotations)
	return nil
}

// applied says whether applying desired (stamped by stampDigest) would
// change nothing of stored, the object of that kind and name in the cache,
// so that the apply, a write, can be skipped: a namespace is reconciled on
// every change of its workloads, a Deployment's rollout included, and most
// change no translation.
//
// An apply changes nothing when stored holds every field desired sets with
// the same value (the digest among them) and compat mode owns no field
// desired leaves out, which an apply would remove. The second follows from
// the first: the digest stored is that of the last content applied, and a
// content whose digest is the same is the same, so it sets the same fields
// as then. The cache keeps no managedFields, so ownership cannot be read
// from it; the digest stands for it. Fields the API server defaulted, and
// those others set, are in stored and not in desired: an apply leaves them
// too. A stale cache can only make a skipped apply wrong for the time until
// the event that updates it, which reconciles the namespace again.
func applied(desired *unstructured.Unstructured, stored client.Object) bool {
	if stored == nil {
		return false
	}
	content, err := runtime.DefaultUnstructuredConverter.ToUnstructured(stored)
	if err != nil {
		return false
	}
	for key, want := range desired.Object {
		if key == "apiVersion" || key == "kind" {
			continue
		}
		if !holds(content[key], want) {
			return false
		}
	}
	return true
}

// holds says whether have contains want: equal scalars, every key of want's
// maps, lists of the same length whose items each hold want's.
func holds(have, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		for key, v := range w {
			if !holds(h[key], v) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		if len(h) != len(w) {
			return false
		}
		for i := range w {
			if !holds(h[i], w[i]) {
				return false
			}
		}
		return true
	case nil:
		return have == nil
	}
	if have == nil {
		return false
	}
	// value.Equals compares numbers by value, whatever their Go type.
	return value.Equals(value.NewValueInterface(have), value.NewValueInterface(want))
}
