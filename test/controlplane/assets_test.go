/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRequiredVersion(t *testing.T) {
	gomod := filepath.Join(t.TempDir(), "go.mod")
	if err := os.WriteFile(gomod, []byte(`module example.com/tools

go 1.26.0

require k8s.io/kubernetes v1.37.0

require (
	sigs.k8s.io/kwok v0.8.0
	example.com/other v1.2.3 // indirect
)

replace (
	k8s.io/api => k8s.io/api v0.37.0
)
`), 0o644); err != nil {
		t.Fatal(err)
	}
	for module, want := range map[string]string{
		"k8s.io/kubernetes": "v1.37.0",
		"sigs.k8s.io/kwok":  "v0.8.0",
		"example.com/other": "v1.2.3",
	} {
		got, err := requiredVersion(gomod, module)
		if err != nil || got != want {
			t.Errorf("requiredVersion(%s) = %q, %v; want %q", module, got, err, want)
		}
	}
	if _, err := requiredVersion(gomod, "k8s.io/api"); err == nil {
		t.Error("a replace directive was taken for a requirement")
	}
}

func TestFindAssetsNamesWhatIsMissing(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "etcd"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv(AssetsEnv, dir)
	_, err := FindAssets()
	if !errors.Is(err, ErrAssetsMissing) {
		t.Fatalf("FindAssets() = %v, want ErrAssetsMissing", err)
	}
	if !strings.Contains(err.Error(), "make test-assets") {
		t.Errorf("error does not say how to build the binaries: %v", err)
	}
	for _, b := range []string{"kube-apiserver", "kube-scheduler", "kwok", "helm"} {
		if !strings.Contains(err.Error(), filepath.Join(dir, b)) {
			t.Errorf("error does not name %s: %v", b, err)
		}
	}
	if strings.Contains(err.Error(), filepath.Join(dir, "etcd")) {
		t.Errorf("error names etcd, which is there: %v", err)
	}
}
