package e2e

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/notify"
	"github.com/echelon-operator/echelon/test/receiver"
)

// objectEvents lists the Events recorded on the object kind/name of ns.
func objectEvents(ctx context.Context, ns, kind, name, reason string) []string {
	GinkgoHelper()
	var out []string
	for _, e := range settledEvents(ctx, ns, func(e corev1.Event) bool {
		return e.InvolvedObject.Kind == kind && e.InvolvedObject.Name == name && e.Reason == reason
	}) {
		out = append(out, e.Message)
	}
	return out
}

// waitNotificationBaseline waits until the notifier has seen the object's
// status once: what changes after is news.
func waitNotificationBaseline(ctx context.Context, obj client.Object, status func() *v1alpha1.NotificationStatus) {
	GinkgoHelper()
	Eventually(func(gm Gomega) {
		gm.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		gm.Expect(status()).NotTo(BeNil())
		gm.Expect(status().Observed).NotTo(BeNil())
	}).WithContext(ctx).WithTimeout(30 * time.Second).Should(Succeed())
}

var _ = Describe("ScalingPolicy and DelayedDownscale notifications", func() {
	It("tells a ScalingPolicy's receiver Scaled (from, to, leader) when its leader scales, retried through a failing receiver and an operator SIGKILL, and a receiver with a missing Secret gets a condition and an Event naming the field while scaling goes on", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 3, nil)
		grantNotificationSecrets(ctx, g.ns)
		hook := startReceiver(ctx, g.ns, "scale-hook")
		rec := recordReplicas(ctx, g.ns)
		sp := createPolicy(ctx, g.ns, zoneB, func(s *v1alpha1.ScalingPolicySpec) {
			followLeader(zoneA, 0)(s)
			s.Notifications = []v1alpha1.NotificationReceiver{
				{Name: "chat", SecretRef: v1alpha1.LocalSecretReference{Name: "no-such-secret"}, Format: v1alpha1.NotificationFormatSlack},
				{Name: "hook", SecretRef: v1alpha1.LocalSecretReference{Name: "scale-hook"}},
			}
		})
		first := startOperator(ctx, "first", g.ns, fastLeaderElection...)
		waitStable(ctx, g.ns, zoneB)
		waitNotificationBaseline(ctx, sp, func() *v1alpha1.NotificationStatus { return sp.Status.Notifications })

		// The receiver refuses the first two attempts; the operator is
		// SIGKILLed after the first, and the next one delivers from status.
		hook.FailNext(2)
		g.scale(ctx, zoneA, 5)
		rec.waitChange(ctx, zoneB, 5, 30*time.Second)
		Eventually(func() []receiver.Request { return hook.Requests() }).WithTimeout(30 * time.Second).ShouldNot(BeEmpty())
		first.Kill()
		Eventually(first.Exited()).Should(BeClosed())
		startOperator(ctx, "second", g.ns, fastLeaderElection...)
		g.scaled[zoneA], g.scaled[zoneB] = 5, 5
		g.waitPodsOn(ctx, "v1")
		waitStable(ctx, g.ns, zoneB)

		Eventually(func() []string { return hook.Events() }).WithTimeout(30*time.Second).Should(Equal([]string{"Scaled"}),
			"one scale, one Scaled: the missing Secret of the other receiver holds nothing")
		n := hook.Notifications()[0]
		Expect(n.Object).To(Equal(notify.Object{Kind: "ScalingPolicy", Namespace: g.ns, Name: zoneB, UID: string(sp.UID)}))
		Expect(n.Target).To(Equal(zoneB))
		Expect(n.Leader).To(Equal(zoneA))
		Expect(*n.FromReplicas).To(BeEquivalentTo(3))
		Expect(*n.ToReplicas).To(BeEquivalentTo(5))
		Expect(n.Group).To(BeNil())
		for _, r := range hook.Requests() {
			Expect(r.DeliveryID).To(Equal(n.DeliveryID), "every attempt, before and after the SIGKILL, carries the one delivery id")
		}
		AddReportEntry("Scaled requests repeated across the SIGKILL (dropped by delivery id)", hook.Repeated())

		Eventually(func(gm Gomega) {
			gm.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(sp), sp)).To(Succeed())
			c := meta.FindStatusCondition(sp.Status.Notifications.Conditions, v1alpha1.ConditionNotificationsDelivered)
			gm.Expect(c).NotTo(BeNil())
			gm.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			gm.Expect(c.Reason).To(Equal(v1alpha1.ReasonSecretUnreadable))
			gm.Expect(c.Message).To(ContainSubstring("receiver chat: spec.notifications[chat].secretRef: Secret no-such-secret not found"))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(objectEvents(ctx, g.ns, "ScalingPolicy", zoneB, "NotificationFailed")).To(
			ContainElement(ContainSubstring("spec.notifications[chat].secretRef: Secret no-such-secret not found")))
		Expect(rec.of(zoneB)).To(HaveLen(1), "one scale of zone-b: %v", rec.of(zoneB))
	})

	It("tells a DelayedDownscale's receiver DownscaleRequested with the pods, DownscaleDelayed, then DownscaleDone", func(ctx SpecContext) {
		s := newDelayedSetup(ctx, 4, "4s", 0)
		grantNotificationSecrets(ctx, s.ns)
		hook := startReceiver(ctx, s.ns, "downscale-hook")
		dd := &v1alpha1.DelayedDownscale{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.sts}, dd)).To(Succeed())
		dd.Spec.Notifications = []v1alpha1.NotificationReceiver{{Name: "hook", SecretRef: v1alpha1.LocalSecretReference{Name: "downscale-hook"}}}
		Expect(k8s.Update(ctx, dd)).To(Succeed())
		s.startOperator(ctx, "echelon")
		waitStable(ctx, s.ns, s.sts)
		s.waitDelayed(ctx, 30*time.Second, idleAt(4))
		waitNotificationBaseline(ctx, dd, func() *v1alpha1.NotificationStatus { return dd.Status.Notifications })

		s.scaleTo(ctx, 2)
		s.finish(ctx, 2)
		s.waitDelayed(ctx, 30*time.Second, idleAt(2))

		var events []string
		Eventually(func(gm Gomega) {
			events = hook.Events()
			gm.Expect(events).To(HaveLen(3))
		}).WithTimeout(30*time.Second).Should(Succeed(), "events so far: %v", events)
		Expect(events).To(Equal([]string{"DownscaleRequested", "DownscaleDelayed", "DownscaleDone"}))
		ns := hook.Notifications()
		Expect(ns[0].Pods).To(Equal([]string{s.pod(2), s.pod(3)}), "the pods the downscale removes")
		for _, n := range ns {
			Expect(n.Object.Kind).To(Equal("DelayedDownscale"))
			Expect(n.Target).To(Equal(s.sts))
		}
		Expect(*ns[2].FromReplicas).To(BeEquivalentTo(4))
		Expect(*ns[2].ToReplicas).To(BeEquivalentTo(2))
		Expect(hook.Repeated()).To(BeZero())
	})
})

