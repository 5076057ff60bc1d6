package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

var _ = Describe("RolloutGroup version leaks", func() {
	It("reports a pod deleted by hand during a paused rollout that comes back on the new revision, once, also after an operator restart", func(ctx SpecContext) {
		one := intstr.FromInt32(1)
		g := newZoneGroup(ctx, 6, func(s *v1alpha1.RolloutGroupSpec) { s.MaxUnavailable = &one })
		op := startOperator(ctx, "first", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		Eventually(func() int { return len(mon.DeletionsWhere(versionAnnotation, "v1")) }).Should(BeNumerically(">=", 2))
		g.patchSpec(ctx, `{"paused":true}`)
		g.waitPhase(ctx, v1alpha1.PhasePaused, 30*time.Second)
		Eventually(func() bool { return mon.Available("ingester-zone-a") }).Should(BeTrue(), "the last batch is back")
		rolled := len(mon.DeletionsWhere(versionAnnotation, "v1"))
		Expect(rolled).To(BeNumerically("<", 6), "zone-a is partly rolled")

		// A node drain, as a person would do it: zone-a-0, not yet rolled,
		// is deleted and comes back on the update revision.
		old := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: "ingester-zone-a-0"}, old)).To(Succeed())
		Expect(old.Annotations[versionAnnotation]).To(Equal("v1"))
		Expect(k8s.Delete(ctx, old)).To(Succeed())
		Eventually(func(gm Gomega) {
			back := &corev1.Pod{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: "ingester-zone-a-0"}, back)).To(Succeed())
			gm.Expect(back.UID).NotTo(Equal(old.UID))
			gm.Expect(back.Annotations[versionAnnotation]).To(Equal("v2"), "the StatefulSet controller recreates it from the update revision")
		}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())

		expectLeaked := func(rolling bool) {
			GinkgoHelper()
			Eventually(func(gm Gomega) {
				rg := g.get(ctx)
				gm.Expect(rg.Status.LeakedPods).To(Equal(int32(1)))
				gm.Expect(rg.Status.StatefulSets[0].LeakedPods).To(Equal(int32(1)))
				if rolling {
					gm.Expect(rg.Status.StatefulSets[0].Message).To(ContainSubstring("1 pod leaked"), "while zone-a is partly rolled")
				}
				gm.Expect(rg.Status.LeakRecords).To(ContainElement(And(
					HaveField("Member", "ingester-zone-a"), HaveField("Leaked", "0"), HaveField("LeakedPods", int32(1)))))
				for _, m := range rg.Status.StatefulSets[1:] {
					gm.Expect(m.LeakedPods).To(BeZero(), "member %s", m.Name)
				}
			}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
		}
		expectLeaked(true)
		Eventually(func() []string { return g.eventNotes(ctx, "PodLeaked") }).Should(ConsistOf(And(
			ContainSubstring("ingester-zone-a-0"), ContainSubstring("did not remove"))))
		_, metrics, err := op.Get("/metrics")
		Expect(err).NotTo(HaveOccurred())
		Expect(metrics).To(ContainSubstring(fmt.Sprintf(
			`echelon_rolloutgroup_leaked_pods_total{namespace=%q,rolloutgroup="ingester",statefulset="ingester-zone-a"} 1`, g.ns)))

		// A new operator process judges from the record in status: the leak
		// is neither lost nor announced again, and Echelon's own pods are not
		// taken for leaks.
		op.Kill()
		Eventually(op.Exited()).Should(BeClosed())
		startOperator(ctx, "second", g.ns, fastLeaderElection...)
		g.patchSpec(ctx, `{"paused":false}`)
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		expectLeaked(false)
		Expect(g.eventNotes(ctx, "PodLeaked")).To(HaveLen(1), "the leak is announced once")
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(18), "every v1 pod is replaced once, the leaked one by the drain")
	})

})
