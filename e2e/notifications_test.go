package e2e

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/receiver"
)

// startReceiver starts a test receiver on loopback (the operator runs as a
// local process, so it reaches it) and a Secret in ns holding its URL.
func startReceiver(ctx context.Context, ns, secret string) *receiver.Receiver {
	GinkgoHelper()
	r := receiver.Start()
	DeferCleanup(r.Close)
	Expect(k8s.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: secret},
		StringData: map[string]string{v1alpha1.NotificationSecretURLKey: r.URL + "/echelon"},
	})).To(Succeed())
	return r
}

// grantNotificationSecrets lets the operator read the Secrets of ns, as the
// installer grants it (the same Role as the analysis' Secrets).
func grantNotificationSecrets(ctx context.Context, ns string) {
	GinkgoHelper()
	Expect(cp.GrantAnalysisSecrets(ctx, operatorUser.Name, ns)).To(Succeed())
}

func notifications(ctx context.Context, g *zoneGroup) *v1alpha1.NotificationStatus {
	return g.get(ctx).Status.Notifications
}

// failedRolloutCalledBack is a three-zone group gated by an error-rate
// check (onFailure Pause), with spec.rolloutId deploy-1 and a callback to a
// test receiver, whose rollout to v2 has Failed at zone-b. prepare, if set,
// readies the receiver before the rollout starts.
func failedRolloutCalledBack(ctx context.Context, prepare func(*receiver.Receiver)) (*zoneGroup, *promSetup, *framework.Monitor, *receiver.Receiver) {
	GinkgoHelper()
	const soak = 4 * time.Second
	g, p, mon, _ := newAnalyzedZones(ctx, 3, v1alpha1.FailurePause, func(p *promSetup) *v1alpha1.RolloutAnalysis {
		return p.analysis(soak, errorRateCheck(nil))
	})
	grantNotificationSecrets(ctx, g.ns)
	deploy := startReceiver(ctx, g.ns, "deploy-system")
	if prepare != nil {
		prepare(deploy)
	}
	g.updateSpec(ctx, func(s *v1alpha1.RolloutGroupSpec) {
		s.RolloutID = "deploy-1"
		s.Callback = &v1alpha1.RolloutCallback{SecretRef: v1alpha1.LocalSecretReference{Name: "deploy-system"}}
	})
	g.setVersion(ctx, "v2")
	g.waitSoaking(ctx, "ingester-zone-a")
	p.flip(ctx, "ingester-zone-b", badErrors)
	g.waitPhase(ctx, v1alpha1.PhaseFailed, time.Minute)
	return g, p, mon, deploy
}

