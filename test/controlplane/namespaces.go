/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"context"
	"fmt"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestNamespaceLabel marks the namespaces created by this package.
const TestNamespaceLabel = "echelon.dev/test-namespace"

// TB is the part of testing.TB that this package uses; Ginkgo's GinkgoT()
// satisfies it too.
type TB interface {
	Helper()
	Name() string
	Cleanup(func())
	Failed() bool
	Logf(format string, args ...any)
	Fatalf(format string, args ...any)
	Skipf(format string, args ...any)
}

var notDNSLabelChars = regexp.MustCompile(`[^a-z0-9-]+`)

// CreateNamespace creates a namespace named after prefix with a random suffix
// chosen by the API server, so it is unique even across runs and parallel tests.
func (cp *ControlPlane) CreateNamespace(ctx context.Context, prefix string) (string, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: namespacePrefix(prefix),
		Labels:       map[string]string{TestNamespaceLabel: "true"},
	}}
	if err := cp.client.Create(ctx, ns); err != nil {
		return "", fmt.Errorf("create namespace %s*: %w", ns.GenerateName, err)
	}
	return ns.Name, nil
}

// NewNamespace creates a fresh namespace named after the test and deletes it when
// the test ends. The namespace controller then deletes what the test left in it,
// so later tests do not pay for it.
func (cp *ControlPlane) NewNamespace(t TB) string {
	t.Helper()
	ctx := context.Background()
	name, err := cp.CreateNamespace(ctx, t.Name())
	if err != nil {
		t.Fatalf("%v", err)
	}
	t.Cleanup(func() {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := cp.client.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
			t.Logf("delete namespace %s: %v", name, err)
		}
	})
	return name
}

// namespacePrefix turns a test name such as "TestRollout/three_zones" into a
// generateName prefix such as "testrollout-three-zones-".
func namespacePrefix(name string) string {
	p := notDNSLabelChars.ReplaceAllString(strings.ToLower(name), "-")
	// Leave room for the five-character suffix within the 63 of a DNS label, and
	// keep names short enough to read in logs.
	if len(p) > 40 {
		p = p[:40]
	}
	p = strings.Trim(p, "-")
	if p == "" {
		p = "test"
	}
	return p + "-"
}
