package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
)

// fastLeaderElection keeps take-overs after a SIGKILL to a few seconds.
var fastLeaderElection = []string{
	"--leader-elect=true",
	"--leader-elect-lease-duration=4s",
	"--leader-elect-renew-deadline=3s",
	"--leader-elect-retry-period=500ms",
}

// zoneGroup is a namespace with one OnDelete StatefulSet per zone, all Ready, and
// a RolloutGroup over them.
type zoneGroup struct {
	ns       string
	name     string
	zones    []string
	replicas int32
}

// newZoneGroup creates the StatefulSets (version v1), waits until every pod is
// Ready, then creates the RolloutGroup with spec edited by mutate.
func newZoneGroup(ctx context.Context, replicas int32, mutate func(*v1alpha1.RolloutGroupSpec)) *zoneGroup {
	GinkgoHelper()
	g := &zoneGroup{ns: newNamespace(ctx), name: "ingester", replicas: replicas,
		zones: []string{"ingester-zone-a", "ingester-zone-b", "ingester-zone-c"}}
	for _, z := range g.zones {
		Expect(k8s.Create(ctx, newStatefulSet(g.ns, z, replicas, "v1"))).To(Succeed())
	}
	g.waitPodsOn(ctx, "v1")
	spec := v1alpha1.RolloutGroupSpec{}
	for _, z := range g.zones {
		spec.StatefulSets = append(spec.StatefulSets, v1alpha1.RolloutMember{Name: z})
	}
	if mutate != nil {
		mutate(&spec)
	}
	Expect(k8s.Create(ctx, &v1alpha1.RolloutGroup{
		ObjectMeta: metav1.ObjectMeta{Name: g.name, Namespace: g.ns},
		Spec:       spec,
	})).To(Succeed())
	return g
}

// monitor starts a pod monitor for the group and waits until it checks.
func (g *zoneGroup) monitor(ctx context.Context) *framework.Monitor {
	GinkgoHelper()
	rg := g.get(ctx)
	var members []framework.WatchedMember
	for _, m := range rg.Spec.StatefulSets {
		limit := intstr.FromInt32(1)
		if rg.Spec.MaxUnavailable != nil {
			limit = *rg.Spec.MaxUnavailable
		}
		if m.MaxUnavailable != nil {
			limit = *m.MaxUnavailable
		}
		members = append(members, framework.WatchedMember{
			Name: m.Name, Replicas: int(g.replicas), MaxUnavailable: framework.MaxUnavailableOf(limit, int(g.replicas)),
		})
	}
	mon, err := framework.StartMonitor(ctx, clientset, g.ns, members)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(mon.Stop)
	Eventually(mon.Armed).Should(BeTrue(), "every pod of every member must be Ready before the rollout")
	return mon
}

func (g *zoneGroup) get(ctx context.Context) *v1alpha1.RolloutGroup {
	GinkgoHelper()
	rg := &v1alpha1.RolloutGroup{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: g.name}, rg)).To(Succeed())
	return rg
}

// setVersion changes the pod template of the named zones (all when none given).
func (g *zoneGroup) setVersion(ctx context.Context, version string, zones ...string) {
	GinkgoHelper()
	if len(zones) == 0 {
		zones = g.zones
	}
	for _, z := range zones {
		patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, versionAnnotation, version)
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: z}}
		Expect(k8s.Patch(ctx, sts, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
	}
}

// patchSpec merge-patches the group's spec.
func (g *zoneGroup) patchSpec(ctx context.Context, spec string) {
	GinkgoHelper()
	rg := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: g.name}}
	Expect(k8s.Patch(ctx, rg, client.RawPatch("application/merge-patch+json", []byte(`{"spec":`+spec+`}`)))).To(Succeed())
}

// waitPhase waits until the group reports phase for its current generation.
func (g *zoneGroup) waitPhase(ctx context.Context, phase v1alpha1.RolloutPhase, timeout time.Duration) *v1alpha1.RolloutGroup {
	GinkgoHelper()
	var rg *v1alpha1.RolloutGroup
	Eventually(func(gm Gomega) {
		rg = &v1alpha1.RolloutGroup{}
		gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: g.name}, rg)).To(Succeed())
		gm.Expect(rg.Status.ObservedGeneration).To(Equal(rg.Generation))
		gm.Expect(rg.Status.Phase).To(Equal(phase), "message: %s", rg.Status.Message)
	}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
	return rg
}

