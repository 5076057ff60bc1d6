/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package node holds the node tier's specs: the operator installed by the
// Helm chart runs as the chart deploys it, in its image, on a real kubelet
// (test/nodetier), and rolls out StatefulSets of real containers.
package node

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/test/nodetier"
)

var (
	node *nodetier.Node
	k8s  client.Client
	cs   kubernetes.Interface
)

func TestMain(m *testing.M) { os.Exit(nodetier.Main(m)) }

func TestNodeTier(t *testing.T) {
	RegisterFailHandler(Fail)
	SetDefaultEventuallyTimeout(2 * time.Minute)
	SetDefaultEventuallyPollingInterval(200 * time.Millisecond)
	// An Eventually given the spec's context still gives up after the
	// default timeout (Gomega otherwise waits for the context alone).
	EnforceDefaultTimeoutsWhenUsingContexts()
	RunSpecs(t, "Node tier")
}

var _ = BeforeSuite(func(ctx SpecContext) {
	start := time.Now()
	var err error
	node, err = nodetier.Start(ctx, nodetier.Options{Scheme: operator.NewScheme()})
	if err != nil {
		Fail(err.Error()) // the whole message: logs and network state
	}
	GinkgoWriter.Printf("node tier: control plane and node Ready in %s\n", time.Since(start).Round(time.Millisecond))
	AddReportEntry("node start", time.Since(start).Round(time.Millisecond).String())
	k8s = node.ControlPlane().Client()
	cs, err = kubernetes.NewForConfig(node.ControlPlane().Config())
	Expect(err).NotTo(HaveOccurred())
}, NodeTimeout(5*time.Minute))

var _ = AfterSuite(func() {
	if node != nil {
		Expect(node.Stop()).To(Succeed())
	}
})

var _ = ReportAfterEach(func(r SpecReport) {
	if r.Failed() && node != nil {
		GinkgoWriter.Println(node.ControlPlane().LogTails(40))
		printPods()
	}
})

// printPods prints every pod's state and the operator's logs, for failures.
func printPods() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, _ := kubectl(ctx, "get", "pods", "-A", "-o", "wide")
	GinkgoWriter.Printf("==> kubectl get pods -A <==\n%s", out)
	// What the operator decided and when: the groups' Events (its logs are
	// mostly the webhooks' at info level).
	out, _ = kubectl(ctx, "get", "events", "-A", "--field-selector", "involvedObject.kind=RolloutGroup", "--sort-by", ".lastTimestamp",
		"-o", "custom-columns=TIME:.lastTimestamp,EVENTTIME:.eventTime,NAMESPACE:.metadata.namespace,REASON:.reason,MESSAGE:.message")
	GinkgoWriter.Printf("==> the RolloutGroups' Events <==\n%s", out)
	for _, previous := range []string{"--previous=false", "--previous=true"} {
		out, _ = kubectl(ctx, "-n", releaseNamespace, "logs", "-l", operatorSelector, "--tail=30", "--prefix", previous)
		GinkgoWriter.Printf("==> operator logs %s <==\n%s", previous, out)
	}
}
