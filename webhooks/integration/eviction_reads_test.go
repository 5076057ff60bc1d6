package integration

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/webhooks"
)

// countingClient counts the requests sent through it, as "verb Kind".
type countingClient struct {
	client.Client
	mu     sync.Mutex
	counts map[string]int
}

func newCountingClient(c client.Client) *countingClient {
	return &countingClient{Client: c, counts: map[string]int{}}
}

func (c *countingClient) count(verb string, obj runtime.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.counts[verb+" "+strings.TrimPrefix(fmt.Sprintf("%T", obj), "*")]++
}

// take returns the counts so far and starts again.
func (c *countingClient) take() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := c.counts
	c.counts = map[string]int{}
	return out
}

func (c *countingClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	c.count("get", obj)
	return c.Client.Get(ctx, key, obj, opts...)
}

func (c *countingClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.count("list", list)
	return c.Client.List(ctx, list, opts...)
}

func (c *countingClient) Status() client.SubResourceWriter {
	return countingStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type countingStatus struct {
	client.SubResourceWriter
	c *countingClient
}

func (s countingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	s.c.count("patch status", obj)
	return s.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// countedGroup creates a complete three-zone group of 3 pods a zone,
// disruptionBudget maxUnavailable 2, and returns it with the operator's
// EvictionBudgets whose live reads and writes go through the returned
// counter.
func (e *env) countedGroup(t *testing.T, g *WithT, ns string) (*v1alpha1.RolloutGroup, *countingClient, webhooks.EvictionBudgets) {
	t.Helper()
	zones := []string{"ingester-zone-a", "ingester-zone-b", "ingester-zone-c"}
	e.zones(t, ns, "", 3, zones...)
	rg := builders.MakeRolloutGroup(ns, "ingester").Members(zones...).DisruptionBudget(builders.MakeZoneBudget().MaxUnavailable(2)).Obj()
	g.Expect(e.admin.Create(context.Background(), rg)).To(Succeed())
	e.waitForCache(t, rg)
	live := newCountingClient(e.operator)
	return rg, live, webhooks.NewEvictionBudgets(e.cache, live, live, time.Now, nil)
}

// TestEvictionLiveReads: an eviction the cache allows is confirmed on what
// the API server holds with one read, the pods of the zones that matter
// (its own zone, and those with recorded intents), and one write, the
// intent, with the group's resourceVersion as cached; not the group's
// StatefulSets nor every zone's pods. An eviction the cache refuses reads
// nothing live.
func TestEvictionLiveReads(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	rg, live, budgets := e.countedGroup(t, g, ns)

	evict := func(name string) (bool, string) {
		t.Helper()
		pod := &corev1.Pod{}
		g.Expect(e.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
		judging, _, err := budgets.Judging(ctx, pod)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(judging).To(HaveLen(1))
		v, err := budgets.Judge(ctx, judging[0], pod)
		g.Expect(err).NotTo(HaveOccurred())
		if !v.Allowed {
			return false, v.Message
		}
		v, err = budgets.Acquire(ctx, judging[0], pod, false)
		g.Expect(err).NotTo(HaveOccurred())
		return v.Allowed, v.Message
	}

	g.Expect(evict("ingester-zone-a-0")).To(BeTrue())
	// The first attempt takes the group from the cache: the intent's write
	// with its resourceVersion fails if it was stale. The group's controller
	// may write its status meanwhile, and the decision be taken again on
	// the group read live.
	counts := live.take()
	attempts := counts["patch status v1alpha1.RolloutGroup"]
	g.Expect(attempts).To(BeNumerically(">=", 1))
	want := map[string]int{"list v1.PodList": attempts, "patch status v1alpha1.RolloutGroup": attempts}
	if attempts > 1 {
		want["get v1alpha1.RolloutGroup"] = attempts - 1
	}
	g.Expect(counts).To(Equal(want), "zone a's pods read, the intent written")

	// Once the cache holds the intent, zone b is refused there, with no
	// live read.
	g.Eventually(func() (*v1alpha1.DisruptionHold, error) {
		cached := &v1alpha1.RolloutGroup{}
		err := e.cache.Get(ctx, client.ObjectKeyFromObject(rg), cached)
		return cached.Status.Disruption, err
	}, 10*time.Second, 20*time.Millisecond).ShouldNot(BeNil())
	allowed, msg := evict("ingester-zone-b-1")
	g.Expect(allowed).To(BeFalse())
	g.Expect(msg).To(ContainSubstring("zone ingester-zone-a (1 pod that an eviction"))
	g.Expect(live.take()).To(BeEmpty(), "refused on the cache")
}

// TestEvictionLiveReadsZoneWithIntents: the live confirmation also reads
// the pods of every zone with a recorded intent, whose fate only a view
// read after the record may tell; the record is the one this replica
// wrote last, newer than its cache.
func TestEvictionLiveReadsZoneWithIntents(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	rg, live, budgets := e.countedGroup(t, g, ns)
	pod := func(name string) *corev1.Pod {
		p := &corev1.Pod{}
		g.Expect(e.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)).To(Succeed())
		return p
	}
	b := webhooks.Budget{Kind: webhooks.KindRolloutGroup, Namespace: ns, Name: rg.Name, UID: rg.UID, Zone: "ingester-zone-b"}
	v, err := budgets.Acquire(ctx, b, pod("ingester-zone-b-0"), false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Allowed).To(BeTrue())
	live.take()

	b.Zone = "ingester-zone-a"
	v, err = budgets.Acquire(ctx, b, pod("ingester-zone-a-0"), true)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(v.Allowed).To(BeFalse(), "zone b's recorded pod is not seen going")
	g.Expect(v.Message).To(ContainSubstring("zone ingester-zone-b (1 pod that an eviction"))
	g.Expect(live.take()).To(Equal(map[string]int{"list v1.PodList": 2}), "zone a's and zone b's pods, the group as last written")
}

// TestEvictionConcurrentOneZone: evictions of one zone asked at once (a
// node's pods) fill its budget in one wave, each decided on the others'
// recorded intents: within one replica they take turns at the record
// rather than colliding on it.
func TestEvictionConcurrentOneZone(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	zones := []string{"ingester-zone-a", "ingester-zone-b"}
	e.zones(t, ns, "", 8, zones...)
	rg := builders.MakeRolloutGroup(ns, "ingester").Members(zones...).DisruptionBudget(builders.MakeZoneBudget().MaxUnavailable(5)).Obj()
	g.Expect(e.admin.Create(ctx, rg)).To(Succeed())
	e.waitForCache(t, rg)
	budgets := webhooks.NewEvictionBudgets(e.cache, e.operator, e.operator, time.Now, nil)
	b := webhooks.Budget{Kind: webhooks.KindRolloutGroup, Namespace: ns, Name: rg.Name, UID: rg.UID, Zone: "ingester-zone-a"}
	conflicts := testutil.ToFloat64(metrics.DisruptionHoldConflicts.WithLabelValues(metrics.RequesterEviction))

	allowed := make([]bool, 8)
	errs := make([]error, 8)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			pod := &corev1.Pod{}
			if errs[i] = e.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("ingester-zone-a-%d", i)}, pod); errs[i] != nil {
				return
			}
			<-start
			v, err := budgets.Acquire(ctx, b, pod, false)
			allowed[i], errs[i] = v.Allowed, err
		})
	}
	close(start)
	wg.Wait()
	n := 0
	for i := range allowed {
		g.Expect(errs[i]).NotTo(HaveOccurred(), "eviction of ingester-zone-a-%d", i)
		if allowed[i] {
			n++
		}
	}
	g.Expect(n).To(Equal(5), "the zone's budget, in one wave")
	// Only the group's controller, writing its status meanwhile, may make
	// one of them decide again; colliding with each other, eight
	// evictions met 27 Conflicts.
	g.Expect(testutil.ToFloat64(metrics.DisruptionHoldConflicts.WithLabelValues(metrics.RequesterEviction))-conflicts).To(BeNumerically("<", 3),
		"Conflicts met by the wave")
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(rg), rg)).To(Succeed())
	g.Expect(rg.Status.Disruption.Intents).To(HaveLen(5))
}

