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
	"github.com/echelon-operator/echelon/e2e/framework"
)

// slowBatches paces the rollout (each replaced pod must be Ready for a second)
// so that there is time to kill operators in the middle of it.
func slowBatches(s *v1alpha1.RolloutGroupSpec) {
	s.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2))
	s.MinReadySeconds = 1
}

var _ = Describe("RolloutGroup rollouts when operators fail", func() {
	It("completes with no breach when the operator is SIGKILLed mid-rollout and started again", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 10, slowBatches)
		first := startOperator(ctx, "first", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		Eventually(func() int { return len(mon.Deletions()) }).Should(BeNumerically(">=", 6))
		first.Kill()
		Eventually(first.Exited()).Should(BeClosed())
		startOperator(ctx, "second", g.ns, fastLeaderElection...)

		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(30), "a restarted operator replaces each pod once")
	})

	It("completes with no breach with two instances under leader election, the leader killed mid-rollout", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 10, slowBatches)
		ops := []*framework.Operator{
			startOperator(ctx, "one", g.ns, fastLeaderElection...),
			startOperator(ctx, "two", g.ns, fastLeaderElection...),
		}
		Eventually(func() bool { return ops[0].IsLeader() != ops[1].IsLeader() }).Should(BeTrue(), "exactly one instance leads")
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		Eventually(func() int { return len(mon.Deletions()) }).Should(BeNumerically(">=", 6))
		leader, standby := ops[0], ops[1]
		if !leader.IsLeader() {
			leader, standby = standby, leader
		}
		leader.Kill()
		Eventually(standby.IsLeader).WithTimeout(30*time.Second).Should(BeTrue(), "the standby takes over")

		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(30))
	})
})

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
		Consistently(func() int { return len(mon.Deletions()) }).WithTimeout(3*time.Second).Should(BeZero(),
			"no pod is removed while the budget refuses")
		Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(HaveKey("EvictionRefused"))
		rg := g.waitPhase(ctx, v1alpha1.PhaseStalled, 30*time.Second)
		Expect(rg.Status.Message).To(ContainSubstring("no progress for"))
		Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(HaveKey("ProgressDeadlineExceeded"))

		Expect(k8s.Patch(ctx, pdb, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"maxUnavailable":1}}`)))).To(Succeed())
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(15))
	})
})
