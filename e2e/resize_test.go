package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/receiver"
	"github.com/echelon-operator/echelon/test/storagestub"
)

// resizeTimeout bounds a three-zone resize of a few claims each.
const resizeTimeout = 2 * time.Minute

// resizeHoldFinalizer keeps a StatefulSet's orphaning delete from finishing, so
// that a spec can stop the operator between the delete and the create.
const resizeHoldFinalizer = "e2e.echelon.dev/hold"

// resizeGroup is a three-zone group whose pods each have a claim "data" of
// 1Gi in a StorageClass the stand-in driver serves.
type resizeGroup struct {
	*zoneGroup
	driver *storagestub.Driver
	class  string
	op     *framework.Operator
	mon    *framework.Monitor
	hook   *receiver.Receiver
}

type resizeOptions struct {
	offline    bool
	expandable bool
	delay      time.Duration
	// webhooks runs the operator with its webhooks registered (the
	// eviction webhook judges drains); without, the operator may be killed
	// without its fail-closed webhooks refusing the StatefulSet updates the
	// garbage collector makes meanwhile.
	webhooks bool
	// notify gives the group a receiver of its notifications.
	notify bool
}

// withClaims is a StatefulSet mutation adding the "data" template.
func withClaims(class string, offline bool) func(*appsv1.StatefulSet) {
	return func(sts *appsv1.StatefulSet) {
		w := builders.MakeStatefulSet(sts.Namespace, sts.Name).VolumeClaimTemplate("data", "1Gi", class).Obj()
		t := w.Spec.VolumeClaimTemplates[0]
		if offline {
			t.Annotations = map[string]string{storagestub.AnnotationOffline: "true"}
		}
		sts.Spec.VolumeClaimTemplates = append(sts.Spec.VolumeClaimTemplates, t)
	}
}

