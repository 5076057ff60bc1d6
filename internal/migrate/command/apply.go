/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package command

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// fieldManager owns the fields migrate applies (server-side apply).
const fieldManager = "echelon-migrate"

// apply server-side applies objs: first all of them as a dry run, printing
// what would change, and only when every dry run passes, for real. A
// conflict with another field manager fails the dry run: migrate never
// takes a field over.
func apply(ctx context.Context, c client.Client, objs []*unstructured.Unstructured, out io.Writer) error {
	var errs []error
	for _, obj := range objs {
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(obj.GroupVersionKind())
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), live)
		switch {
		case apierrors.IsNotFound(err):
			live = nil
		case err != nil:
			errs = append(errs, fmt.Errorf("get %s: %w", describe(obj), err))
			continue
		}
		dry := obj.DeepCopy()
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(dry), client.FieldOwner(fieldManager), client.DryRunAll); err != nil {
			errs = append(errs, fmt.Errorf("dry run of %s: %w", describe(obj), err))
			continue
		}
		fmt.Fprint(out, diffObject(obj, live, dry))
	}
	if len(errs) > 0 {
		return fmt.Errorf("nothing applied: %w", errors.Join(errs...))
	}
	for _, obj := range objs {
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj.DeepCopy()), client.FieldOwner(fieldManager)); err != nil {
			return fmt.Errorf("apply %s (those before it are applied): %w", describe(obj), err)
		}
		fmt.Fprintf(out, "applied %s\n", describe(obj))
	}
	return nil
}

func describe(obj *unstructured.Unstructured) string {
	return obj.GetKind() + " " + obj.GetNamespace() + "/" + obj.GetName()
}

// diffObject says what applying would change: the labels, annotations and
// spec of the live object against the dry run's result.
func diffObject(obj, live, dry *unstructured.Unstructured) string {
	after := comparable(dry)
	if live == nil {
		return fmt.Sprintf("create %s\n%s", describe(obj), prefixLines("+ ", after))
	}
	before := comparable(live)
	if before == after {
		return fmt.Sprintf("unchanged %s\n", describe(obj))
	}
	return fmt.Sprintf("update %s\n%s", describe(obj), lineDiff(before, after))
}

// comparable is the part of an object a migration sets, as YAML.
func comparable(u *unstructured.Unstructured) string {
	m := map[string]any{"spec": u.Object["spec"]}
	if l := u.GetLabels(); len(l) > 0 {
		m["labels"] = l
	}
	if a := u.GetAnnotations(); len(a) > 0 {
		delete(a, "kubectl.kubernetes.io/last-applied-configuration")
		m["annotations"] = a
	}
	b, _ := yaml.Marshal(m) // decoded JSON always marshals
	return string(b)
}

func prefixLines(prefix, s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString(prefix + line)
	}
	return b.String()
}

// lineDiff is a minimal line diff (longest common subsequence), enough for
// the few lines of a resource.
func lineDiff(before, after string) string {
	a, b := slices.Collect(strings.Lines(before)), slices.Collect(strings.Lines(after))
	lcs := make([][]int, len(a)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	var out strings.Builder
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			out.WriteString("  " + a[i])
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || lcs[i+1][j] >= lcs[i][j+1]):
			out.WriteString("- " + a[i])
			i++
		default:
			out.WriteString("+ " + b[j])
			j++
		}
	}
	return out.String()
}
