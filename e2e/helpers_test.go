package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/builders"
)

// fastLeaderElection keeps take-overs after a SIGKILL to a few seconds.
var fastLeaderElection = []string{
	"--leader-elect=true",
	"--leader-elect-lease-duration=4s",
	"--leader-elect-renew-deadline=3s",
	"--leader-elect-retry-period=500ms",
}

// zoneGroup is a namespace with one OnDelete StatefulSet per zone and a
// RolloutGroup over them.
type zoneGroup struct {
	ns       string
	name     string
	zones    []string
	replicas int32
	// scaled holds the replicas of zones scaled since creation.
	scaled map[string]int32
	// mon is the group's monitor, once started, told of every scale.
	mon *framework.Monitor
}

// newZones is a fresh namespace for a group of three zones of replicas pods
// each; nothing is created in it yet.
func newZones(ctx context.Context, replicas int32) *zoneGroup {
	GinkgoHelper()
	return &zoneGroup{ns: newNamespace(ctx), name: "ingester", replicas: replicas, scaled: map[string]int32{},
		zones: []string{"ingester-zone-a", "ingester-zone-b", "ingester-zone-c"}}
}

// newZoneGroup creates the StatefulSets (version v1), waits until every pod is
// Ready, then creates the RolloutGroup with spec edited by mutate.
func newZoneGroup(ctx context.Context, replicas int32, mutate func(*v1alpha1.RolloutGroupSpec)) *zoneGroup {
	GinkgoHelper()
	g := newZones(ctx, replicas)
	g.createStatefulSets(ctx, nil)
	g.waitPodsOn(ctx, "v1")
	g.createGroup(ctx, mutate)
	return g
}

// createStatefulSets creates one StatefulSet per zone on version v1, edited by
// mutate when given.
func (g *zoneGroup) createStatefulSets(ctx context.Context, mutate func(*appsv1.StatefulSet)) {
	GinkgoHelper()
	for _, z := range g.zones {
		sts := zoneStatefulSet(g.ns, z, g.replicas, "v1").Obj()
		if mutate != nil {
			mutate(sts)
		}
		Expect(k8s.Create(ctx, sts)).To(Succeed())
	}
}

// createGroup creates the RolloutGroup over the zones, in list order, with spec
// edited by mutate when given.
func (g *zoneGroup) createGroup(ctx context.Context, mutate func(*v1alpha1.RolloutGroupSpec)) {
	GinkgoHelper()
	rg := builders.MakeRolloutGroup(g.ns, g.name).Members(g.zones...).Obj()
	if mutate != nil {
		mutate(&rg.Spec)
	}
	Expect(k8s.Create(ctx, rg)).To(Succeed())
}

// replicasOf is the number of pods zone wants now.
func (g *zoneGroup) replicasOf(zone string) int32 {
	if n, ok := g.scaled[zone]; ok {
		return n
	}
	return g.replicas
}

// scale sets the replicas of zone, telling the monitor first so that it never
// takes a pod the scale-down removes for a rolled one.
func (g *zoneGroup) scale(ctx context.Context, zone string, replicas int32) {
	GinkgoHelper()
	g.scaled[zone] = replicas
	if g.mon != nil {
		g.mon.SetReplicas(zone, int(replicas))
	}
	patchStatefulSet(ctx, g.ns, zone, fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
}

// monitor starts a pod monitor for the group and waits until it judges rolls.
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
		members = append(members, framework.WatchedMember{Name: m.Name, Replicas: int(g.replicasOf(m.Name)), MaxUnavailable: limit})
	}
	mon, err := framework.StartMonitor(ctx, clientset, g.ns, members)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(mon.Stop)
	Eventually(mon.Armed).Should(BeTrue(), "every pod of every member must be Ready before the rollout")
	g.mon = mon
	return mon
}

func (g *zoneGroup) get(ctx context.Context) *v1alpha1.RolloutGroup {
	GinkgoHelper()
	rg := &v1alpha1.RolloutGroup{}
	Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: g.name}, rg)).To(Succeed())
	return rg
}

// setVersion changes the pod template of the named zones (all when none given).
// The patches go out together, so that the change of several zones reaches the
// API server as nearly at once as a `kubectl apply` of them would.
func (g *zoneGroup) setVersion(ctx context.Context, version string, zones ...string) {
	GinkgoHelper()
	g.patchTemplates(ctx, fmt.Sprintf(`{%q:%q}`, versionAnnotation, version), zones...)
}

// patchTemplates merge-patches the pod template annotations (a JSON object)
// of the named zones (all when none given), all patches at once.
func (g *zoneGroup) patchTemplates(ctx context.Context, annotations string, zones ...string) {
	GinkgoHelper()
	if len(zones) == 0 {
		zones = g.zones
	}
	errs := make([]error, len(zones))
	var wg sync.WaitGroup
	for i, z := range zones {
		wg.Go(func() {
			patch := `{"spec":{"template":{"metadata":{"annotations":` + annotations + `}}}}`
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: z}}
			errs[i] = k8s.Patch(ctx, sts, client.RawPatch(types.MergePatchType, []byte(patch)))
		})
	}
	wg.Wait()
	for i, err := range errs {
		Expect(err).NotTo(HaveOccurred(), "patch the template of %s", zones[i])
	}
}

// patchSpec merge-patches the group's spec.
func (g *zoneGroup) patchSpec(ctx context.Context, spec string) {
	GinkgoHelper()
	rg := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: g.name}}
	Expect(k8s.Patch(ctx, rg, client.RawPatch(types.MergePatchType, []byte(`{"spec":`+spec+`}`)))).To(Succeed())
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
// on its StatefulSet's update revision, and no other pod is left.
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
			gm.Expect(pods.Items).To(HaveLen(int(g.replicasOf(z))), "pods of %s", z)
			gm.Expect(ready).To(Equal(int(g.replicasOf(z))), "ready pods of %s", z)
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