var _ = Describe("RolloutGroup notifications and callbacks", func() {
	It("tells a receiver each step of a three-zone rollout, 50 pods a message, one message a page updated in place, retried through a failing receiver and an operator SIGKILL, and calls back once with the rollout id", func(ctx SpecContext) {
		g := newZones(ctx, 3)
		grantNotificationSecrets(ctx, g.ns)
		hook := startReceiver(ctx, g.ns, "rollout-hook")
		deploy := startReceiver(ctx, g.ns, "deploy-system")
		const big = "ingester-zone-b"
		g.scaled[big] = 120
		g.createStatefulSets(ctx, func(sts *appsv1.StatefulSet) {
			sts.Spec.Replicas = ptr.To(g.replicasOf(sts.Name))
		})
		g.waitPodsOn(ctx, "v1")
		g.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) {
			s.MaxUnavailable = ptrIntOrString(intstr.FromString("25%"))
			s.RolloutID = "deploy-1001"
			s.Notifications = []v1alpha1.NotificationReceiver{{Name: "hook", SecretRef: v1alpha1.LocalSecretReference{Name: "rollout-hook"}}}
			s.Callback = &v1alpha1.RolloutCallback{SecretRef: v1alpha1.LocalSecretReference{Name: "deploy-system"}}
		})
		first := startOperator(ctx, "first", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		Expect(hook.Requests()).To(BeEmpty(), "a group already complete is history: nothing to tell")
		mon := g.monitor(ctx)

		// The receiver fails the first two attempts: the operator retries
		// them after 1 s and 2 s under the same delivery id.
		hook.FailNext(2)
		g.setVersion(ctx, "v2")
		Eventually(func() []string { return hook.Events() }).WithTimeout(time.Minute).Should(ContainElement("MemberReached"))
		first.Kill()
		Eventually(first.Exited()).Should(BeClosed())
		second := startOperator(ctx, "second", g.ns, fastLeaderElection...)

		rg := g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(rg.Status.RolloutID).To(Equal("deploy-1001"))
		Eventually(func() []receiver.Request { return deploy.Accepted() }).WithTimeout(30 * time.Second).Should(HaveLen(1))
		Eventually(func() []string { return hook.Events() }).WithTimeout(30*time.Second).Should(Equal([]string{
			"Started", "MemberReached", "MemberReached", "MemberReached", "MemberReached", "MemberReached", "Complete",
		}), "each event once, in order, after deduplication by delivery id; zone-b in three pages")
		AddReportEntry("requests repeated across the SIGKILL (dropped by delivery id)", hook.Repeated())

		reqs := hook.Requests()
		Expect(reqs[0].Status).To(Equal(500))
		Expect(reqs[1].Status).To(Equal(500))
		Expect(reqs[2].Status).To(Equal(200))
		Expect(reqs[1].DeliveryID).To(Equal(reqs[0].DeliveryID), "a retry carries the same delivery id")
		Expect(reqs[2].DeliveryID).To(Equal(reqs[0].DeliveryID))

		var members, pages []string
		for _, n := range hook.Notifications() {
			Expect(n.RolloutID).To(Equal("deploy-1001"))
			Expect(n.Group).To(HaveField("Name", g.name))
			Expect(len(n.Pods)).To(BeNumerically("<=", 50))
			if n.Event == "MemberReached" {
				members = append(members, n.Member)
				if n.Member == big {
					pages = append(pages, fmt.Sprintf("%d/%d:%d", n.Page, n.Pages, len(n.Pods)))
				}
			}
		}
		Expect(members).To(Equal([]string{"ingester-zone-a", big, big, big, "ingester-zone-c"}))
		Expect(pages).To(Equal([]string{"1/3:50", "2/3:50", "3/3:20"}), "120 pods: three messages")

		// One message a page of the rollout: replaced in place, page 1 ends
		// as the rollout's last word.
		latest := hook.Latest()
		Expect(latest).To(HaveLen(3))
		var last []string
		for _, n := range latest {
			last = append(last, fmt.Sprintf("%s page %d", n.Event, n.Page))
		}
		Expect(last).To(ConsistOf("Complete page 1", "MemberReached page 2", "MemberReached page 3"))

		cb := deploy.Callbacks()
		Expect(cb).To(HaveLen(1))
		Expect(cb[0]).To(And(HaveField("Outcome", "Complete"), HaveField("RolloutID", "deploy-1001")))

		Eventually(func(gm Gomega) {
			ns := notifications(ctx, g)
			gm.Expect(ns).NotTo(BeNil())
			gm.Expect(meta.IsStatusConditionTrue(ns.Conditions, v1alpha1.ConditionNotificationsDelivered)).To(BeTrue())
			gm.Expect(ns.Events).To(BeEmpty())
			gm.Expect(ns.Callbacks).To(ConsistOf(HaveField("Delivered", true)))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		Expect(g.eventReasons(ctx)).To(HaveKey("NotificationFailed"))
		Expect(g.eventReasons(ctx)).To(HaveKey("CallbackSent"))
		delivered := g.operatorMetric(second, "echelon_notifications_total", map[string]string{"receiver": "hook", "event": "Complete", "result": "delivered"})
		Expect(delivered).To(Equal(1.0), "the new process counts what it delivered")
	})

	It("calls back a failed rollout, then retries it when spec.rolloutId changes and calls back its completion with the new id", func(ctx SpecContext) {
		g, p, mon, deploy := failedRolloutCalledBack(ctx, nil)
		Eventually(func() []receiver.Request { return deploy.Accepted() }).WithTimeout(30 * time.Second).Should(HaveLen(1))
		Expect(deploy.Callbacks()[0]).To(And(HaveField("Outcome", "Failed"), HaveField("RolloutID", "deploy-1")))

		p.flip(ctx, "ingester-zone-b", 0)
		g.updateSpec(ctx, func(s *v1alpha1.RolloutGroupSpec) { s.RolloutID = "deploy-2" })
		rg := g.waitComplete(ctx, time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(rg.Status.RolloutID).To(Equal("deploy-2"))
		Expect(g.eventsOf(ctx, "RetryRequested")).To(ConsistOf(ContainSubstring("spec.rolloutId=deploy-2")))
		Eventually(func() []receiver.Request { return deploy.Accepted() }).WithTimeout(30 * time.Second).Should(HaveLen(2))
		cb := deploy.Callbacks()
		Expect(cb[1]).To(And(HaveField("Outcome", "Complete"), HaveField("RolloutID", "deploy-2")))
		Expect(cb[1].DeliveryID).NotTo(Equal(cb[0].DeliveryID))
		Consistently(func() int { return len(deploy.Requests()) }).WithTimeout(2*time.Second).Should(Equal(2), "each outcome is called back once")
	})

	It("reports a missing Secret and a hanging receiver in a condition and Events, and the rollout completes anyway", func(ctx SpecContext) {
		g := newZones(ctx, 3)
		grantNotificationSecrets(ctx, g.ns)
		hang := startReceiver(ctx, g.ns, "slow-hook")
		hang.Hang(10 * time.Second)
		g.createStatefulSets(ctx, nil)
		g.waitPodsOn(ctx, "v1")
		g.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) {
			s.Notifications = []v1alpha1.NotificationReceiver{
				{Name: "chat", SecretRef: v1alpha1.LocalSecretReference{Name: "no-such-secret"}, Format: v1alpha1.NotificationFormatSlack},
				{Name: "slow", SecretRef: v1alpha1.LocalSecretReference{Name: "slow-hook"}, Timeout: &metav1.Duration{Duration: time.Second}},
			}
		})
		op := startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		g.waitComplete(ctx, 2*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)

		Eventually(func(gm Gomega) {
			c := meta.FindStatusCondition(notifications(ctx, g).Conditions, v1alpha1.ConditionNotificationsDelivered)
			gm.Expect(c).NotTo(BeNil())
			gm.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			gm.Expect(c.Reason).To(Equal(v1alpha1.ReasonSecretUnreadable))
			gm.Expect(c.Message).To(And(ContainSubstring("receiver chat"), ContainSubstring("spec.notifications[chat].secretRef"),
				ContainSubstring("Secret no-such-secret not found")))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		// The slow receiver's first attempt fails only when its 1 s timeout
		// ends, which may come after the rollout (1 s on kwok) completes.
		Eventually(func(gm Gomega) {
			ns := notifications(ctx, g)
			gm.Expect(ns.Receivers).To(HaveLen(2))
			gm.Expect(ns.Receivers[1]).To(And(HaveField("Name", "slow"), HaveField("Reason", v1alpha1.ReasonDeliveryFailing),
				HaveField("LastError", ContainSubstring("spec.notifications[slow]: no answer within 1s"))))
		}).WithTimeout(30 * time.Second).Should(Succeed())
		// Events are recorded asynchronously: they may trail the status.
		Eventually(func() []string { return g.eventsOf(ctx, "NotificationFailed") }).WithTimeout(30 * time.Second).Should(ContainElements(
			ContainSubstring("spec.notifications[chat].secretRef"), ContainSubstring("spec.notifications[slow]: no answer within 1s")))
		Expect(strings.Join(g.eventsOf(ctx, "NotificationFailed"), "\n")).NotTo(ContainSubstring(hang.URL), "the URL, a credential, is never shown")
		Expect(g.operatorMetric(op, "echelon_notifications_total", map[string]string{"receiver": "slow", "event": "Started", "result": "failed"})).To(BeNumerically(">", 0))
	})
})
