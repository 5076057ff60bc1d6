package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

var _ = Describe("One disruption budget", func() {
	Context("kubectl scale of a member that no ScalingPolicy guards", func() {
		It("is refused while another zone is disrupted, naming the group, the zone and why, and admitted and recorded once the budget allows it", func(ctx SpecContext) {
			g := newZoneGroup(ctx, 4, nil)
			startWebhookOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
			uid := string(g.get(ctx).UID)
			Eventually(func(gm Gomega) {
				for _, z := range g.zones {
					sts := &appsv1.StatefulSet{}
					gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: z}, sts)).To(Succeed())
					gm.Expect(sts.Labels).To(HaveKeyWithValue(v1alpha1.MemberLabel, uid), z)
				}
			}).Should(Succeed(), "the group's controller labels its members, which the webhook's objectSelector reaches")
			mon := g.monitor(ctx)
			mon.JudgeEveryMoment()

			By("zone a loses a pod's readiness, as a failing probe would")
			g.setPodReady(ctx, zoneA+"-0", false)
			Eventually(func() bool { return mon.Available(zoneA) }).Should(BeFalse())

			By("kubectl scale down of zone b is refused, naming the group, the zone that is down and why")
			// Told before: were it admitted, its removed pod would not count
			// as a rolled one, and the monitor would report two zones down.
			mon.SetReplicas(zoneB, 3)
			out, ok := scaleWithKubectl(ctx, g.ns, "StatefulSet", zoneB, 3)
			Expect(ok).To(BeFalse(), "kubectl scale down was admitted: %s", out)
			AddReportEntry("the refused kubectl scale", out)
			Expect(out).To(And(ContainSubstring(`admission webhook "scale.downscale-budget.echelon.dev" denied the request`),
				ContainSubstring(fmt.Sprintf("downscale of StatefulSet %s from 4 to 3 denied", zoneB)),
				ContainSubstring("RolloutGroup "+g.name), ContainSubstring("zone "+zoneA), ContainSubstring("not available")))
			By("so is the same downscale as a patch of spec.replicas")
			out, ok = tryKubectl(ctx, "-n", g.ns, "patch", "statefulset", zoneB, "--type=merge", "-p", `{"spec":{"replicas":3}}`)
			Expect(ok).To(BeFalse(), "kubectl patch down was admitted: %s", out)
			Expect(out).To(And(ContainSubstring(`admission webhook "downscale-budget.echelon.dev" denied the request`), ContainSubstring("zone "+zoneA)))
			mon.SetReplicas(zoneB, 4)
			Eventually(func() []string { return warningEvents(ctx, g.ns, zoneB) }).
				Should(ContainElement(HavePrefix("DownscaleTooEarly: ")), "a Warning Event on the StatefulSet says why")
			Expect(intentsOf(g.get(ctx), zoneB)).To(BeEmpty(), "a refusal records nothing")

			By("kubectl scale up of zone c is not judged")
			mon.SetReplicas(zoneC, 5)
			g.scaled[zoneC] = 5
			out, ok = scaleWithKubectl(ctx, g.ns, "StatefulSet", zoneC, 5)
			Expect(ok).To(BeTrue(), "kubectl scale up was refused: %s", out)

			By("zone a is whole again: the downscale of zone b is admitted and its intent recorded")
			g.setPodReady(ctx, zoneA+"-0", true)
			Eventually(func() bool { return mon.Available(zoneA) && mon.Available(zoneC) }).Should(BeTrue())
			// The removed pod stays Terminating until released, so that the
			// intent is still on record when the spec reads it.
			leaving := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: zoneB + "-3"}}
			setFinalizer(ctx, leaving, true)
			DeferCleanup(setFinalizer, leaving, false)
			mon.SetReplicas(zoneB, 3)
			g.scaled[zoneB] = 3
			out, ok = scaleWithKubectl(ctx, g.ns, "StatefulSet", zoneB, 3)
			Expect(ok).To(BeTrue(), "kubectl scale down was refused once the budget allows it: %s", out)
			recorded := intentsOf(g.get(ctx), zoneB)
			Expect(recorded).To(ContainElement(And(
				HaveField("Reason", v1alpha1.DisruptionDownscale),
				HaveField("Holder", HavePrefix(fmt.Sprintf("downscale of StatefulSet %s by ", zoneB))),
				HaveField("Pods", ConsistOf(HaveField("Name", zoneB+"-3"))))),
				"the admitted downscale is recorded with the ordinal it removes, before the API server stores it")

			By("while zone b's pod is leaving, zone a may not shrink")
			out, ok = scaleWithKubectl(ctx, g.ns, "StatefulSet", zoneA, 3)
			Expect(ok).To(BeFalse(), "a second zone's downscale was admitted: %s", out)
			Expect(out).To(ContainSubstring(zoneB))

			setFinalizer(ctx, leaving, false)
			waitReplicas(ctx, g.ns, zoneB, 3, time.Minute)
			g.waitPodsOn(ctx, "v1")
			expectNoBreaches(mon)
		})
	})
})

// intentsOf lists the intents the group holds for zone.
func intentsOf(rg *v1alpha1.RolloutGroup, zone string) []v1alpha1.DisruptionIntent {
	var out []v1alpha1.DisruptionIntent
	if rg.Status.Disruption == nil {
		return nil
	}
	for _, in := range rg.Status.Disruption.Intents {
		if in.Zone == zone {
			out = append(out, in)
		}
	}
	return out
}