// expectNoBreaches fails with every breach the monitor recorded, and when a pod
// vanished without terminating: someone other than Echelon then disrupted the
// group, so the rolls around it were judged on a group the spec did not set up.
func expectNoBreaches(mon *framework.Monitor) {
	GinkgoHelper()
	Expect(mon.Breaches()).To(BeEmpty(), "the guarantees were breached during the rollout")
	Expect(mon.ForcedDeletions()).To(BeEmpty(),
		"pods vanished without terminating first: force-deleted by someone other than Echelon, which deletes gracefully")
}

// podsNamedIn lists the pods PodsRolled Events' notes name ("...: pod-0
// (rev), pod-1 (rev)"), once each.
func podsNamedIn(notes []string) []string {
	var out []string
	for _, note := range notes {
		list := note
		if i := strings.LastIndex(note, ": "); i >= 0 {
			list = note[i+2:]
		}
		for _, entry := range strings.Split(list, ", ") {
			if name, _, ok := strings.Cut(entry, " ("); ok && !slices.Contains(out, name) {
				out = append(out, name)
			}
		}
	}
	return out
}

// events lists the Events recorded on the group.
func (g *zoneGroup) events(ctx context.Context) []corev1.Event {
	GinkgoHelper()
	return settledEvents(ctx, g.ns, func(e corev1.Event) bool {
		return e.InvolvedObject.Kind == "RolloutGroup" && e.InvolvedObject.Name == g.name
	})
}

// settledEvents lists the Events of ns that match. The operator records
// Events asynchronously, so those of its last pass may reach the API server
// after the status a spec waited for: the list is read again until it has not
// changed for eventsSettle (at most eventsSettleMax).
func settledEvents(ctx context.Context, ns string, match func(corev1.Event) bool) []corev1.Event {
	GinkgoHelper()
	const eventsSettle, eventsSettleMax = 300 * time.Millisecond, 5 * time.Second
	var out []corev1.Event
	var seen string
	stableSince, deadline := time.Now(), time.Now().Add(eventsSettleMax)
	for {
		var events corev1.EventList
		Expect(k8s.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		out = nil
		var sig strings.Builder
		for _, e := range events.Items {
			if match(e) {
				out = append(out, e)
				fmt.Fprintf(&sig, "%s/%s;", e.Name, e.ResourceVersion)
			}
		}
		now := time.Now()
		if sig.String() != seen {
			seen, stableSince = sig.String(), now
		}
		if now.Sub(stableSince) >= eventsSettle || now.After(deadline) {
			return out
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventReasons counts the Events recorded on the group by reason. An Event
// that repeated is one object with a series, so it counts as often as the
// series says.
func (g *zoneGroup) eventReasons(ctx context.Context) map[string]int {
	GinkgoHelper()
	reasons := map[string]int{}
	for _, e := range g.events(ctx) {
		reasons[e.Reason] += occurrences(e)
	}
	return reasons
}

// eventNotes lists the messages of the group's Events of reason, each with
// the UID of the object it relates to, for failure messages.
func (g *zoneGroup) eventNotes(ctx context.Context, reason string) []string {
	GinkgoHelper()
	var notes []string
	for _, e := range g.events(ctx) {
		if e.Reason != reason {
			continue
		}
		related := types.UID("none")
		if e.Related != nil {
			related = e.Related.UID
		}
		notes = append(notes, fmt.Sprintf("%s (x%d, related uid %s): %s",
			e.EventTime.Format(time.StampMicro), occurrences(e), related, e.Message))
	}
	slices.Sort(notes)
	return notes
}

// occurrences is how many times an Event was emitted. The events API records
// a repeat within the same process as a series on the first Event object.
func occurrences(e corev1.Event) int {
	if e.Series != nil && e.Series.Count > 1 {
		return int(e.Series.Count)
	}
	return 1
}

// patchStatefulSet merge-patches a StatefulSet.
func patchStatefulSet(ctx context.Context, ns, name, patch string) {
	GinkgoHelper()
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	Expect(k8s.Patch(ctx, sts, client.RawPatch(types.MergePatchType, []byte(patch)))).To(Succeed())
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

// waitForBatchDone waits until the monitor has seen at least rolled pods rolled
// and member available again: the start of the pause before Echelon's next
// batch, which minReadySeconds stretches. A spec that acts there knows no
// deletion of Echelon's is in flight.
func waitForBatchDone(mon *framework.Monitor, member string, rolled int) {
	GinkgoHelper()
	Eventually(func() int { return len(mon.Rolls()) }).Should(BeNumerically(">=", rolled))
	Eventually(func() bool { return mon.Available(member) }).WithPolling(10*time.Millisecond).Should(BeTrue(),
		"the pods %s rolled become available again", member)
}

// livePodUIDs reads the pods of ns that are not terminating from the API server.
func livePodUIDs(ctx context.Context, ns string) sets.Set[types.UID] {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
	live := sets.New[types.UID]()
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			live.Insert(p.UID)
		}
	}
	return live
}

// deletedOf returns the pods among uids that the monitor has seen deleted.
func deletedOf(mon *framework.Monitor, uids sets.Set[types.UID]) []string {
	var out []string
	for _, d := range mon.Deletions() {
		if uids.Has(d.UID) {
			out = append(out, d.Pod)
		}
	}
	return out
}