var _ = Describe("Volume resize", func() {
	It("grows three zones' claims online, zone by zone, and replaces each StatefulSet without deleting a pod", func(ctx SpecContext) {
		r := startResizeGroup(ctx, 2, resizeOptions{expandable: true, delay: 300 * time.Millisecond, webhooks: true})
		before := r.podUIDs(ctx)
		stsBefore := r.statefulSetUIDs(ctx)

		start := time.Now()
		r.askSize(ctx, "2Gi")
		st := r.waitResize(ctx, v1alpha1.VolumeResizeComplete)
		AddReportEntry("three zones of 2 claims resized online in", time.Since(start).String())

		Expect(r.mon.Deletions()).To(BeEmpty(), "no pod was deleted by the resize")
		expectNoBreaches(r.mon)
		Expect(r.podUIDs(ctx)).To(Equal(before), "every pod is the one it was: adopted again, not restarted")
		r.expectReplaced(ctx, stsBefore, "2Gi")
		r.expectClaims(ctx, "2Gi", int(2*3))
		Expect(st.Zones).To(HaveLen(3))
		for _, z := range st.Zones {
			Expect(z.Phase).To(Equal(v1alpha1.ZoneVolumeComplete))
			for _, c := range z.Claims {
				Expect(c.Phase).To(Equal(v1alpha1.ClaimResized), "claim %s", c.Name)
			}
		}
		Expect(r.eventNotes(ctx, v1alpha1.ReasonZoneResized)).To(HaveLen(3))
		Expect(r.eventNotes(ctx, v1alpha1.ReasonVolumeResizeComplete)).To(HaveLen(1))
		r.expectZoneOrder(ctx)

		By("a new replica gets the new size")
		r.scale(ctx, r.zones[0], 3)
		Eventually(func(g Gomega) {
			pvc := &corev1.PersistentVolumeClaim{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: "data-" + r.zones[0] + "-2"}, pvc)).To(Succeed())
			g.Expect(pvc.Spec.Resources.Requests.Storage().String()).To(Equal("2Gi"))
		}).WithContext(ctx).Should(Succeed())
	})

	It("restarts the pods of claims that grow offline through the budget, one zone at a time", func(ctx SpecContext) {
		r := startResizeGroup(ctx, 2, resizeOptions{expandable: true, offline: true, delay: 300 * time.Millisecond, webhooks: true, notify: true})
		stsBefore := r.statefulSetUIDs(ctx)
		r.askSize(ctx, "2Gi")
		r.waitResize(ctx, v1alpha1.VolumeResizeComplete)

		expectNoBreaches(r.mon)
		Expect(r.mon.Deletions()).To(HaveLen(2*3), "each pod was restarted once, for its filesystem to grow")
		Expect(r.mon.MemberOrder()).To(Equal(r.zones), "zone after zone, in the group's order")
		r.expectReplaced(ctx, stsBefore, "2Gi")
		r.expectClaims(ctx, "2Gi", 2*3)
		Expect(r.eventNotes(ctx, v1alpha1.ReasonResizeRestart)).NotTo(BeEmpty())
		Eventually(r.hook.Events).WithTimeout(30*time.Second).Should(Equal([]string{"VolumeResizeStarted",
			"VolumeResizeZoneDone", "VolumeResizeZoneDone", "VolumeResizeZoneDone", "VolumeResizeComplete"}), "the receiver is told the start, each zone and the end")
	})

	It("creates the StatefulSet again when the operator is killed between the orphaning delete and the create", func(ctx SpecContext) {
		r := startResizeGroup(ctx, 2, resizeOptions{expandable: true, delay: 300 * time.Millisecond})
		before := r.podUIDs(ctx)
		stsBefore := r.statefulSetUIDs(ctx)
		zoneB := r.zones[1]
		patchStatefulSet(ctx, r.ns, zoneB, fmt.Sprintf(`{"metadata":{"finalizers":[%q]}}`, resizeHoldFinalizer))

		r.askSize(ctx, "2Gi")
		By("the operator records zone-b's StatefulSet and deletes it; the finalizer holds the delete")
		Eventually(func(g Gomega) {
			st := r.get(ctx).Status.VolumeResize
			g.Expect(st).NotTo(BeNil())
			g.Expect(st.Recreate).NotTo(BeNil())
			g.Expect(st.Recreate.Name).To(Equal(zoneB))
			sts := &appsv1.StatefulSet{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: zoneB}, sts)).To(Succeed())
			g.Expect(sts.DeletionTimestamp).NotTo(BeNil())
		}).WithContext(ctx).WithTimeout(resizeTimeout).Should(Succeed())
		r.op.Kill()
		<-r.op.Exited()

		By("the delete finishes with no operator running: the pods are orphaned")
		patchStatefulSet(ctx, r.ns, zoneB, `{"metadata":{"finalizers":null}}`)
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: zoneB}, &appsv1.StatefulSet{}))
		}).WithContext(ctx).Should(BeTrue())

		By("a new operator takes over and creates it again from status")
		startOperator(ctx, "echelon-2", r.ns, fastLeaderElection...)
		r.waitResize(ctx, v1alpha1.VolumeResizeComplete)
		Expect(r.mon.Deletions()).To(BeEmpty(), "no pod was deleted")
		expectNoBreaches(r.mon)
		Expect(r.podUIDs(ctx)).To(Equal(before), "zone-b's pods were adopted again, untouched")
		r.expectReplaced(ctx, stsBefore, "2Gi")
	})

	It("refuses a class that cannot expand before touching anything, and a shrink at admission", func(ctx SpecContext) {
		r := startResizeGroup(ctx, 2, resizeOptions{expandable: false})
		stsBefore := r.statefulSetUIDs(ctx)
		r.askSize(ctx, "2Gi")
		st := r.waitResize(ctx, v1alpha1.VolumeResizeBlocked)
		Expect(st.Message).To(ContainSubstring("StorageClass " + r.class))
		Expect(st.Message).To(ContainSubstring("allowVolumeExpansion"))
		Expect(r.eventNotes(ctx, v1alpha1.ReasonVolumeResizeBlocked)).NotTo(BeEmpty())
		Consistently(func(g Gomega) {
			r.expectClaimsIn(g, ctx, "1Gi")
		}).WithContext(ctx).WithTimeout(3 * time.Second).Should(Succeed())
		Expect(r.statefulSetUIDs(ctx)).To(Equal(stsBefore), "no StatefulSet was replaced")

		By("a smaller size is refused by the API server, naming the field")
		rg := r.get(ctx)
		rg.Spec.VolumeClaimSizes[0].Size = "1Gi"
		err := k8s.Update(ctx, rg)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("spec.volumeClaimSizes[].size may only grow"))
		Expect(r.mon.Deletions()).To(BeEmpty())
	})

	It("holds a rollout that begins during a resize until every zone is resized", func(ctx SpecContext) {
		r := startResizeGroup(ctx, 2, resizeOptions{expandable: true, delay: 3 * time.Second, webhooks: true})
		r.askSize(ctx, "2Gi")
		r.waitHeld(ctx, r.zones[0])

		By("a new version waits for the resize, naming it")
		r.setVersion(ctx, "v2")
		Eventually(func() string { return r.get(ctx).Status.Message }).WithContext(ctx).WithTimeout(30 * time.Second).
			Should(ContainSubstring("being resized"))
		Expect(r.mon.Rolls()).To(BeEmpty(), "no pod rolled while a zone is resized")

		r.waitResize(ctx, v1alpha1.VolumeResizeComplete)
		last := &appsv1.StatefulSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: r.zones[2]}, last)).To(Succeed())
		r.waitComplete(ctx, 2*time.Minute)
		r.waitPodsOn(ctx, "v2")
		expectNoBreaches(r.mon)
		rolls := r.mon.Rolls()
		Expect(rolls).To(HaveLen(2 * 3))
		for _, d := range rolls {
			Expect(d.At).NotTo(BeTemporally("<", last.CreationTimestamp.Time), "pod %s rolled before the last zone was replaced", d.Pod)
		}
	})

	It("holds a drain of another zone while a zone is being resized", func(ctx SpecContext) {
		r := startResizeGroup(ctx, 2, resizeOptions{expandable: true, delay: 4 * time.Second, webhooks: true})
		r.askSize(ctx, "2Gi")
		r.waitHeld(ctx, r.zones[0])

		By("an eviction in zone-b is refused while zone-a is resized")
		err := evict(ctx, r.ns, r.zones[1]+"-0", false)
		Expect(err).To(HaveOccurred())
		Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "refused with 429 as a PodDisruptionBudget would: %v", err)
		Expect(err.Error()).To(ContainSubstring("being resized"))

		r.waitResize(ctx, v1alpha1.VolumeResizeComplete)
		By("once the resize is done, the eviction is allowed")
		Eventually(func() error { return evict(ctx, r.ns, r.zones[1]+"-0", false) }).WithContext(ctx).Should(Succeed())
		Eventually(r.mon.Deletions).Should(HaveLen(1))
		expectNoBreaches(r.mon)
	})
})

