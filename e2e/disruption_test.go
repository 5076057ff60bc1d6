package e2e

import (
	"fmt"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
)

// drainTimeout bounds every kubectl drain of these specs: long enough for a
// zone to wait out another's hold (15s) and drain its own pods 5s apart.
const drainTimeout = 2 * time.Minute

// evictionRefusedReason is the reason of the Warning Event recorded on a
// group whose budget refused an eviction.
const evictionRefusedReason = "EvictionRefused"

// mimirPartitionRegex is how Mimir's partition ingesters' names give their
// partition: ingester-zone-a-7 and ingester-zone-b-7 hold partition 7.
const mimirPartitionRegex = `^ingester-zone-[a-z]-([0-9]+)$`

var _ = Describe("One disruption budget", func() {
	Context("kubectl drain", func() {
		It("drains two nodes of two zones started at once zone after zone: the second waits until the first zone is whole again, then proceeds", func(ctx SpecContext) {
			// Each zone's two pods share its first node, and the budget lets
			// a zone lose both: a drain takes its zone down in one go, and the
			// other waits for all of it.
			b := newBudgetGroup(ctx, 2, evictionBudget(2))
			for _, z := range []string{zoneA, zoneB} {
				b.mon.SetMaxUnavailable(z, intstr.FromInt32(2))
			}

			drains := startDrains(ctx, drainTimeout, b.nodes.first(zoneA), b.nodes.first(zoneB))
			for _, d := range drains {
				AddReportEntry("kubectl drain "+d.node+" took", d.wait(ctx, drainTimeout+10*time.Second).String())
			}
			// The monitor judged every moment: the second zone lost no pod
			// until the first had every pod Ready again.
			expectNoBreaches(b.mon)

			order := b.mon.MemberOrder()
			Expect(order).To(ConsistOf(zoneA, zoneB), "every pod of one zone is evicted before any of the other: %v", b.mon.Rolls())
			first, second := drains[0], drains[1]
			if order[0] == zoneB {
				first, second = second, first
			}
			AddReportEntry("kubectl drain "+second.node+" (the zone that waited)", second.output())
			Expect(second.refusals()).NotTo(BeEmpty(),
				"the second drain was refused (429, retried by kubectl) while %s was disrupted:\n%s", order[0], second.output())
			Expect(second.refusals()[0]).To(ContainSubstring(order[0]), "the refusal names the disrupted zone")
			Expect(second.refusals()[0]).To(ContainSubstring("RolloutGroup "+b.name), "the refusal names the budget")
			Expect(first.refusals()).NotTo(ContainElement(ContainSubstring("zone "+order[1])),
				"the first zone's drain never waited for the second zone:\n%s", first.output())
			Expect(b.eventNotes(ctx, evictionRefusedReason)).To(ContainElement(ContainSubstring(order[0])),
				"a Warning Event on the group says why an eviction was refused")
			Expect(second.Finished()).To(BeTemporally(">", first.Finished()), "the second drain finished after the first")
			for _, z := range order {
				Expect(b.nodes.podsOn(ctx, b.nodes.first(z))).To(BeEmpty(), "the drained node of %s is empty", z)
			}
			Expect(b.mon.Rolls()).To(HaveLen(4), "each pod of the two zones was evicted once")
			b.waitPodsOn(ctx, "v1")
		})

		It("waits with a drain while the group rolls another zone, then drains", func(ctx SpecContext) {
			// Paced so that rolling zone-a's three pods one at a time takes
			// seconds; the drain may take zone-b's three at once.
			b := newBudgetGroup(ctx, 3, func(s *v1alpha1.RolloutGroupSpec) {
				s.MinReadySeconds = 2
				evictionBudget(3)(s)
			})
			b.mon.SetMaxUnavailable(zoneB, intstr.FromInt32(3))

			b.setVersion(ctx, "v2", zoneA)
			Eventually(func() int { return rollsOf(b.mon, zoneA) }).Should(BeNumerically(">=", 1))
			d := startDrain(ctx, b.nodes.first(zoneB), drainTimeout)
			took := d.wait(ctx, drainTimeout+10*time.Second)
			AddReportEntry("kubectl drain while zone-a rolls took", took.String())
			AddReportEntry("kubectl drain "+d.node, d.output())

			expectNoBreaches(b.mon)
			Expect(b.mon.MemberOrder()).To(Equal([]string{zoneA, zoneB}), "zone-b's pods were evicted only after zone-a was rolled: %v", b.mon.Rolls())
			Expect(rollsOf(b.mon, zoneA)).To(Equal(3))
			Expect(rollsOf(b.mon, zoneB)).To(Equal(3))
			Expect(d.refusals()).NotTo(BeEmpty(), "the drain was refused while zone-a rolled:\n%s", d.output())
			Expect(d.refusals()[0]).To(ContainSubstring(zoneA), "the refusal names the zone being rolled")
			b.waitComplete(ctx, time.Minute)
			b.only(zoneA).waitPodsOn(ctx, "v2")
			b.only(zoneB, zoneC).waitPodsOn(ctx, "v1")
		})

		It("holds a rollout of another zone while a drain holds a zone, then rolls", func(ctx SpecContext) {
			// The drain takes zone-a's three pods at once; the rollout of
			// zone-b goes one pod at a time.
			b := newBudgetGroup(ctx, 3, evictionBudget(3))
			b.mon.SetMaxUnavailable(zoneA, intstr.FromInt32(3))

			d := startDrain(ctx, b.nodes.first(zoneA), drainTimeout)
			Eventually(func() int { return rollsOf(b.mon, zoneA) }).Should(BeNumerically(">=", 1), "the drain evicts zone-a's pods")
			b.setVersion(ctx, "v2", zoneB)
			// The rollout waits while zone-a has pods taken, and goes the
			// moment zone-a is whole again, whether or not kubectl drain
			// has exited yet: the monitor, judging every moment, fails the
			// spec if zone-b lost a pod while zone-a was short.
			Eventually(func(gm Gomega) {
				if rollsOf(b.mon, zoneB) > 0 {
					return // zone-a was whole again: the monitor judged it
				}
				rg := b.get(ctx)
				gm.Expect(conditionReasons(rg)).To(ContainElement(v1alpha1.ReasonWaitingForDisruption))
				gm.Expect(rg.Status.Message).To(ContainSubstring(zoneA))
			}).WithTimeout(30*time.Second).Should(Succeed(), "the group waits for the disruption of zone-a, or zone-a is whole again")
			AddReportEntry("the group waiting", b.get(ctx).Status.Message)
			d.wait(ctx, drainTimeout+10*time.Second)

			b.waitComplete(ctx, time.Minute)
			b.only(zoneB).waitPodsOn(ctx, "v2")
			b.only(zoneA, zoneC).waitPodsOn(ctx, "v1")
			// Zones may take turns (an evicted pod of zone-a back and Ready
			// before the drain's next eviction lets zone-b's rollout go,
			// and the drain then waits for zone-b): no clock holds a zone
			// between two evictions. What holds is the monitor's: never two
			// zones short at once.
			expectNoBreaches(b.mon)
			Expect(rollsOf(b.mon, zoneA)).To(Equal(3))
			Expect(rollsOf(b.mon, zoneB)).To(Equal(3))
		})
	})

	Context("partition-aware zones, Mimir-style", func() {
		It("admits an eviction in another partition while a pod of zone-a is not Ready, and refuses one in the same partition", func(ctx SpecContext) {
			g := newZoneGroup(ctx, 3, func(s *v1alpha1.RolloutGroupSpec) {
				// Two per zone, so that once partition 0 is whole again zone-b
				// has room for pod 0 beside pod 1, whose eviction counts
				// against the zone until it is seen replaced.
				s.DisruptionBudget = &v1alpha1.ZoneBudget{PodNamePartitionRegex: mimirPartitionRegex, MaxUnavailable: ptrIntOrString(intstr.FromInt32(2))}
			})
			startWebhookOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
			mon := g.monitor(ctx)
			mon.SetMaxUnavailable(zoneB, intstr.FromInt32(2))
			mon.SetPartitions(regexp.MustCompile(mimirPartitionRegex), 1)
			mon.JudgeEveryMoment()

			// As a failing readiness probe would: partition 0 is down in zone-a.
			g.setPodReady(ctx, zoneA+"-0", false)
			Eventually(func() bool { return mon.Available(zoneA) }).Should(BeFalse())

			By("a dry run of evicting pod 1 of zone-b is admitted and changes nothing")
			Expect(evict(ctx, g.ns, zoneB+"-1", true)).To(Succeed())
			Consistently(func(gm Gomega) {
				gm.Expect(mon.Deletions()).To(BeEmpty())
				gm.Expect(g.get(ctx).Status.Disruption).To(BeNil(), "a dry run records no intent")
			}).WithTimeout(2 * time.Second).Should(Succeed())

			By("evicting pod 1 of zone-b, partition 1, is admitted")
			Expect(evict(ctx, g.ns, zoneB+"-1", false)).To(Succeed())
			Eventually(func(gm Gomega) {
				hold := g.get(ctx).Status.Disruption
				gm.Expect(hold).NotTo(BeNil())
				gm.Expect(hold.Intents).To(ContainElement(And(
					HaveField("Zone", Equal(zoneB)),
					HaveField("Reason", Equal(v1alpha1.DisruptionEviction)),
					HaveField("Pods", ContainElement(HaveField("Name", Equal(zoneB+"-1")))))))
			}).WithTimeout(10*time.Second).Should(Succeed(), "the admitted eviction of pod 1 of zone-b is recorded")
			Eventually(func() bool { return mon.Available(zoneB) }).Should(BeTrue(), "pod 1 of zone-b is back")

			By("evicting pod 0 of zone-b, partition 0, is refused with 429")
			for _, dryRun := range []bool{true, false} {
				err := evict(ctx, g.ns, zoneB+"-0", dryRun)
				Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "dry run %v: want 429, got %v", dryRun, err)
				Expect(err.Error()).To(And(ContainSubstring("RolloutGroup "+g.name), ContainSubstring("partition 0"), ContainSubstring(zoneA)),
					"the refusal names the budget, the partition and the zone where it is down")
				AddReportEntry(fmt.Sprintf("refused eviction (dry run %v)", dryRun), err.Error())
			}
			Consistently(func() []string { return deletedPods(mon) }).WithTimeout(2 * time.Second).Should(Equal([]string{zoneB + "-1"}))
			Eventually(func() []string { return g.eventNotes(ctx, evictionRefusedReason) }).WithTimeout(10*time.Second).
				Should(ContainElement(ContainSubstring("partition 0")), "a Warning Event on the group says why the eviction was refused")

			By("once pod 0 of zone-a is Ready again, pod 0 of zone-b may go")
			g.setPodReady(ctx, zoneA+"-0", true)
			Eventually(func() error { return evict(ctx, g.ns, zoneB+"-0", false) }).WithTimeout(10 * time.Second).Should(Succeed())
			g.waitPodsOn(ctx, "v1")
			Expect(deletedPods(mon)).To(Equal([]string{zoneB + "-1", zoneB + "-0"}))
			expectNoBreaches(mon)
		})
	})

	Context("maxUnavailable from a PodDisruptionBudget", func() {
		It("rolls each member as many at a time as its PodDisruptionBudget allows, and follows a change of it during the rollout", func(ctx SpecContext) {
			g := newZones(ctx, 4)
			g.zones = g.zones[:2]
			g.createStatefulSets(ctx, nil)
			g.waitPodsOn(ctx, "v1")
			var pdbs []*policyv1.PodDisruptionBudget
			for _, z := range g.zones {
				pdb := &policyv1.PodDisruptionBudget{
					ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: z + "-pdb"},
					Spec: policyv1.PodDisruptionBudgetSpec{
						MaxUnavailable: ptrIntOrString(intstr.FromInt32(1)),
						Selector:       &metav1.LabelSelector{MatchLabels: map[string]string{"app": z}},
					},
				}
				Expect(k8s.Create(ctx, pdb)).To(Succeed())
				pdbs = append(pdbs, pdb)
			}
			// The spec's own value, which the budgets override, would roll
			// every pod of a member at once.
			g.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) {
				s.MaxUnavailableFrom = v1alpha1.MaxUnavailableFromPodDisruptionBudget
				s.MaxUnavailable = ptrIntOrString(intstr.FromInt32(4))
				s.MinReadySeconds = 2
			})
			startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
			Eventually(func(gm Gomega) {
				rg := g.get(ctx)
				gm.Expect(rg.Status.StatefulSets).To(HaveLen(2))
				for _, m := range rg.Status.StatefulSets {
					gm.Expect(m.MaxUnavailableFrom).To(ContainSubstring(m.Name+"-pdb"), "member %s names its budget", m.Name)
				}
			}).WithTimeout(30 * time.Second).Should(Succeed())
			mon := g.monitor(ctx)
			for _, z := range g.zones {
				mon.SetMaxUnavailable(z, intstr.FromInt32(1))
			}
			mon.JudgeEveryMoment()

			g.setVersion(ctx, "v2")
			waitForBatchDone(mon, zoneA, 1)
			Expect(mon.PeakNotReady()[zoneA]).To(Equal(1), "the first batch of zone-a is the budget's one pod")
			// The monitor first, so that it never judges a batch of two
			// against the old limit.
			for i, z := range g.zones {
				mon.SetMaxUnavailable(z, intstr.FromInt32(2))
				Expect(k8s.Patch(ctx, pdbs[i], client.RawPatch(types.MergePatchType, []byte(`{"spec":{"maxUnavailable":2}}`)))).To(Succeed())
			}
			g.waitComplete(ctx, 2*time.Minute)
			g.waitPodsOn(ctx, "v2")
			expectNoBreaches(mon)
			Expect(mon.Rolls()).To(HaveLen(8))
			// zone-a may finish its pods one at a time before the operator
			// sees the change (kwok replaces a pod in well under a second);
			// zone-b starts after it, under the new budget.
			Expect(mon.PeakNotReady()[zoneA]).To(BeNumerically("<=", 2), "zone-a within its budgets: %v", batchesOf(mon))
			Expect(mon.PeakNotReady()[zoneB]).To(Equal(2), "after the change zone-b rolled two pods at a time: %v", batchesOf(mon))
			AddReportEntry("batches", batchesOf(mon))
		})
	})
})

// deletedPods names the pods the monitor saw deleted or evicted, in order.
func deletedPods(mon *framework.Monitor) []string {
	var out []string
	for _, d := range mon.Deletions() {
		out = append(out, d.Pod)
	}
	return out
}

// batchesOf groups the rolls into batches: rolls of one member less than a
// second apart, for reports.
func batchesOf(mon *framework.Monitor) string {
	var batches []string
	var last framework.Deletion
	for i, d := range mon.Rolls() {
		if i > 0 && d.Member == last.Member && d.At.Sub(last.At) < time.Second {
			batches[len(batches)-1] += "," + d.Pod
		} else {
			batches = append(batches, d.Pod)
		}
		last = d
	}
	return "[" + strings.Join(batches, "] [") + "]"
}
