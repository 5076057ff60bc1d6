package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// A RollingUpdate zone is released under one reservation of the whole zone
// (docs/safety.md, "What waits for what"): between two slots every pod of
// the zone may be available again, and the zone must still count as spent.
var _ = Describe("A partition rollout's reservation", func() {
	It("keeps evictions of other zones waiting between the slots of a zone, and withdraws what it has not released when the rollout pauses", func(ctx SpecContext) {
		g := newZones(ctx, 4)
		nodes := newSpecNodes(ctx, g.ns, g.zones, 2)
		g.createStatefulSets(ctx, func(sts *appsv1.StatefulSet) { rollingUpdate(sts); nodes.pin(sts) })
		g.waitPodsOn(ctx, "v1")
		nodes.openSpares(ctx)
		// One pod at a time, each available 3 s after it is Ready: the
		// zone takes seconds, with moments where all its pods are
		// available between two slots.
		g.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) { s.MinReadySeconds = 3; evictionBudget(1)(s) })
		startWebhookOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)
		mon.JudgeEveryMoment()

		g.setVersion(ctx, "v2", zoneA)
		Eventually(func() int { return rollsOf(mon, zoneA) }).Should(BeNumerically(">=", 1))
		var reservation v1alpha1.DisruptionIntent
		Eventually(func(gm Gomega) {
			rg := g.get(ctx)
			gm.Expect(rg.Status.Disruption).NotTo(BeNil())
			gm.Expect(rg.Status.Disruption.Intents).To(ContainElement(HaveField("MaxAtOnce", BeEquivalentTo(1)), &reservation))
		}).Should(Succeed(), "zone-a's first release records a reservation")
		Expect(reservation.Zone).To(Equal(zoneA))
		Expect(len(reservation.Pods)).To(BeNumerically(">=", 3), "the reservation names the rest of the zone: %+v", reservation)
		AddReportEntry("reservation", reservation)

		// While zone-a rolls, whatever its pods show at the moment, an
		// eviction of another zone is refused, naming zone-a.
		for range 5 {
			err := evict(ctx, g.ns, zoneB+"-0", true)
			Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "an eviction of zone-b while zone-a rolls: %v", err)
			Expect(err.Error()).To(ContainSubstring(zoneA))
			time.Sleep(500 * time.Millisecond)
		}

		// Paused, the rollout releases nothing more: the pods it had not
		// released are withdrawn at once, and zone-b may go the moment
		// zone-a is whole, not when the reservation would expire (45 s
		// after its decision).
		g.updateSpec(ctx, func(s *v1alpha1.RolloutGroupSpec) { s.Paused = true })
		paused := time.Now()
		Eventually(func() error { return evict(ctx, g.ns, zoneB+"-0", true) }).WithTimeout(25*time.Second).WithPolling(200*time.Millisecond).
			Should(Succeed(), "a dry-run eviction of zone-b once zone-a is whole after the pause")
		AddReportEntry("pause to zone-b evictable", time.Since(paused).String())
		Expect(rollsOf(mon, zoneA)).To(BeNumerically("<", 4), "the pause came before zone-a was done")

		g.updateSpec(ctx, func(s *v1alpha1.RolloutGroupSpec) { s.Paused = false })
		g.waitComplete(ctx, 2*time.Minute)
		g.only(zoneA).waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(rollsOf(mon, zoneA)).To(Equal(4))
	})
})
