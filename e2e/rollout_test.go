package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

var _ = Describe("RolloutGroup rollouts", func() {
	DescribeTable("roll three zones of ten pods one zone at a time, within maxUnavailable",
		func(ctx SpecContext, maxUnavailable intstr.IntOrString, wantPeak int) {
			g := newZoneGroup(ctx, 10, func(s *v1alpha1.RolloutGroupSpec) { s.MaxUnavailable = &maxUnavailable })
			op := startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
			mon := g.monitor(ctx)

			g.setVersion(ctx, "v2")
			rg := g.waitComplete(ctx, 3*time.Minute)
			g.waitPodsOn(ctx, "v2")

			expectNoBreaches(mon)
			Expect(mon.MemberOrder()).To(Equal(g.zones), "zones are rolled one after the other, in list order")
			Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(30), "every pod is replaced exactly once")
			for zone, peak := range mon.PeakNotReady() {
				Expect(peak).To(Equal(wantPeak), "peak of not-Ready pods in %s: the budget is used, never exceeded", zone)
			}
			Expect(rg.Status.Updated).To(Equal("30/30"))
			Expect(rg.Status.PodsRolled).To(Equal(int32(30)), "the pods rolled, which the PodsRolled Events name:\n%s",
				strings.Join(g.eventNotes(ctx, "PodsRolled"), "\n"))
			Expect(rg.Status.RolloutStartTime).NotTo(BeNil())
			Expect(rg.Status.RolloutCompletionTime).NotTo(BeNil())
			Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(And(
				HaveKey("PodsRolled"), HaveKey("RolloutStarted"), HaveKey("RolloutComplete"), HaveKeyWithValue("MemberComplete", 3)))

			_, metrics, err := op.Get("/metrics")
			Expect(err).NotTo(HaveOccurred())
			for _, z := range g.zones {
				Expect(metrics).To(ContainSubstring(fmt.Sprintf(
					`echelon_rolloutgroup_pods_rolled_total{namespace=%q,rolloutgroup="ingester",statefulset=%q} 10`, g.ns, z)))
			}
			Expect(metrics).To(ContainSubstring(fmt.Sprintf(`echelon_rolloutgroup_phase{namespace=%q,phase="Complete",rolloutgroup="ingester"} 1`, g.ns)))
			Expect(metrics).To(ContainSubstring(fmt.Sprintf(`echelon_rolloutgroup_rollout_duration_seconds_count{namespace=%q,rolloutgroup="ingester"} 1`, g.ns)))
			Expect(metrics).To(ContainSubstring(fmt.Sprintf(`echelon_rolloutgroup_last_progress_timestamp_seconds{namespace=%q,rolloutgroup="ingester"} `, g.ns)))
		},
		Entry("maxUnavailable 1", intstr.FromInt32(1), 1),
		Entry("maxUnavailable 3", intstr.FromInt32(3), 3),
		Entry("maxUnavailable 30%", intstr.FromString("30%"), 3),
	)

	It("deletes nothing while paused and resumes where it stopped", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 10, nil)
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		Eventually(func() int { return len(mon.Deletions()) }).Should(BeNumerically(">=", 4))
		g.patchSpec(ctx, `{"paused":true}`)
		g.waitPhase(ctx, v1alpha1.PhasePaused, 30*time.Second)
		// A group is never reconciled twice at once and deletes before it writes
		// status, so every deletion decided before the pause has reached the API
		// server by now: the pods live now are the ones the pause must keep.
		live := livePodUIDs(ctx, g.ns)
		// Unpaused, the operator deletes the next batch as soon as the last is
		// Ready, well under a second on kwok; 3s waits out several batches.
		Consistently(func() []string { return deletedOf(mon, live) }).WithTimeout(3*time.Second).Should(BeEmpty(),
			"no pod may be deleted while the group is paused")
		rolled := func() int { return len(mon.DeletionsWhere(versionAnnotation, "v1")) }
		Expect(rolled()).To(BeNumerically("<", 30))

		g.patchSpec(ctx, `{"paused":false}`)
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(rolled()).To(Equal(30), "every pod is replaced exactly once")
		Expect(g.eventReasons(ctx)).To(HaveKey("Paused"))
	})

	It("finishes a zone that has a not-Ready pod before any other, replacing that pod first", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 10, nil)
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setPodReady(ctx, "ingester-zone-c-4", false)
		g.setVersion(ctx, "v2")
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")

		expectNoBreaches(mon)
		Expect(mon.Deletions()[0].Pod).To(Equal("ingester-zone-c-4"), "the not-Ready outdated pod goes first")
		Expect(mon.MemberOrder()).To(Equal([]string{"ingester-zone-c", "ingester-zone-a", "ingester-zone-b"}))
	})

	It("rolls a group mixing OnDelete and RollingUpdate members one member at a time, the RollingUpdate one by its partition", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 5, func(s *v1alpha1.RolloutGroupSpec) { s.MaxUnavailable = ptr.To(intstr.FromInt32(2)) })
		// zone-b rolls itself (RollingUpdate): Echelon owns its partition,
		// releasing its pods two at a time once zone-a is done.
		patchStatefulSet(ctx, g.ns, "ingester-zone-b",
			`{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":0}}}}`)
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		Eventually(func() *int32 { return partitionOf(ctx, g.ns, "ingester-zone-b") }).Should(HaveValue(BeEquivalentTo(5)),
			"a complete RollingUpdate member is held at its replicas")
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		rg := g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.MemberOrder()).To(Equal(g.zones))
		for zone, peak := range mon.PeakNotReady() {
			Expect(peak).To(BeNumerically("<=", 2), "peak of not-Ready pods in %s", zone)
		}
		Expect(rg.Status.PodsRolled).To(Equal(int32(15)))
		Expect(rg.Status.StatefulSets[1].Partition).To(HaveValue(BeEquivalentTo(5)), "held at its replicas again")
		Expect(rg.Status.StatefulSets[0].Partition).To(BeNil(), "an OnDelete member has no partition")
		Expect(strings.Join(g.eventNotes(ctx, "PodsRolled"), "\n")).To(ContainSubstring("by lowering its partition"))
	})

	It("blocks both groups while two claim the same StatefulSet, and frees the first when the second goes", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 3, nil)
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		second := builders.MakeRolloutGroup(g.ns, "second").Members("ingester-zone-b").Obj()
		Expect(k8s.Create(ctx, second)).To(Succeed())
		rg := g.waitPhase(ctx, v1alpha1.PhaseBlocked, 30*time.Second)
		Expect(rg.Status.Message).To(And(ContainSubstring("ingester-zone-b"), ContainSubstring("second")))
		Expect(meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionReady).Reason).To(Equal(v1alpha1.ReasonMemberClaimedByOtherGroup))
		g.setVersion(ctx, "v2")
		// Were the claim ignored, the first batch would go within a reconcile of
		// the template change, well under a second; 3s waits out several.
		Consistently(func() int { return len(mon.Deletions()) }).WithTimeout(3 * time.Second).Should(BeZero())

		Expect(k8s.Delete(ctx, second)).To(Succeed())
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
	})

	It("rolls a member whose pods are managed OrderedReady", func(ctx SpecContext) {
		g := newZones(ctx, 10)
		// The StatefulSet controller recreates an OrderedReady member's pods one
		// at a time, in ordinal order, each once the one before is Ready.
		g.createStatefulSets(ctx, func(sts *appsv1.StatefulSet) {
			if sts.Name == "ingester-zone-b" {
				sts.Spec.PodManagementPolicy = appsv1.OrderedReadyPodManagement
			}
		})
		g.waitPodsOn(ctx, "v1")
		g.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) { s.MaxUnavailable = ptrIntOrString(intstr.FromInt32(3)) })
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.MemberOrder()).To(Equal(g.zones))
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(30), "every pod is replaced exactly once")
	})

	It("rolls pods back when the template is reverted mid-rollout", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 10, func(s *v1alpha1.RolloutGroupSpec) { s.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2)) })
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		Eventually(func() int { return len(mon.Deletions()) }).Should(BeNumerically(">=", 14))
		g.setVersion(ctx, "v1")
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v1")
		expectNoBreaches(mon)
	})
})

func ptrIntOrString(v intstr.IntOrString) *intstr.IntOrString { return &v }
