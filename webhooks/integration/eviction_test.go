package integration

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	. "github.com/onsi/gomega/gstruct"
	gomegatypes "github.com/onsi/gomega/types"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/webhooks"
)

// budgetLabel is the label the tests' ZoneDisruptionBudgets select pods by.
const budgetLabel = "echelon.dev/test-budget"

// evictionDenied is how the API server prefixes the eviction webhook's
// refusals.
const evictionDenied = `admission webhook "eviction.echelon.dev" denied the request: `

// zones creates the StatefulSets names (OnDelete, their status as the
// StatefulSet controller would write it: every pod Ready at revision r1) of
// replicas Ready pods each, pods labelled budgetLabel=label when label is
// set, and returns them. A RolloutGroup of them is complete: its controller,
// which runs here, writes its status as it would in a cluster.
func (e *env) zones(t *testing.T, ns, label string, replicas int, names ...string) []*appsv1.StatefulSet {
	t.Helper()
	ctx := context.Background()
	var sets []*appsv1.StatefulSet
	for _, name := range names {
		sts := builders.MakeStatefulSet(ns, name).Replicas(int32(replicas)).OnDelete().Obj()
		if err := e.admin.Create(ctx, sts); err != nil {
			t.Fatal(err)
		}
		sts.Status = appsv1.StatefulSetStatus{ObservedGeneration: sts.Generation, Replicas: int32(replicas), ReadyReplicas: int32(replicas),
			AvailableReplicas: int32(replicas), CurrentReplicas: int32(replicas), UpdatedReplicas: int32(replicas), CurrentRevision: "r1", UpdateRevision: "r1"}
		if err := e.admin.Status().Update(ctx, sts); err != nil {
			t.Fatal(err)
		}
		for i := range replicas {
			pod := builders.MakePod(ns, name, i).FromTemplate(sts.Spec.Template).ControlledBy(sts).Revision("r1")
			if label != "" {
				pod.Label(budgetLabel, label)
			}
			e.createPod(t, pod.Obj())
		}
		sets = append(sets, sts)
	}
	return sets
}

// setReady writes the pod's Ready condition: True since since, or False
// when since is zero, and waits until the operator's cache shows it: an
// eviction reads the other zones' pods from the cache (only the zones that
// matter live), as a PodDisruptionBudget's controller does.
func (e *env) setReady(t *testing.T, ns, name string, ready bool, since time.Time) {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{}
	if err := e.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod); err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(since)}}
	if err := e.admin.Status().Update(ctx, pod); err != nil {
		t.Fatal(err)
	}
	NewWithT(t).Eventually(func() (string, error) {
		cached := &corev1.Pod{}
		err := e.cache.Get(ctx, client.ObjectKeyFromObject(pod), cached)
		return cached.ResourceVersion, err
	}, 10*time.Second, 20*time.Millisecond).Should(Equal(pod.ResourceVersion))
}

// evictor evicts pods of one namespace through the Eviction API, as kubectl
// drain does (client-go's PolicyV1 Evict).
type evictor struct {
	cs *kubernetes.Clientset
	ns string
}

func (e *env) evictor(t *testing.T, ns string) evictor {
	t.Helper()
	cs, err := kubernetes.NewForConfig(e.cp.Config())
	if err != nil {
		t.Fatal(err)
	}
	return evictor{cs: cs, ns: ns}
}

func (v evictor) evict(name string) error {
	return v.cs.PolicyV1().Evictions(v.ns).Evict(context.Background(), &policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: v.ns, Name: name}})
}

// evictDryRun asks as `kubectl drain --dry-run=server` does: the dry run is
// in the Eviction's deleteOptions.
func (v evictor) evictDryRun(name string) error {
	return v.cs.PolicyV1().Evictions(v.ns).Evict(context.Background(), &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Namespace: v.ns, Name: name},
		DeleteOptions: &metav1.DeleteOptions{DryRun: []string{metav1.DryRunAll}},
	})
}

