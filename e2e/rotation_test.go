package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

var _ = Describe("RolloutGroup rotations", func() {
	It("restarts every pod of three zones at restartAt with no template change, one zone at a time, within maxUnavailable", func(ctx SpecContext) {
		maxUnavailable := intstr.FromInt32(2)
		g := newZoneGroup(ctx, 6, func(s *v1alpha1.RolloutGroupSpec) { s.MaxUnavailable = &maxUnavailable })
		op := startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		revisions := g.updateRevisions(ctx)
		mon := g.monitor(ctx)
		before := livePodUIDs(ctx, g.ns)

		// restartAt a little ahead: nothing is restarted before it comes, and
		// the operator looks again when it does, with no other event to wake it.
		restartAt := time.Now().Add(3 * time.Second).Truncate(time.Second).UTC()
		g.patchSpec(ctx, fmt.Sprintf(`{"restartAt":%q}`, restartAt.Format(time.RFC3339)))
		Eventually(func(gm Gomega) {
			rg := g.get(ctx)
			gm.Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseProgressing))
			gm.Expect(meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionProgressing).Reason).To(Equal(v1alpha1.ReasonRestartingPods))
		}).WithContext(ctx).WithTimeout(30*time.Second).WithPolling(20*time.Millisecond).Should(Succeed(),
			"a rotation shows as Progressing with reason RestartingPods")
		Expect(time.Now()).To(BeTemporally(">=", restartAt), "nothing is restarted before restartAt")

		rg := g.waitRestarted(ctx, restartAt, 3*time.Minute)
		g.waitPodsOn(ctx, "v1")
		expectNoBreaches(mon)
		Expect(deletedOf(mon, before)).To(HaveLen(18), "every pod is replaced exactly once")
		Expect(mon.MemberOrder()).To(Equal(g.zones), "zones are restarted one after the other, in list order")
		for zone, peak := range mon.PeakNotReady() {
			Expect(peak).To(Equal(2), "peak of not-Ready pods in %s: the budget is used, never exceeded", zone)
		}
		Expect(g.updateRevisions(ctx)).To(Equal(revisions), "no template changed")
		Expect(rg.Status.PodsRolled).To(BeZero(), "a rotation rolls no pod to a new revision")
		Expect(rg.Status.Rotation.PodsToRestart).To(BeZero())
		Expect(rg.Status.Rotation.CompletionTime).NotTo(BeNil())
		for _, m := range rg.Status.StatefulSets {
			Expect(m.PodsToRestart).To(BeZero(), "member %s", m.Name)
		}
		Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(And(
			HaveKey("PodsRestarted"), HaveKeyWithValue("RestartStarted", 1), HaveKeyWithValue("RestartComplete", 1), Not(HaveKey("PodsRolled"))))

		_, metrics, err := op.Get("/metrics")
		Expect(err).NotTo(HaveOccurred())
		for _, z := range g.zones {
			Expect(metrics).To(ContainSubstring(fmt.Sprintf(
				`echelon_rolloutgroup_pods_restarted_total{namespace=%q,rolloutgroup="ingester",statefulset=%q} 6`, g.ns, z)))
		}
	})

	It("restarts the pods of a RollingUpdate member too, each on the revision it ran", func(ctx SpecContext) {
		g := newZones(ctx, 4)
		g.createStatefulSets(ctx, func(sts *appsv1.StatefulSet) {
			if sts.Name == "ingester-zone-b" {
				sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType}
			}
		})
		g.waitPodsOn(ctx, "v1")
		g.createGroup(ctx, nil)
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		revisions := g.updateRevisions(ctx)
		mon := g.monitor(ctx)
		before := livePodUIDs(ctx, g.ns)

		restartAt := time.Now().Add(time.Second).Truncate(time.Second).UTC()
		g.patchSpec(ctx, fmt.Sprintf(`{"restartAt":%q}`, restartAt.Format(time.RFC3339)))
		g.waitRestarted(ctx, restartAt, 3*time.Minute)
		g.waitPodsOn(ctx, "v1")
		expectNoBreaches(mon)
		Expect(deletedOf(mon, before)).To(HaveLen(12), "every pod is replaced exactly once, zone-b's too")
		Expect(mon.MemberOrder()).To(Equal(g.zones))
		Expect(g.updateRevisions(ctx)).To(Equal(revisions), "no template changed")
	})

	It("replaces a pod annotated echelon.dev/rotate, and only that pod", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 3, nil)
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)
		before := livePodUIDs(ctx, g.ns)

		pod := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: "ingester-zone-b-1"}, pod)).To(Succeed())
		Expect(k8s.Patch(ctx, pod, client.RawPatch(types.MergePatchType,
			[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"node-cycler"}}}`, v1alpha1.AnnotationRotate))))).To(Succeed())

		Eventually(func(gm Gomega) {
			rg := g.get(ctx)
			gm.Expect(rg.Status.Rotation).NotTo(BeNil())
			gm.Expect(rg.Status.Rotation.CompletionTime).NotTo(BeNil())
			gm.Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseComplete))
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		g.waitPodsOn(ctx, "v1")
		expectNoBreaches(mon)
		Expect(deletedOf(mon, before)).To(Equal([]string{"ingester-zone-b-1"}))
		replaced := &corev1.Pod{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: "ingester-zone-b-1"}, replaced)).To(Succeed())
		Expect(replaced.UID).NotTo(Equal(pod.UID))
		Expect(replaced.Annotations).NotTo(HaveKey(v1alpha1.AnnotationRotate), "the replacement is not replaced again")
		Expect(g.get(ctx).Status.RestartedAt).To(BeNil(), "no spec.restartAt was asked for")
	})
})

// waitRestarted waits until the group reports restartAt honoured
// (status.restartedAt) and is Complete.
func (g *zoneGroup) waitRestarted(ctx context.Context, restartAt time.Time, timeout time.Duration) *v1alpha1.RolloutGroup {
	GinkgoHelper()
	var rg *v1alpha1.RolloutGroup
	Eventually(func(gm Gomega) {
		rg = g.get(ctx)
		gm.Expect(rg.Status.RestartedAt).NotTo(BeNil(), "message: %s", rg.Status.Message)
		gm.Expect(rg.Status.RestartedAt.Time).To(BeTemporally("==", restartAt))
		gm.Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseComplete))
	}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
	return rg
}
