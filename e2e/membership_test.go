package e2e

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// holdFinalizer keeps a pod or group the spec marks from going away until the
// spec removes it, as a slow shutdown or a GitOps tool's finalizer would.
const holdFinalizer = "echelon.dev/e2e-hold"

// setFinalizer adds or removes holdFinalizer on obj, leaving other finalizers
// (the garbage collector's, say) alone. A gone object holds nothing.
func setFinalizer(ctx SpecContext, obj client.Object, hold bool) {
	GinkgoHelper()
	Eventually(func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return client.IgnoreNotFound(err)
		}
		if hold && !controllerutil.AddFinalizer(obj, holdFinalizer) || !hold && !controllerutil.RemoveFinalizer(obj, holdFinalizer) {
			return nil
		}
		return k8s.Update(ctx, obj)
	}).Should(Succeed())
}

// betweenBatches makes each batch wait minReadySeconds after the last is
// Ready, so that a spec can act in that pause knowing no deletion is in flight.
func betweenBatches(s *v1alpha1.RolloutGroupSpec) {
	s.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2))
	s.MinReadySeconds = 3
}

var _ = Describe("RolloutGroup members that change under a rollout", func() {
	It("rolls no member while a scaled-down member's removed pods are terminating, then completes", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 10, betweenBatches)
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		// The pods the scale-down removes stay Terminating until released, so that
		// the operator has to wait for them for a while rather than a blink.
		var leaving []*corev1.Pod
		for ordinal := 7; ordinal < 10; ordinal++ {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: fmt.Sprintf("ingester-zone-c-%d", ordinal)}}
			setFinalizer(ctx, pod, true)
			DeferCleanup(setFinalizer, pod, false)
			leaving = append(leaving, pod)
		}
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		waitForBatchDone(mon, "ingester-zone-a", 2)
		g.scale(ctx, "ingester-zone-c", 7)
		Eventually(func(gm Gomega) {
			for _, pod := range leaving {
				gm.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
				gm.Expect(pod.DeletionTimestamp).NotTo(BeNil(), "pod %s", pod.Name)
			}
		}).Should(Succeed(), "the StatefulSet controller removes the pods above the new replicas")
		rolled := len(mon.Rolls())
		// Left alone, the operator would delete zone-a's next batch minReadySeconds
		// (3s) after the last one was Ready; 5s waits that out with a margin.
		Consistently(func() int { return len(mon.Rolls()) }).WithTimeout(5*time.Second).Should(Equal(rolled),
			"no member is rolled while zone-c's removed pods are terminating")
		Eventually(func() string { return g.get(ctx).Status.Message }).Should(ContainSubstring("ingester-zone-c"),
			"the status says what the group waits for")

		for _, pod := range leaving {
			setFinalizer(ctx, pod, false)
		}
		// The rest of the rollout needs no pause between batches.
		g.patchSpec(ctx, `{"minReadySeconds":0}`)
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.Rolls()).To(HaveLen(27), "each outdated pod is replaced once: 10 + 10 + the 7 zone-c keeps")
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(30), "and the 3 scaled away go once")
	})

	It("rolls a hand-made pod its StatefulSet adopted without a controller-revision-hash, and completes", func(ctx SpecContext) {
		g := newZones(ctx, 3)
		// Made before its StatefulSet, named and labelled as zone-b's ordinal 1,
		// without the controller-revision-hash label the StatefulSet controller
		// puts on the pods it creates itself.
		template := zoneStatefulSet(g.ns, "ingester-zone-b", g.replicas, "v1").Obj().Spec.Template
		handMade := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: "ingester-zone-b-1", Labels: template.Labels, Annotations: template.Annotations},
			Spec:       template.Spec,
		}
		Expect(k8s.Create(ctx, handMade)).To(Succeed())
		g.createStatefulSets(ctx, nil)
		Eventually(func(gm Gomega) {
			sts := &appsv1.StatefulSet{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: "ingester-zone-b"}, sts)).To(Succeed())
			pod := &corev1.Pod{}
			gm.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(handMade), pod)).To(Succeed())
			gm.Expect(pod.UID).To(Equal(handMade.UID))
			gm.Expect(metav1.GetControllerOf(pod)).To(HaveField("UID", sts.UID), "the StatefulSet controller adopts the pod")
			gm.Expect(pod.Labels).NotTo(HaveKey(appsv1.ControllerRevisionHashLabelKey))
			for _, z := range g.zones {
				gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: z}, sts)).To(Succeed())
				gm.Expect(sts.Status.ReadyReplicas).To(Equal(g.replicas), "ready pods of %s", z)
			}
		}).Should(Succeed())
		// Created paused, so that the monitor watches before anything is rolled.
		g.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) { s.Paused = true })
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		mon := g.monitor(ctx)

		g.patchSpec(ctx, `{"paused":false}`)
		g.waitComplete(ctx, 2*time.Minute)
		g.waitPodsOn(ctx, "v1")
		expectNoBreaches(mon)
		Expect(mon.Rolls()).To(ConsistOf(HaveField("UID", handMade.UID)),
			"the pod without a revision counts as outdated, and is the only one rolled")
	})
})