// refused matches a 429 from the eviction webhook whose message holds says.
func refused(says string) OmegaMatcher {
	return And(WithTransform(apierrors.IsTooManyRequests, BeTrue()), MatchError(ContainSubstring(evictionDenied)), MatchError(ContainSubstring(says)))
}

func (e *env) podExists(ns, name string) (bool, error) {
	err := e.admin.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &corev1.Pod{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}

// holdsSeen watches the group's status.disruption from now on and returns
// every hold it showed. The RolloutGroup controller runs in this
// environment, so the test looks for the hold as it was written rather than
// as it is when the test reads it.
func (e *env) holdsSeen(t *testing.T, rg *v1alpha1.RolloutGroup) func() []v1alpha1.DisruptionHold {
	t.Helper()
	wc, err := client.NewWithWatch(e.cp.Config(), client.Options{Scheme: operator.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	w, err := wc.Watch(context.Background(), &v1alpha1.RolloutGroupList{}, client.InNamespace(rg.Namespace), client.MatchingFields{"metadata.name": rg.Name})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	var mu sync.Mutex
	var seen []v1alpha1.DisruptionHold
	go func() {
		for ev := range w.ResultChan() {
			if ev.Type != watch.Added && ev.Type != watch.Modified {
				continue
			}
			if h := ev.Object.(*v1alpha1.RolloutGroup).Status.Disruption; h != nil {
				mu.Lock()
				seen = append(seen, *h)
				mu.Unlock()
			}
		}
	}()
	return func() []v1alpha1.DisruptionHold {
		mu.Lock()
		defer mu.Unlock()
		return append([]v1alpha1.DisruptionHold(nil), seen...)
	}
}

// holdOf matches a record with the intent of the eviction of pod in zone,
// naming the pod, expiring after the act's window.
func holdOf(zone, pod string) gomegatypes.GomegaMatcher {
	return HaveField("Intents", ContainElement(And(HaveField("Zone", zone), HaveField("Reason", v1alpha1.DisruptionEviction),
		HaveField("Holder", "eviction of pod "+pod), HaveField("Pods", ConsistOf(HaveField("Name", pod))),
		WithTransform(func(in v1alpha1.DisruptionIntent) time.Duration { return in.ExpiresAt.Sub(in.DecidedAt.Time) },
			BeNumerically(">=", disruption.ActWindow)))))
}

// TestEvictionRolloutGroup: `kubectl drain` of a pod of a three-zone group
// is admitted in one zone, and the zone's hold is recorded in the group's
// status; a pod of another zone is then refused with 429, naming the group
// and the disrupted zone, and the refusal is an Event on the group about the
// pod; dry runs, in the request or in the Eviction, decide and record
// nothing.
func TestEvictionRolloutGroup(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	v := e.evictor(t, ns)
	e.zones(t, ns, "", 3, "ingester-zone-a", "ingester-zone-b", "ingester-zone-c")
	rg := builders.MakeRolloutGroup(ns, "ingester").Members("ingester-zone-a", "ingester-zone-b", "ingester-zone-c").Obj()
	g.Expect(e.admin.Create(ctx, rg)).To(Succeed())
	e.waitForCache(t, rg)

	g.Expect(v.evictDryRun("ingester-zone-a-0")).To(Succeed())
	g.Expect(e.admin.SubResource("eviction").Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ingester-zone-b-0"}},
		&policyv1.Eviction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "ingester-zone-b-0"}}, client.DryRunAll)).To(Succeed())
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(rg), rg)).To(Succeed())
	g.Expect(rg.Status.Disruption).To(BeNil(), "a dry run records no hold")
	g.Expect(e.podExists(ns, "ingester-zone-a-0")).To(BeTrue())

	seen := e.holdsSeen(t, rg)
	g.Expect(v.evict("ingester-zone-a-0")).To(Succeed())
	g.Eventually(seen, 10*time.Second, 50*time.Millisecond).Should(ContainElement(holdOf("ingester-zone-a", "ingester-zone-a-0")))
	g.Eventually(func() (bool, error) { return e.podExists(ns, "ingester-zone-a-0") }, 10*time.Second, 50*time.Millisecond).Should(BeFalse())

	// Zone a holds the budget, and its pod is gone: either says so.
	err := v.evict("ingester-zone-b-0")
	g.Expect(err).To(refused("RolloutGroup ingester: zone ingester-zone-a "))
	g.Expect(err).To(MatchError(ContainSubstring("evict ingester-zone-b-0 ")))
	g.Expect(e.podExists(ns, "ingester-zone-b-0")).To(BeTrue())
	g.Expect(v.evictDryRun("ingester-zone-c-0")).To(refused("RolloutGroup ingester: zone ingester-zone-a "), "a dry run is judged all the same")

	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(rg), rg)).To(Succeed())
	g.Eventually(func() []string {
		var events eventsv1.EventList
		g.Expect(e.admin.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
		var got []string
		for _, ev := range events.Items {
			if ev.Type == corev1.EventTypeWarning && ev.Reason == webhooks.EventReasonEvictionRefused && ev.Related != nil {
				got = append(got, fmt.Sprintf("%s/%s/%s about %s/%s", ev.Regarding.Kind, ev.Regarding.Name, ev.Regarding.UID, ev.Related.Kind, ev.Related.Name))
			}
		}
		return got
	}, 10*time.Second, 100*time.Millisecond).Should(Equal([]string{
		fmt.Sprintf("RolloutGroup/ingester/%s about Pod/ingester-zone-b-0", rg.UID),
	}), "one Event, on the group, about the pod refused; none for the dry run")
}