// startResizeGroup makes the group, its claims and the stand-in driver,
// starts the operator with its webhooks, and the pod monitor.
func startResizeGroup(ctx context.Context, replicas int32, o resizeOptions) *resizeGroup {
	GinkgoHelper()
	g := newZones(ctx, replicas)
	r := &resizeGroup{zoneGroup: g, class: "stub-" + g.ns}
	driver, err := storagestub.Start(context.WithoutCancel(ctx), k8s, storagestub.Options{Namespace: g.ns, Class: r.class, Expandable: o.expandable, Delay: o.delay})
	Expect(err).NotTo(HaveOccurred())
	r.driver = driver
	DeferCleanup(func(ctx SpecContext) { driver.Stop(ctx) })
	g.createStatefulSets(ctx, withClaims(r.class, o.offline))
	g.waitPodsOn(ctx, "v1")
	var mutate func(*v1alpha1.RolloutGroupSpec)
	if o.notify {
		grantNotificationSecrets(ctx, g.ns)
		r.hook = startReceiver(ctx, g.ns, "resize-hook")
		mutate = func(s *v1alpha1.RolloutGroupSpec) {
			s.Notifications = []v1alpha1.NotificationReceiver{{Name: "hook", SecretRef: v1alpha1.LocalSecretReference{Name: "resize-hook"}}}
		}
	}
	g.createGroup(ctx, mutate)
	if o.webhooks {
		r.op = startWebhookOperator(ctx, "echelon", g.ns, fastLeaderElection...).Operator
	} else {
		r.op = startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
	}
	g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
	r.mon = g.monitor(ctx)
	r.mon.JudgeEveryMoment()
	return r
}

func (r *resizeGroup) askSize(ctx context.Context, size string) {
	GinkgoHelper()
	r.updateSpec(ctx, func(s *v1alpha1.RolloutGroupSpec) {
		s.VolumeClaimSizes = []v1alpha1.VolumeClaimSize{{Name: "data", Size: size}}
	})
}

