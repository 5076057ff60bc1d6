package e2e

import (
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// eventsSettle waits out the event recorder, which writes Events in the
// background a few milliseconds after the operator emits them: an Event of a
// change the spec has just seen in status is written well within it.
const eventsSettle = 2 * time.Second

// rolloutEvents are the reasons that mark a rollout's course.
var rolloutEvents = []string{"RolloutStarted", "MemberComplete", "RolloutComplete"}

var _ = Describe("RolloutGroup status and Events", func() {
	It("records one clean sequence of Events for a rollout, and none for a new group already up to date", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 10, func(s *v1alpha1.RolloutGroupSpec) { s.MaxUnavailable = ptrIntOrString(intstr.FromInt32(5)) })
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		Consistently(func() map[string]int { return g.eventReasons(ctx) }).WithTimeout(eventsSettle).ShouldNot(
			Or(HaveKey("RolloutStarted"), HaveKey("MemberComplete")), "a new group with nothing to roll starts no rollout")
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(HaveKey("RolloutComplete"))
		Consistently(func() map[string]int { return g.eventReasons(ctx) }).WithTimeout(eventsSettle).Should(And(
			HaveKeyWithValue("RolloutStarted", 1), HaveKeyWithValue("MemberComplete", 3), HaveKeyWithValue("RolloutComplete", 1)))

		var course []corev1.Event
		for _, e := range g.events(ctx) {
			if slices.Contains(rolloutEvents, e.Reason) {
				course = append(course, e)
			}
		}
		slices.SortFunc(course, func(a, b corev1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
		var sequence []string
		for _, e := range course {
			step := e.Reason
			for _, z := range g.zones {
				if e.Reason == "MemberComplete" && strings.Contains(e.Message, z) {
					step += " " + z
				}
			}
			sequence = append(sequence, step)
		}
		Expect(sequence).To(Equal([]string{"RolloutStarted", "MemberComplete ingester-zone-a", "MemberComplete ingester-zone-b",
			"MemberComplete ingester-zone-c", "RolloutComplete"}))
		Expect(course[0].Message).To(ContainSubstring("30 of 30 pods to roll"), "every outdated pod is counted from the start")
	})

	It("sets each completed member's currentRevision to its updateRevision", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 5, func(s *v1alpha1.RolloutGroupSpec) { s.MaxUnavailable = ptrIntOrString(intstr.FromString("100%")) })
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		rg := g.waitComplete(ctx, 3*time.Minute)
		expectNoBreaches(mon)
		for _, m := range rg.Status.StatefulSets {
			Eventually(func(gm Gomega) {
				sts := &appsv1.StatefulSet{}
				gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: m.Name}, sts)).To(Succeed())
				gm.Expect(sts.Status.UpdateRevision).To(Equal(m.UpdateRevision))
				gm.Expect(sts.Status.CurrentRevision).To(Equal(sts.Status.UpdateRevision),
					"tools that judge a StatefulSet's health compare the two")
			}).Should(Succeed(), "member %s", m.Name)
		}
	})

	It("treats a scale-up of a complete group as no rollout: Waiting while the new pods start, then Complete", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 10, func(s *v1alpha1.RolloutGroupSpec) { s.MaxUnavailable = ptrIntOrString(intstr.FromInt32(10)) })
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		g.setVersion(ctx, "v2")
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		Expect(g.get(ctx).Status.PodsRolled).To(Equal(int32(30)))
		// New pods count as available only after being Ready this long, which
		// keeps the group waiting long enough to be seen doing so.
		g.patchSpec(ctx, `{"minReadySeconds":3}`)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(HaveKeyWithValue("RolloutComplete", 1))
		before := g.eventReasons(ctx)
		mon := g.monitor(ctx)

		g.scale(ctx, "ingester-zone-b", 12)
		// Until zone-b's StatefulSet controller has seen the new replicas the
		// reason is WaitingForStatefulSet; then the new pods are what is missing.
		Eventually(func(gm Gomega) {
			rg := g.get(ctx)
			gm.Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseWaiting), "message: %s", rg.Status.Message)
			gm.Expect(meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionReady)).To(And(
				HaveField("Status", BeEquivalentTo("False")), HaveField("Reason", v1alpha1.ReasonPodsUnavailable)))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		rg := g.waitComplete(ctx, time.Minute)
		g.waitPodsOn(ctx, "v2")

		Expect(rg.Status.PodsRolled).To(Equal(int32(30)), "a scale-up resets no rollout counter")
		Expect(mon.Deletions()).To(BeEmpty())
		expectNoBreaches(mon)
		Consistently(func() map[string]int { return g.eventReasons(ctx) }).WithTimeout(eventsSettle).Should(And(
			HaveKeyWithValue("RolloutStarted", before["RolloutStarted"]), HaveKeyWithValue("RolloutComplete", before["RolloutComplete"])),
			"a scale-up is not a rollout")
	})
})