// TestEvictionDisruptedZone: while a zone has a pod terminating, or not
// available, no pod of another zone is evicted, nor a second pod of that
// zone past its budget; a pod already terminating, or not available, may go.
func TestEvictionDisruptedZone(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	v := e.evictor(t, ns)
	sets := e.zones(t, ns, "", 3, "ingester-zone-a", "ingester-zone-b", "ingester-zone-c")
	rg := builders.MakeRolloutGroup(ns, "ingester").Members("ingester-zone-a", "ingester-zone-b", "ingester-zone-c").Obj()
	g.Expect(e.admin.Create(ctx, rg)).To(Succeed())
	e.waitForCache(t, rg)

	// A finalizer keeps the deleted pod terminating.
	pod := &corev1.Pod{}
	g.Expect(e.admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ingester-zone-c-2"}, pod)).To(Succeed())
	pod.Finalizers = []string{"echelon.dev/test"}
	g.Expect(e.admin.Update(ctx, pod)).To(Succeed())
	g.Expect(e.admin.Delete(ctx, pod)).To(Succeed())
	g.Eventually(func() (*metav1.Time, error) {
		cached := &corev1.Pod{}
		err := e.cache.Get(ctx, client.ObjectKeyFromObject(pod), cached)
		return cached.DeletionTimestamp, err
	}, 10*time.Second, 20*time.Millisecond).ShouldNot(BeNil(), "the cache, which the other zones are judged on, shows the pod terminating")
	g.Expect(v.evict("ingester-zone-b-0")).To(refused("RolloutGroup ingester: zone ingester-zone-c (1 terminating) is disrupted; evict ingester-zone-b-0 later"))
	g.Expect(v.evict("ingester-zone-c-2")).To(Succeed(), "evicting a terminating pod disrupts nothing more")
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
	pod.Finalizers = nil
	g.Expect(e.admin.Update(ctx, pod)).To(Succeed())
	g.Eventually(func() (bool, error) { return e.podExists(ns, "ingester-zone-c-2") }, 10*time.Second, 50*time.Millisecond).Should(BeFalse())
	e.createPod(t, builders.MakePod(ns, "ingester-zone-c", 2).FromTemplate(sets[2].Spec.Template).ControlledBy(sets[2]).Revision("r1").Obj())

	e.setReady(t, ns, "ingester-zone-a-1", false, time.Time{})
	g.Expect(v.evict("ingester-zone-b-0")).To(refused("RolloutGroup ingester: zone ingester-zone-a (1 not available) is disrupted; evict ingester-zone-b-0 later"))
	g.Expect(v.evict("ingester-zone-a-0")).To(refused("zone ingester-zone-a has 1 of 3 pods unavailable and maxUnavailable 1"))
	g.Expect(v.evict("ingester-zone-a-1")).To(Succeed(), "the pod that is down costs nothing")
}

// TestEvictionZoneDisruptionBudget: pods no group rolls are judged by the
// ZoneDisruptionBudget that selects them, zones being their StatefulSets,
// and its hold is recorded in its status; a pod no budget covers is evicted
// freely; a pod of a group that the budget also selects is judged by the
// group alone.
func TestEvictionZoneDisruptionBudget(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	v := e.evictor(t, ns)
	e.zones(t, ns, "store", 2, "store-a", "store-b", "store-c")
	e.zones(t, ns, "", 1, "loner")
	zdb := builders.MakeZoneDisruptionBudget(ns, "store", budgetLabel, "store", builders.MakeZoneBudget())
	rg := builders.MakeRolloutGroup(ns, "grouped").Members("store-c").Obj()
	g.Expect(e.admin.Create(ctx, zdb)).To(Succeed())
	g.Expect(e.admin.Create(ctx, rg)).To(Succeed())
	e.waitForCache(t, zdb, rg)

	e.setReady(t, ns, "store-b-1", false, time.Time{})
	g.Expect(v.evict("store-a-0")).To(refused("ZoneDisruptionBudget store: zone store-b (1 not available) is disrupted; evict store-a-0 later"))
	g.Expect(v.evict("loner-0")).To(Succeed(), "a pod no budget covers")
	g.Expect(v.evict("store-c-0")).To(Succeed(), "store-c is the group's: the budget's disrupted zone does not stop it")
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(zdb), zdb)).To(Succeed())
	g.Expect(zdb.Status.Disruption).To(BeNil(), "the group's pod took no hold of the budget")

	e.setReady(t, ns, "store-b-1", true, time.Time{})
	g.Expect(v.evict("store-a-0")).To(Succeed())
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(zdb), zdb)).To(Succeed())
	g.Expect(zdb.Status.Disruption).To(PointTo(holdOf("store-a", "store-a-0")))
	g.Expect(v.evict("store-b-0")).To(refused("ZoneDisruptionBudget store: zone store-a "))
}

