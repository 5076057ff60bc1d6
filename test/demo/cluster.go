/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// installCRDs installs the CRDs in dir and waits until the API server serves them.
func installCRDs(cp *controlplane.ControlPlane, dir string) error {
	_, err := envtest.InstallCRDs(cp.Config(), envtest.CRDInstallOptions{
		Paths:              []string{dir},
		ErrorIfPathMissing: true,
		Scheme:             operator.NewScheme(),
	})
	if err != nil {
		return fmt.Errorf("install CRDs from %s: %w", dir, err)
	}
	return nil
}

// newClient returns an administrator's client. It is made after the CRDs are
// installed, so that its REST mapper knows the operator's kinds.
func newClient(cp *controlplane.ControlPlane) (client.Client, error) {
	c, err := client.New(cp.Config(), client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	return c, nil
}

// applyManifest server-side applies every object of a multi-document YAML, in
// order, as `kubectl apply --server-side` would.
func applyManifest(ctx context.Context, c client.Client, manifest []byte) error {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifest), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := decoder.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("decode manifest: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
}

// replaceImage returns the manifest with every occurrence of one image replaced
// by another: the template change that starts a rollout.
func replaceImage(manifest []byte, from, to string) []byte {
	return bytes.ReplaceAll(manifest, []byte("image: "+from), []byte("image: "+to))
}