// waitHeld waits until the resize is at zone and holds the group's budget.
func (r *resizeGroup) waitHeld(ctx context.Context, zone string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		rg := r.get(ctx)
		g.Expect(rg.Status.VolumeResize).NotTo(BeNil())
		g.Expect(rg.Status.VolumeResize.CurrentZone).To(Equal(zone))
		g.Expect(rg.Status.Disruption).NotTo(BeNil())
	}).WithContext(ctx).WithTimeout(resizeTimeout).Should(Succeed())
}

func (r *resizeGroup) waitResize(ctx context.Context, phase v1alpha1.VolumeResizePhase) *v1alpha1.VolumeResizeStatus {
	GinkgoHelper()
	var st *v1alpha1.VolumeResizeStatus
	Eventually(func(g Gomega) {
		st = r.get(ctx).Status.VolumeResize
		g.Expect(st).NotTo(BeNil())
		g.Expect(st.Phase).To(Equal(phase), "message: %s", st.Message)
	}).WithContext(ctx).WithTimeout(resizeTimeout).Should(Succeed())
	return st
}

func (r *resizeGroup) podUIDs(ctx context.Context) map[string]types.UID {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(r.ns))).To(Succeed())
	out := map[string]types.UID{}
	for _, p := range pods.Items {
		out[p.Name] = p.UID
	}
	return out
}

func (r *resizeGroup) statefulSetUIDs(ctx context.Context) map[string]types.UID {
	GinkgoHelper()
	out := map[string]types.UID{}
	for _, z := range r.zones {
		sts := &appsv1.StatefulSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: z}, sts)).To(Succeed())
		out[z] = sts.UID
	}
	return out
}

// expectReplaced checks each zone's StatefulSet is a new object asking for
// size, its labels kept, its pods adopted by it.
func (r *resizeGroup) expectReplaced(ctx context.Context, before map[string]types.UID, size string) {
	GinkgoHelper()
	for _, z := range r.zones {
		Eventually(func(g Gomega) {
			sts := &appsv1.StatefulSet{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: z}, sts)).To(Succeed())
			g.Expect(sts.UID).NotTo(Equal(before[z]), "%s was replaced", z)
			g.Expect(sts.Labels).To(HaveKeyWithValue("echelon.dev/e2e-group", "yes"))
			g.Expect(sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String()).To(Equal(size))
			var pods corev1.PodList
			g.Expect(k8s.List(ctx, &pods, client.InNamespace(r.ns), client.MatchingLabels(sts.Spec.Selector.MatchLabels))).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			for _, p := range pods.Items {
				owner := p.OwnerReferences
				g.Expect(owner).To(HaveLen(1))
				g.Expect(owner[0].UID).To(Equal(sts.UID), "pod %s adopted by the new %s", p.Name, z)
			}
		}).WithContext(ctx).Should(Succeed())
	}
}

func (r *resizeGroup) expectClaims(ctx context.Context, size string, n int) {
	GinkgoHelper()
	var claims corev1.PersistentVolumeClaimList
	Expect(k8s.List(ctx, &claims, client.InNamespace(r.ns))).To(Succeed())
	Expect(claims.Items).To(HaveLen(n))
	Eventually(func(g Gomega) { r.expectClaimsIn(g, ctx, size) }).WithContext(ctx).Should(Succeed())
}

func (r *resizeGroup) expectClaimsIn(g Gomega, ctx context.Context, size string) {
	var claims corev1.PersistentVolumeClaimList
	g.Expect(k8s.List(ctx, &claims, client.InNamespace(r.ns))).To(Succeed())
	for _, c := range claims.Items {
		g.Expect(c.Spec.Resources.Requests.Storage().String()).To(Equal(size), "claim %s requests", c.Name)
		g.Expect(c.Status.Capacity.Storage().String()).To(Equal(size), "claim %s capacity", c.Name)
	}
}

// expectZoneOrder checks the zones were replaced in the group's order.
func (r *resizeGroup) expectZoneOrder(ctx context.Context) {
	GinkgoHelper()
	var created []time.Time
	for _, z := range r.zones {
		sts := &appsv1.StatefulSet{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: r.ns, Name: z}, sts)).To(Succeed())
		created = append(created, sts.CreationTimestamp.Time)
	}
	for i := 1; i < len(created); i++ {
		Expect(created[i].Before(created[i-1])).To(BeFalse(), "%s replaced before %s", r.zones[i], r.zones[i-1])
	}
}
