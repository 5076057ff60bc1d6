package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// RollingUpdate members: Echelon never deletes their pods, it lowers their
// partition and the StatefulSet controller replaces the pods it releases.
var _ = Describe("RolloutGroup RollingUpdate members", func() {
	It("rolls each RollingUpdate member by its partition one pod at a time, a Prometheus check after each pod (the sts-phased-rollout flow)", func(ctx SpecContext) {
		g := newZones(ctx, 3)
		p := startPrometheus(ctx, g.zones)
		g.createStatefulSets(ctx, rollingUpdate)
		g.waitPodsOn(ctx, "v1")
		afterEachPod := func(c *v1alpha1.AnalysisCheck) { c.Gate, c.SuccessThreshold = v1alpha1.GateAfterBatch, 2 }
		g.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) { s.Analysis = p.analysis(0, errorRateCheck(afterEachPod)) })
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		for _, z := range g.zones {
			Eventually(func() *int32 { return partitionOf(ctx, g.ns, z) }).Should(HaveValue(BeEquivalentTo(3)), "%s held at its replicas", z)
		}
		mon := g.monitor(ctx)
		p.waitScraped(ctx, 0, g.zones...)

		g.setVersion(ctx, "v2")
		rg := g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.MemberOrder()).To(Equal(g.zones))
		for zone, peak := range mon.PeakNotReady() {
			Expect(peak).To(Equal(1), "one pod at a time in %s", zone)
		}
		Expect(rg.Status.PodsRolled).To(Equal(int32(9)))
		// One release per pod, each after the check passed on the pod before;
		// the PodsRolled Events name each pod once (releases close together
		// are told in one Event).
		Expect(podsNamedIn(g.eventNotes(ctx, "PodsRolled"))).To(HaveLen(9))
		Expect(g.eventReasons(ctx)).To(HaveKeyWithValue("GatePassed", BeNumerically(">=", 8)))
		for _, z := range g.zones {
			Expect(partitionOf(ctx, g.ns, z)).To(HaveValue(BeEquivalentTo(3)), "%s held at its replicas again", z)
		}
	})

	It("rolls the moved pods of RollingUpdate members back, most recent member first, by their partitions, when a zone gate fails (onFailure Rollback)", func(ctx SpecContext) {
		const soak = 6 * time.Second
		g := newZones(ctx, 3)
		p := startPrometheus(ctx, g.zones)
		g.createStatefulSets(ctx, rollingUpdate)
		g.waitPodsOn(ctx, "v1")
		g.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) {
			s.Analysis, s.OnFailure = p.analysis(soak, errorRateCheck(nil)), v1alpha1.FailureRollback
		})
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)
		p.waitScraped(ctx, 0, g.zones...)

		g.setVersion(ctx, "v2")
		g.waitSoaking(ctx, "ingester-zone-b")
		p.flip(ctx, "ingester-zone-b", badErrors)
		rg := g.waitPhase(ctx, v1alpha1.PhaseFailed, 2*time.Minute)
		Expect(rg.Status.Analysis.Rollback).NotTo(BeNil())
		g.waitPodsOn(ctx, "v1")
		expectNoBreaches(mon)
		Expect(mon.DeletionsWhere(versionAnnotation, "v2")).To(HaveLen(6), "each of the 6 moved pods is rolled back once")
		Expect(membersInOrder(mon.DeletionsWhere(versionAnnotation, "v2"))).To(Equal([]string{"ingester-zone-b", "ingester-zone-a"}))
		Expect(rollsOf(mon, "ingester-zone-c")).To(BeZero())
		for _, z := range g.zones {
			Eventually(func() *int32 { return partitionOf(ctx, g.ns, z) }).Should(HaveValue(BeEquivalentTo(3)), "%s held at its replicas", z)
		}
	})

	It("hands every partition back (set to 0) when the group is deleted mid-rollout, so no StatefulSet is left frozen", func(ctx SpecContext) {
		g := newZones(ctx, 4)
		g.createStatefulSets(ctx, rollingUpdate)
		g.waitPodsOn(ctx, "v1")
		g.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) { s.Paused = false })
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		g.monitor(ctx)

		g.setVersion(ctx, "v2")
		Eventually(func() *int32 { return partitionOf(ctx, g.ns, "ingester-zone-a") }).Should(HaveValue(BeNumerically("<", 4)),
			"zone-a's partition lowered")
		g.updateSpec(ctx, func(s *v1alpha1.RolloutGroupSpec) { s.Paused = true })
		Eventually(func() []string { return g.eventNotes(ctx, "Paused") }).ShouldNot(BeEmpty())
		Expect(k8s.Delete(ctx, g.get(ctx))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: g.name}, &v1alpha1.RolloutGroup{}))
		}).WithTimeout(30*time.Second).Should(BeTrue(), "the finalizer goes once the partitions are handed back")
		for _, z := range g.zones {
			sts := &appsv1.StatefulSet{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: z}, sts)).To(Succeed())
			Expect(partitionOf(ctx, g.ns, z)).To(Or(BeNil(), HaveValue(BeZero())), "%s handed back", z)
			Expect(sts.Labels).NotTo(HaveKey("echelon.dev/partition-holder"))
		}
		// The StatefulSet controller rolls them on its own now.
		g.waitPodsOn(ctx, "v2")
	})

	It("resumes a partition rollout where it was after the operator is SIGKILLed, replacing each pod once", func(ctx SpecContext) {
		g := newZones(ctx, 5)
		g.createStatefulSets(ctx, rollingUpdate)
		g.waitPodsOn(ctx, "v1")
		g.createGroup(ctx, nil)
		first := startOperator(ctx, "first", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		Eventually(func() int { return len(mon.Rolls()) }).WithTimeout(time.Minute).Should(BeNumerically(">=", 3))
		first.Kill()
		Eventually(first.Exited()).Should(BeClosed())
		startOperator(ctx, "second", g.ns, fastLeaderElection...)
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.MemberOrder()).To(Equal(g.zones))
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(15), "every pod replaced exactly once")
	})
})

// rollingUpdate makes a zone's StatefulSet roll itself (RollingUpdate), its
// partition left unset: Echelon takes it over.
func rollingUpdate(sts *appsv1.StatefulSet) {
	sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
}

// partitionOf is the StatefulSet's rollingUpdate.partition, nil when unset.
func partitionOf(ctx context.Context, ns, name string) *int32 {
	GinkgoHelper()
	sts := &appsv1.StatefulSet{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts)).To(Succeed())
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil {
		return ru.Partition
	}
	return nil
}
