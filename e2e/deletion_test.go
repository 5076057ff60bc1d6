package e2e

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Left alone, the operator deletes its next batch minReadySeconds (3s, see
// betweenBatches) after the last one was Ready; holdWindow waits that out
// with a margin, so that a spec sees the batch an operator ignoring a
// deletion would delete.
const holdWindow = 5 * time.Second

var _ = Describe("RolloutGroup objects deleted mid-rollout", func() {
	It("blocks while a member StatefulSet is deleted leaving its pods, deletes no pod, and completes once it is back", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 10, betweenBatches)
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		waitForBatchDone(mon, "ingester-zone-a", 2)
		live := livePodUIDs(ctx, g.ns)
		zoneB := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: "ingester-zone-b"}}
		// kubectl delete --cascade=orphan
		Expect(k8s.Delete(ctx, zoneB, client.PropagationPolicy(metav1.DeletePropagationOrphan))).To(Succeed())

		rg := g.waitPhase(ctx, v1alpha1.PhaseBlocked, 30*time.Second)
		Expect(meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionReady)).To(
			HaveField("Reason", BeElementOf(v1alpha1.ReasonMemberNotFound, v1alpha1.ReasonMemberDeleting)))
		Expect(rg.Status.Message).To(ContainSubstring("ingester-zone-b"))
		Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(HaveKey("Blocked"))
		Eventually(func(gm Gomega) {
			gm.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(zoneB), zoneB))).To(BeTrue(), "the StatefulSet is gone")
			var pods corev1.PodList
			gm.Expect(k8s.List(ctx, &pods, client.InNamespace(g.ns), client.MatchingLabels{"app": "ingester-zone-b"})).To(Succeed())
			gm.Expect(pods.Items).To(HaveLen(10))
			for _, p := range pods.Items {
				gm.Expect(metav1.GetControllerOf(&p)).To(BeNil(), "pod %s is orphaned", p.Name)
			}
		}).Should(Succeed())
		Consistently(func() []string { return deletedOf(mon, live) }).WithTimeout(holdWindow).Should(BeEmpty(),
			"no pod of any member is deleted once a member is being deleted")
		Expect(g.get(ctx).Status.Phase).To(Equal(v1alpha1.PhaseBlocked))

		// The same StatefulSet again adopts the orphans, which are outdated. The
		// rest of the rollout needs no pause between batches.
		Expect(k8s.Create(ctx, zoneStatefulSet(g.ns, "ingester-zone-b", 10, "v2").Obj())).To(Succeed())
		g.patchSpec(ctx, `{"minReadySeconds":0}`)
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(30), "every pod is replaced exactly once")
	})

	DescribeTable("deletes no pod once the group is being deleted",
		func(ctx SpecContext, foreground bool) {
			g := newZoneGroup(ctx, 10, betweenBatches)
			startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
			rg := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: g.name}}
			if foreground {
				// A finalizer of someone else's, a GitOps tool's say, keeps the group
				// after its deletion until that someone lets go.
				setFinalizer(ctx, rg, true)
				DeferCleanup(setFinalizer, rg, false)
			}
			mon := g.monitor(ctx)

			g.setVersion(ctx, "v2")
			waitForBatchDone(mon, "ingester-zone-a", 2)
			live := livePodUIDs(ctx, g.ns)
			if foreground {
				Expect(k8s.Delete(ctx, rg, client.PropagationPolicy(metav1.DeletePropagationForeground))).To(Succeed())
			} else {
				Expect(k8s.Delete(ctx, rg)).To(Succeed())
			}
			Consistently(func() []string { return deletedOf(mon, live) }).WithTimeout(holdWindow).Should(BeEmpty(),
				"no pod is deleted once the group has a deletionTimestamp")
			if foreground {
				Expect(k8s.Get(ctx, client.ObjectKeyFromObject(rg), rg)).To(Succeed())
				Expect(rg.DeletionTimestamp).NotTo(BeNil())
				Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseBlocked), "message: %s", rg.Status.Message)
				Expect(meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionReady)).To(
					HaveField("Reason", v1alpha1.ReasonGroupDeleting))
				setFinalizer(ctx, rg, false)
			}
			Eventually(func() bool { return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(rg), rg)) }).Should(BeTrue())
			expectNoBreaches(mon)
			Expect(len(mon.Rolls())).To(BeNumerically("<", 30), "the group was deleted mid-rollout")
		},
		Entry("deleted in the background", false),
		Entry("deleted in the foreground and held by a finalizer", true),
	)
})