// TestEvictionPartitions: with Mimir's partition ingesters, a pod whose
// partition is whole in every other zone is evicted although another
// partition of another zone is down; one whose partition is down elsewhere
// is refused, naming the partition.
func TestEvictionPartitions(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	v := e.evictor(t, ns)
	e.zones(t, ns, "", 3, "ingester-zone-a", "ingester-zone-b")
	rg := builders.MakeRolloutGroup(ns, "ingester").Members("ingester-zone-a", "ingester-zone-b").
		DisruptionBudget(builders.MakeZoneBudget().Partitions(`^ingester-zone-[a-z]-(\d+)$`)).Obj()
	g.Expect(e.admin.Create(ctx, rg)).To(Succeed())
	e.waitForCache(t, rg)

	e.setReady(t, ns, "ingester-zone-b-1", false, time.Time{})
	g.Expect(v.evict("ingester-zone-a-1")).To(refused("RolloutGroup ingester: partition 1 in zone ingester-zone-b (1 not available) is disrupted"))
	g.Expect(v.evict("ingester-zone-a-0")).To(Succeed(), "partition 0 is whole in zone b")
}

// TestEvictionCrossZoneDelay: a zone that became whole less than
// crossZoneDelay ago stops evictions in the other zones, saying until when.
func TestEvictionCrossZoneDelay(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	v := e.evictor(t, ns)
	e.zones(t, ns, "", 2, "ingester-zone-a", "ingester-zone-b")
	rg := builders.MakeRolloutGroup(ns, "ingester").Members("ingester-zone-a", "ingester-zone-b").
		DisruptionBudget(builders.MakeZoneBudget().CrossZoneDelay(time.Hour)).Obj()
	g.Expect(e.admin.Create(ctx, rg)).To(Succeed())
	e.waitForCache(t, rg)

	e.setReady(t, ns, "ingester-zone-b-1", true, time.Now().Add(-time.Minute))
	g.Expect(v.evict("ingester-zone-a-0")).To(refused("crossZoneDelay 1h0m0s lets another zone go at"))
	e.setReady(t, ns, "ingester-zone-b-1", true, time.Now().Add(-2*time.Hour))
	g.Expect(v.evict("ingester-zone-a-0")).To(Succeed())
}

