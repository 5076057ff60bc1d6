package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// spec.steps: the Bedrock flow, percent stages a person promotes.
var _ = Describe("RolloutGroup steps", func() {
	It("rolls 1%, waits for a promote, 50%, waits again across an operator SIGKILL, then 100%, across three zones", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 10, func(s *v1alpha1.RolloutGroupSpec) {
			s.MaxUnavailable = ptr.To(intstr.FromInt32(3))
			s.Steps = []v1alpha1.RolloutStep{{Percent: 1, Pause: &v1alpha1.StepPause{}}, {Percent: 50, Pause: &v1alpha1.StepPause{}}, {Percent: 100}}
		})
		// zone-b rolls by its partition: a partial rollout holds the rest of
		// its pods on the old revision too.
		patchStatefulSet(ctx, g.ns, "ingester-zone-b", `{"spec":{"updateStrategy":{"type":"RollingUpdate","rollingUpdate":{"partition":10}}}}`)
		first := startOperator(ctx, "first", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		waitStep := func(index int32, updated string) {
			GinkgoHelper()
			Eventually(func(gm Gomega) {
				rg := g.get(ctx)
				gm.Expect(rg.Status.Step).NotTo(BeNil())
				gm.Expect(rg.Status.Step.Index).To(Equal(index))
				gm.Expect(rg.Status.Step.WaitingFor).To(Equal(v1alpha1.StepWaitPromote), "message: %s", rg.Status.Message)
				gm.Expect(rg.Status.Updated).To(Equal(updated))
				gm.Expect(readyReason(rg)).To(Equal(v1alpha1.ReasonWaitingForPromote))
			}).WithContext(ctx).WithTimeout(2 * time.Minute).Should(Succeed())
			// Nothing more rolls while the step waits.
			n := len(mon.Rolls())
			Consistently(func() int { return len(mon.Rolls()) }).WithTimeout(3 * time.Second).Should(Equal(n))
		}
		waitStep(0, "1/30")
		Expect(len(mon.Rolls())).To(Equal(1), "1%% of 30 pods is one pod")

		g.annotate(ctx, v1alpha1.AnnotationPromote, "first")
		waitStep(1, "15/30")
		Expect(len(mon.Rolls())).To(Equal(15))
		Expect(partitionOf(ctx, g.ns, "ingester-zone-b")).To(HaveValue(BeEquivalentTo(5)), "zone-b's other five pods held by its partition")

		// A new operator takes over mid-pause: it waits for a new promote, not
		// for a second one of the same step.
		first.Kill()
		Eventually(first.Exited()).Should(BeClosed())
		second := startOperator(ctx, "second", g.ns, fastLeaderElection...)
		time.Sleep(5 * time.Second) // the new leader plans the group
		waitStep(1, "15/30")

		g.annotate(ctx, v1alpha1.AnnotationPromote, "second")
		rg := g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.MemberOrder()).To(Equal(g.zones))
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(30), "every pod replaced exactly once")
		Expect(rg.Status.Step).To(HaveField("WaitingFor", v1alpha1.StepWaitDone))
		Expect(g.eventReasons(ctx)).To(And(HaveKeyWithValue("Promoted", 2), HaveKey("StepPaused"), HaveKey("StepStarted")))
		_, metrics, err := second.Get("/metrics")
		Expect(err).NotTo(HaveOccurred())
		Expect(metrics).To(ContainSubstring(fmt.Sprintf(`echelon_rolloutgroup_step{namespace=%q,rolloutgroup="ingester"} 3`, g.ns)))
	})
})
