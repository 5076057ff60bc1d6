package e2e

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
)

// slowBatches paces the rollout (each replaced pod must be Ready for a second)
// so that there is time to stop operators in the middle of it.
func slowBatches(s *v1alpha1.RolloutGroupSpec) {
	s.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2))
	s.MinReadySeconds = 1
}

// leaderOf waits until exactly one of the running operators leads and returns it.
func leaderOf(ops []*framework.Operator) *framework.Operator {
	GinkgoHelper()
	var leader *framework.Operator
	Eventually(func() int {
		leader = nil
		leaders := 0
		for _, op := range ops {
			select {
			case <-op.Exited():
				continue
			default:
			}
			if op.IsLeader() {
				leader = op
				leaders++
			}
		}
		return leaders
	}).WithTimeout(30*time.Second).Should(Equal(1), "exactly one running instance leads")
	return leader
}

// leaderElectedPair starts two leader-elected instances for a group of three
// zones of ten pods paced by slowBatches, and returns them, the one that
// leads, and a monitor armed on the complete group.
func leaderElectedPair(ctx SpecContext) (*zoneGroup, []*framework.Operator, *framework.Operator, *framework.Monitor) {
	GinkgoHelper()
	g := newZoneGroup(ctx, 10, slowBatches)
	ops := []*framework.Operator{
		startOperator(ctx, "one", g.ns, fastLeaderElection...),
		startOperator(ctx, "two", g.ns, fastLeaderElection...),
	}
	leader := leaderOf(ops)
	g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
	return g, ops, leader, g.monitor(ctx)
}

var _ = Describe("RolloutGroup rollouts when operators stop or fail", func() {
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

		rg := g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(30), "a restarted operator replaces each pod once")
		// Each batch's ordinals are on record before its pods go: the new
		// process takes none of its predecessor's pods for leaked ones.
		Expect(rg.Status.LeakedPods).To(BeZero(), "PodLeaked Events:\n%s", strings.Join(g.eventNotes(ctx, "PodLeaked"), "\n"))
		for _, rec := range rg.Status.LeakRecords {
			Expect(rec.Removed).To(Equal("0-9"), "StatefulSet %s: every ordinal removed by Echelon, on record", rec.Member)
		}
		Expect(rg.Status.LeakRecords).To(HaveLen(3))
	})

	It("completes with no breach with two instances under leader election, the leader killed mid-rollout", func(ctx SpecContext) {
		g, ops, leader, mon := leaderElectedPair(ctx)

		g.setVersion(ctx, "v2")
		Eventually(func() int { return len(mon.Deletions()) }).Should(BeNumerically(">=", 6))
		leader.Kill()
		Expect(leaderOf(ops)).NotTo(BeIdenticalTo(leader), "the standby takes over")

		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(30))
	})

	It("completes with no breach through two SIGTERM handovers between two leader-elected instances, replacing each pod once", func(ctx SpecContext) {
		g, ops, leader, mon := leaderElectedPair(ctx)

		g.setVersion(ctx, "v2")
		rolls := func() int { return len(mon.Rolls()) }
		for _, fresh := range []string{"three", "four"} {
			// Each leader rolls two batches of its own before it is stopped.
			Eventually(rolls).Should(BeNumerically(">=", rolls()+4))
			Expect(rolls()).To(BeNumerically("<", 30), "the handover happens mid-rollout")
			Expect(leader.Stop(15*time.Second)).To(Succeed(), "SIGTERM stops the leader cleanly")
			// A fresh instance keeps two running, as a Deployment would.
			ops = append(ops, startOperator(ctx, fresh, g.ns, fastLeaderElection...))
			next := leaderOf(ops)
			Expect(next).NotTo(BeIdenticalTo(leader))
			leader = next
		}

		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(30), "each outdated pod is replaced once")
		Expect(mon.Deletions()).To(HaveLen(30), "no updated pod is deleted")
	})
})