// TestEvictionConcurrentZones: evictions of two zones' pods sent at the same
// moment (two drains) are ordered by the group's hold: exactly one is
// admitted, each time. So are two evictions of one zone whose budget has
// room for one: the API server removes the first pod only after admitting
// it, and the hold records it meanwhile.
func TestEvictionConcurrentZones(t *testing.T) {
	t.Run("two zones", func(t *testing.T) {
		concurrentEvictions(t, []string{"ingester-zone-a-0", "ingester-zone-b-0"}, "RolloutGroup ingester: zone ingester-zone-")
	})
	t.Run("one zone", func(t *testing.T) {
		concurrentEvictions(t, []string{"ingester-zone-a-0", "ingester-zone-a-1"}, "RolloutGroup ingester: zone ingester-zone-a has 1 of 2 pods unavailable and maxUnavailable 1")
	})
}

// concurrentEvictions evicts pods of a complete two-zone group at the same
// moment, several times, and expects one admitted and the other refused
// saying refusal.
func concurrentEvictions(t *testing.T, pods []string, refusal string) {
	conflicts := testutil.ToFloat64(metrics.DisruptionHoldConflicts.WithLabelValues(metrics.RequesterEviction))
	t.Cleanup(func() {
		// How often the two decisions met at the optimistic lock, rather than
		// one reading the other's hold: for the log, since either orders them.
		t.Logf("hold conflicts: %v", testutil.ToFloat64(metrics.DisruptionHoldConflicts.WithLabelValues(metrics.RequesterEviction))-conflicts)
	})
	for round := range 5 {
		t.Run(fmt.Sprint(round), func(t *testing.T) {
			e, g, ns := begin(t)
			ctx := context.Background()
			v := e.evictor(t, ns)
			e.zones(t, ns, "", 2, "ingester-zone-a", "ingester-zone-b")
			rg := builders.MakeRolloutGroup(ns, "ingester").Members("ingester-zone-a", "ingester-zone-b").Obj()
			g.Expect(e.admin.Create(ctx, rg)).To(Succeed())
			e.waitForCache(t, rg)

			errs := make([]error, len(pods))
			start := make(chan struct{})
			var wg sync.WaitGroup
			for i, pod := range pods {
				wg.Go(func() {
					<-start
					errs[i] = v.evict(pod)
				})
			}
			close(start)
			wg.Wait()
			admitted := 0
			for i, err := range errs {
				if err == nil {
					admitted++
					continue
				}
				g.Expect(err).To(refused(refusal), "eviction of %s", pods[i])
			}
			g.Expect(admitted).To(Equal(1), "evictions admitted of %v: %v", pods, errs)
		})
	}
}

