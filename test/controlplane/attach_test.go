/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane_test

import (
	"context"
	"encoding/json"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/controlplane"
)

// What Ginkgo's parallel processes do with the e2e suite's control plane: one
// shares it as JSON, the others attach, use it, and stopping theirs leaves it
// running.
func TestAttachedControlPlaneWorksAndItsStopStopsNothing(t *testing.T) {
	cp := controlPlane(t)
	g := NewWithT(t)
	data, err := json.Marshal(cp.Share())
	g.Expect(err).NotTo(HaveOccurred())
	var h controlplane.Handle
	g.Expect(json.Unmarshal(data, &h)).To(Succeed())

	attached, err := controlplane.Attach(h, nil)
	g.Expect(err).NotTo(HaveOccurred())
	ctx := context.Background()
	ns, err := attached.CreateNamespace(ctx, "attached")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cp.Client().Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})).To(Succeed(),
		"the attached one works on the same API server")
	g.Expect(attached.Nodes()).To(Equal(cp.Nodes()))
	g.Expect(attached.Assets()).To(Equal(cp.Assets()))
	g.Expect(attached.LogTails(1)).To(ContainSubstring("kube-apiserver"))

	g.Expect(attached.Stop()).To(Succeed())
	g.Expect(cp.Client().Get(ctx, client.ObjectKey{Name: ns}, &corev1.Namespace{})).To(Succeed(),
		"the owner's control plane still runs")
	g.Expect(cp.Dir()).To(BeADirectory(), "and keeps its run directory")
}
