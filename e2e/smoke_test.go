package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

var _ = Describe("the harness and the binary", func() {
	It("runs OnDelete StatefulSets through the real controllers and an operator that leads, is ready and serves metrics", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		zones := []string{"zone-a", "zone-b", "zone-c"}
		for _, z := range zones {
			Expect(k8s.Create(ctx, zoneStatefulSet(ns, "smoke-"+z, 3, "v1").Obj())).To(Succeed())
		}
		for _, z := range zones {
			Eventually(func(g Gomega) {
				sts := &appsv1.StatefulSet{}
				g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "smoke-" + z}, sts)).To(Succeed())
				g.Expect(sts.Status.ReadyReplicas).To(Equal(int32(3)))
			}).WithContext(ctx).Should(Succeed())
		}

		op := startOperator(ctx, "smoke", ns, "--leader-elect=true")
		Eventually(op.IsLeader).WithTimeout(30 * time.Second).Should(BeTrue())
		code, _, err := op.Get("/ready")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(200))
		code, _, err = op.Get("/healthz")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(200))
		code, body, err := op.Get("/metrics")
		Expect(err).NotTo(HaveOccurred())
		Expect(code).To(Equal(200))
		Expect(body).To(ContainSubstring("controller_runtime_reconcile_total"))
		Expect(body).To(ContainSubstring(`controller="rolloutgroup"`))

		Expect(op.Stop(15*time.Second)).To(Succeed(), "SIGTERM must stop the operator cleanly")
	})
})