// evictWhileZoneDown: docs/webhooks.md "Guard evictions by zone",
// docs/drain-nodes-three-zones.md and docs/troubleshooting.md "kubectl drain
// hangs": kubectl drain reaches a pod of zone b while a pod of zone a is not
// Ready.
func evictWhileZoneDown(t *testing.T, e *env, g *WithT, ns string) error {
	e.zones(t, ns, "", 5, "ingester-zone-a", "ingester-zone-b", "ingester-zone-c")
	rg := builders.MakeRolloutGroup(ns, "ingester").Members("ingester-zone-a", "ingester-zone-b", "ingester-zone-c").Obj()
	g.Expect(e.admin.Create(context.Background(), rg)).To(Succeed())
	e.waitForCache(t, rg)
	e.setReady(t, ns, "ingester-zone-a-1", false, time.Time{})
	return e.evictor(t, ns).evict("ingester-zone-b-4")
}

// TestEvictionSharedBudget: two groups sharing a ZoneDisruptionBudget (issue
// 29, item 6) and a StatefulSet the budget selects itself are one service:
// an eviction of an ingester is refused while a store-gateway of another
// zone is down, naming it, and admitted in the same zone; its intent is
// recorded in the shared budget, not in the group; while the named budget
// does not exist, evictions of the group's pods are refused.
func TestEvictionSharedBudget(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	v := e.evictor(t, ns)
	e.zones(t, ns, "mimir", 2, "ingester-zone-a", "ingester-zone-b")
	e.zones(t, ns, "mimir", 2, "store-gateway-zone-a", "store-gateway-zone-b")
	e.zones(t, ns, "mimir", 1, "compactor-zone-b")
	ing := builders.MakeRolloutGroup(ns, "ingester").Members("ingester-zone-a", "ingester-zone-b").Obj()
	ing.Spec.SharedDisruptionBudget = "mimir"
	sg := builders.MakeRolloutGroup(ns, "store-gateway").Members("store-gateway-zone-a", "store-gateway-zone-b").Obj()
	sg.Spec.SharedDisruptionBudget = "mimir"
	g.Expect(e.admin.Create(ctx, ing)).To(Succeed())
	g.Expect(e.admin.Create(ctx, sg)).To(Succeed())
	e.waitForCache(t, ing, sg)
	g.Expect(v.evict("ingester-zone-a-0")).To(refused("ZoneDisruptionBudget mimir, which RolloutGroup ingester shares (spec.sharedDisruptionBudget), does not exist"))

	zdb := builders.MakeZoneDisruptionBudget(ns, "mimir", budgetLabel, "mimir", builders.MakeZoneBudget())
	zdb.Spec.ZoneFrom = &v1alpha1.ZoneFrom{NameRegex: `zone-[a-z]$`}
	g.Expect(e.admin.Create(ctx, zdb)).To(Succeed())
	e.waitForCache(t, zdb)

	e.setReady(t, ns, "store-gateway-zone-b-1", false, time.Time{})
	g.Expect(v.evict("ingester-zone-a-0")).To(refused("zone store-gateway-zone-b (1 not available) is disrupted"))
	g.Expect(v.evict("ingester-zone-b-0")).To(Succeed(), "the ingesters of the zone the store-gateway is down in may go")
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(zdb), zdb)).To(Succeed())
	g.Expect(zdb.Status.Disruption).To(PointTo(holdOf("ingester-zone-b", "ingester-zone-b-0")), "the intent is the shared budget's")
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(ing), ing)).To(Succeed())
	g.Expect(ing.Status.Disruption).To(BeNil(), "the group records nothing of its own")
	g.Expect(v.evict("compactor-zone-b-0")).To(Succeed(), "the budget's own pod of the same zone")

	e.setReady(t, ns, "store-gateway-zone-b-1", true, time.Time{})
	g.Expect(v.evict("store-gateway-zone-a-0")).To(refused("zone compactor-zone-b (1 pod that an eviction (eviction of pod compactor-zone-b-0) was allowed to take"),
		"zone b's recorded eviction, by the budget's own pod, holds zone a")
}
