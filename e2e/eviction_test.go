package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

var _ = Describe("RolloutGroup with podDeletion Evict", func() {
	It("waits while a PodDisruptionBudget refuses evictions, reports Stalled past the deadline, and goes on when allowed", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 5, func(s *v1alpha1.RolloutGroupSpec) {
			s.PodDeletion = v1alpha1.PodDeletionEvict
			s.ProgressDeadline = &metav1.Duration{Duration: 3 * time.Second}
		})
		pdb := &policyv1.PodDisruptionBudget{
			ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: "zone-a"},
			Spec: policyv1.PodDisruptionBudgetSpec{
				MaxUnavailable: ptrIntOrString(intstr.FromInt32(0)),
				Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ingester-zone-a"}},
			},
		}
		Expect(k8s.Create(ctx, pdb)).To(Succeed())
		Eventually(func(gm Gomega) {
			gm.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pdb), pdb)).To(Succeed())
			gm.Expect(pdb.Status.ObservedGeneration).To(Equal(pdb.Generation))
			gm.Expect(pdb.Status.ExpectedPods).To(Equal(int32(5)))
		}).Should(Succeed())
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		Eventually(func(gm Gomega) {
			rg := g.get(ctx)
			gm.Expect(rg.Status.Message).To(ContainSubstring("refused"))
		}).Should(Succeed())
		Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(HaveKey("EvictionRefused"))
		rg := g.waitPhase(ctx, v1alpha1.PhaseStalled, 30*time.Second)
		Expect(rg.Status.Message).To(ContainSubstring("no progress for"))
		Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(HaveKey("ProgressDeadlineExceeded"))
		// The refused eviction is retried every 5s; by now, past the 3s deadline,
		// at least one retry has been refused too. Nothing was removed.
		Eventually(func() int { return g.eventReasons(ctx)["EvictionRefused"] }).Should(BeNumerically(">=", 2))
		Expect(mon.Deletions()).To(BeEmpty(), "no pod is removed while the budget refuses")

		Expect(k8s.Patch(ctx, pdb, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"maxUnavailable":1}}`)))).To(Succeed())
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(15))
	})
})