// TestEvictionConfirmedOnCoveringCache: once the operator's cache holds the
// pods as they were after the budget's last recorded intent (the pod that
// eviction took, seen going), an eviction the cache allows is confirmed on
// the cache with no read: its one request is the intent's write. The
// decision is the one a live read would give: the second pod of the zone
// is admitted within maxUnavailable 2, the third is refused, counting the
// recorded pods that the cache shows going.
func TestEvictionConfirmedOnCoveringCache(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	zones := []string{"ingester-zone-a", "ingester-zone-b", "ingester-zone-c"}
	e.zones(t, ns, "", 3, zones...)
	rg := builders.MakeRolloutGroup(ns, "ingester").Members(zones...).DisruptionBudget(builders.MakeZoneBudget().MaxUnavailable(2)).Obj()
	g.Expect(e.admin.Create(ctx, rg)).To(Succeed())
	e.waitForCache(t, rg)
	live := newCountingClient(e.operator)
	fresh, err := budget.NewFreshness(e.informers)
	g.Expect(err).NotTo(HaveOccurred())
	budgets := webhooks.NewEvictionBudgets(e.cache, live, live, time.Now, fresh)
	b := webhooks.Budget{Kind: webhooks.KindRolloutGroup, Namespace: ns, Name: rg.Name, UID: rg.UID, Zone: "ingester-zone-a"}

	// acquireAndAct records the eviction of name as the webhook does, then
	// deletes the pod as the API server would, and waits until the cache
	// shows it going.
	acquireAndAct := func(name string) (bool, string) {
		t.Helper()
		pod := &corev1.Pod{}
		g.Expect(e.cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, pod)).To(Succeed())
		v, err := budgets.Acquire(ctx, b, pod, false)
		g.Expect(err).NotTo(HaveOccurred())
		if !v.Allowed {
			return false, v.Message
		}
		g.Expect(e.admin.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})).To(Succeed())
		g.Eventually(func() bool {
			cached := &corev1.Pod{}
			err := e.cache.Get(ctx, client.ObjectKeyFromObject(pod), cached)
			return apierrors.IsNotFound(err) || cached.UID != pod.UID || cached.DeletionTimestamp != nil
		}, 10*time.Second, 10*time.Millisecond).Should(BeTrue(), "the cache shows %s going", name)
		return true, ""
	}

	g.Expect(acquireAndAct("ingester-zone-a-0")).To(BeTrue())
	live.take() // the first may have read live: the group was written after its pods

	fromCache := testutil.ToFloat64(metrics.DisruptionViews.WithLabelValues(metrics.RequesterEviction, metrics.ViewFromCache))
	g.Expect(acquireAndAct("ingester-zone-a-1")).To(BeTrue())
	counts := live.take()
	g.Expect(counts).NotTo(HaveKey("list v1.PodList"), "confirmed on the cache, which showed zone a's first pod going")
	g.Expect(counts["patch status v1alpha1.RolloutGroup"]).To(BeNumerically(">=", 1), "the intent written")
	g.Expect(testutil.ToFloat64(metrics.DisruptionViews.WithLabelValues(metrics.RequesterEviction, metrics.ViewFromCache))).To(BeNumerically(">", fromCache))

	allowed, msg := acquireAndAct("ingester-zone-a-2")
	g.Expect(allowed).To(BeFalse(), "two of zone a's pods are going: maxUnavailable 2")
	g.Expect(msg).To(ContainSubstring("maxUnavailable 2"))
}