// waitComplete waits until the group reports Complete for the StatefulSets'
// current update revisions, so that a Complete left over from before a template
// change does not count.
func (g *zoneGroup) waitComplete(ctx context.Context, timeout time.Duration) *v1alpha1.RolloutGroup {
	GinkgoHelper()
	var rg *v1alpha1.RolloutGroup
	Eventually(func(gm Gomega) {
		rg = &v1alpha1.RolloutGroup{}
		gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: g.name}, rg)).To(Succeed())
		gm.Expect(rg.Status.ObservedGeneration).To(Equal(rg.Generation))
		gm.Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseComplete), "message: %s", rg.Status.Message)
		gm.Expect(rg.Status.StatefulSets).To(HaveLen(len(g.zones)))
		for _, m := range rg.Status.StatefulSets {
			sts := &appsv1.StatefulSet{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: m.Name}, sts)).To(Succeed())
			gm.Expect(sts.Status.ObservedGeneration).To(Equal(sts.Generation))
			gm.Expect(m.UpdateRevision).To(Equal(sts.Status.UpdateRevision), "member %s", m.Name)
		}
	}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
	return rg
}

// waitPodsOn waits until every pod of every zone runs version, is Ready, and is
// on its StatefulSet's update revision.
func (g *zoneGroup) waitPodsOn(ctx context.Context, version string) {
	GinkgoHelper()
	Eventually(func(gm Gomega) {
		for _, z := range g.zones {
			sts := &appsv1.StatefulSet{}
			gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: z}, sts)).To(Succeed())
			var pods corev1.PodList
			gm.Expect(k8s.List(ctx, &pods, client.InNamespace(g.ns), client.MatchingLabels{"app": z})).To(Succeed())
			ready := 0
			for _, p := range pods.Items {
				gm.Expect(p.Annotations[versionAnnotation]).To(Equal(version), "pod %s", p.Name)
				gm.Expect(p.Labels[appsv1.ControllerRevisionHashLabelKey]).To(Equal(sts.Status.UpdateRevision), "pod %s", p.Name)
				if p.DeletionTimestamp == nil && isReady(&p) {
					ready++
				}
			}
			gm.Expect(ready).To(Equal(int(g.replicas)), "ready pods of %s", z)
		}
	}).WithContext(ctx).WithTimeout(3 * time.Minute).Should(Succeed())
}

// setPodReady flips the Ready condition of a running pod, as a failing readiness
// probe would. kwok leaves Running pods' conditions alone, so it sticks.
func (g *zoneGroup) setPodReady(ctx context.Context, pod string, ready bool) {
	GinkgoHelper()
	status := corev1.ConditionTrue
	if !ready {
		status = corev1.ConditionFalse
	}
	p := &corev1.Pod{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: pod}, p)).To(Succeed())
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == corev1.PodReady || p.Status.Conditions[i].Type == corev1.ContainersReady {
			p.Status.Conditions[i].Status = status
			p.Status.Conditions[i].LastTransitionTime = metav1.Now()
		}
	}
	Expect(k8s.Status().Update(ctx, p)).To(Succeed())
}

func isReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// expectNoBreaches fails with every breach the monitor recorded.
func expectNoBreaches(mon *framework.Monitor) {
	GinkgoHelper()
	if forced := mon.ForcedDeletions(); len(forced) > 0 {
		fmt.Fprintf(GinkgoWriter, "pods force-deleted by someone else, left out of the checks: %v\n", forced)
	}
	Expect(mon.Breaches()).To(BeEmpty(), "the guarantees were breached during the rollout")
}

// eventReasons lists the reasons of the Events recorded on the group.
func (g *zoneGroup) eventReasons(ctx context.Context) map[string]int {
	GinkgoHelper()
	var events corev1.EventList
	Expect(k8s.List(ctx, &events, client.InNamespace(g.ns))).To(Succeed())
	reasons := map[string]int{}
	for _, e := range events.Items {
		if e.InvolvedObject.Kind == "RolloutGroup" && e.InvolvedObject.Name == g.name {
			reasons[e.Reason]++
		}
	}
	return reasons
}

// patchStatefulSet merge-patches a StatefulSet.
func patchStatefulSet(ctx context.Context, ns, name, patch string) {
	GinkgoHelper()
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(k8s.Patch(ctx, sts, client.RawPatch("application/merge-patch+json", []byte(patch)))).To(Succeed())
}

// parseDuration turns "-5s" into a metav1.Duration, which serializes back to the
// same text, so the API server sees exactly what a user would write.
func parseDuration(s string) (*metav1.Duration, error) {
	d, err := time.ParseDuration(s)
	if err != nil {
		return nil, err
	}
	return &metav1.Duration{Duration: d}, nil
}
