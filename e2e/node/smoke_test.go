/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package node

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/nodetier"
)

var _ = Describe("The node", func() {
	It("is Ready", func(ctx SpecContext) {
		var n corev1.Node
		Expect(k8s.Get(ctx, client.ObjectKey{Name: nodetier.NodeName}, &n)).To(Succeed())
	})
})