var _ = Describe("RolloutGroup callbacks queued", func() {
	It("delivers a Failed rollout's callback still being retried, then the Complete callback of the retry with a new rolloutId, in order", func(ctx SpecContext) {
		// The deploy system is down until told otherwise.
		g, p, mon, deploy := failedRolloutCalledBack(ctx, func(r *receiver.Receiver) { r.FailNext(1 << 20) })
		Eventually(func() []receiver.Request { return deploy.Requests() }).WithTimeout(30*time.Second).ShouldNot(BeEmpty(), "the Failed callback is tried")

		p.flip(ctx, "ingester-zone-b", 0)
		g.updateSpec(ctx, func(s *v1alpha1.RolloutGroupSpec) { s.RolloutID = "deploy-2" })
		g.waitComplete(ctx, 2*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Eventually(func(gm Gomega) {
			cbs := notifications(ctx, g).Callbacks
			gm.Expect(cbs).To(HaveLen(2))
			gm.Expect(cbs[0]).To(And(HaveField("Outcome", v1alpha1.OutcomeFailed), HaveField("RolloutID", "deploy-1"), HaveField("Delivered", false)))
			gm.Expect(cbs[1]).To(And(HaveField("Outcome", v1alpha1.OutcomeComplete), HaveField("RolloutID", "deploy-2"), HaveField("Delivered", false)))
		}).WithTimeout(30*time.Second).Should(Succeed(), "both callbacks wait, the Failed one first")
		for _, r := range deploy.Requests() {
			Expect(r.Event).To(Equal("Failed"), "nothing but the Failed callback is tried while it is refused")
		}

		deploy.FailNext(0)
		Eventually(func() []receiver.Request { return deploy.Accepted() }).WithTimeout(2 * time.Minute).Should(HaveLen(2))
		cb := deploy.Callbacks()
		Expect(cb[0]).To(And(HaveField("Outcome", "Failed"), HaveField("RolloutID", "deploy-1")))
		Expect(cb[1]).To(And(HaveField("Outcome", "Complete"), HaveField("RolloutID", "deploy-2")))
		Expect(cb[0].DeliveryID).NotTo(Equal(cb[1].DeliveryID))
		Expect(deploy.Repeated()).To(BeZero())
		Eventually(func(gm Gomega) {
			ns := notifications(ctx, g)
			gm.Expect(ns.Callbacks).To(ConsistOf(And(HaveField("RolloutID", "deploy-2"), HaveField("Delivered", true))))
			gm.Expect(meta.IsStatusConditionTrue(ns.Conditions, v1alpha1.ConditionNotificationsDelivered)).To(BeTrue())
		}).WithTimeout(30 * time.Second).Should(Succeed())
	})
})
