package integration

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/test/builders"
)

// TestBudgetJudgesUnguardedDownscale: a downscale of a RolloutGroup's
// member that no ScalingPolicy guards, sent as kubectl scale (/scale) or as
// a change of spec.replicas, is judged by the group's disruption budget:
// refused, naming the group, the zone and why, while another zone is not
// whole; once it is, admitted and recorded as the group's intent (a dry run
// is admitted and records nothing). Growth of a member passes while the
// other zone is down. The webhook's reach is what it judges: the API server
// sends it no write of a StatefulSet of no group, and no write of a member
// that does not lower its replicas.
func TestBudgetJudgesUnguardedDownscale(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	sets := e.zones(t, ns, "", 5, "ingester-zone-a", "ingester-zone-b", "other")
	zoneA, zoneB, other := sets[0], sets[1], sets[2]
	e.waitForCache(t, zoneA, zoneB, other)
	rg := e.completeGroup(t, ns, zoneA.Name, zoneB.Name)
	// The group's controller has labelled its members, and the webhook's
	// cache shows it.
	for _, sts := range []*appsv1.StatefulSet{zoneA, zoneB} {
		g.Eventually(func() (string, error) {
			cached := &appsv1.StatefulSet{}
			err := e.cache.Get(ctx, client.ObjectKeyFromObject(sts), cached)
			return cached.Labels[v1alpha1.MemberLabel], err
		}, 10*time.Second, 20*time.Millisecond).Should(Equal(string(rg.UID)), sts.Name)
	}
	asked := func(reason string) float64 {
		return webhookRequests(t, metrics.WebhookDownscaleBudget, reason)
	}

	// Out of its reach: a StatefulSet of no group shrunk through its spec,
	// a member's other changes. A /scale request carries no labels, so the
	// API server sends the webhook every downscale through /scale (and only
	// downscales: growth is not sent), which it answers from its cache
	// without asking any budget.
	before := asked("")
	g.Expect(setReplicas(ctx, e.admin, other, 4)).To(Succeed())
	g.Expect(e.admin.Patch(ctx, zoneA.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"annotations":{"note":"x"}}}`)))).To(Succeed())
	g.Expect(scaleTo(ctx, e.admin, other, 6)).To(Succeed())
	g.Expect(asked("")).To(Equal(before), "the API server sent the webhook a write it does not judge")
	g.Expect(scaleTo(ctx, e.admin, other, 3)).To(Succeed())
	g.Expect(asked("")).To(Equal(before+1), "a /scale downscale reaches the webhook")
	g.Expect(asked("not-member")).To(BeNumerically(">=", 1))

	// zone-b is not whole: a downscale of zone-a is refused, by kubectl
	// scale and by a change of spec.replicas alike, dry run or not, naming
	// the group and why; it records nothing.
	e.setReady(t, ns, zoneB.Name+"-0", false, time.Time{})
	denied := ContainSubstring("downscale of StatefulSet ingester-zone-a from 5 to 3 denied: the disruption budget of RolloutGroup ingester")
	why := ContainSubstring("zone " + zoneB.Name + " (1 not available) is disrupted")
	g.Expect(scaleTo(ctx, e.admin, zoneA, 3)).To(MatchError(And(
		ContainSubstring(`admission webhook "scale.downscale-budget.echelon.dev" denied the request`), denied, why)))
	g.Expect(scaleTo(ctx, e.admin, zoneA, 3, client.DryRunAll)).To(MatchError(And(denied, why)))
	g.Expect(setReplicas(ctx, e.admin, zoneA, 3)).To(MatchError(And(
		ContainSubstring(`admission webhook "downscale-budget.echelon.dev" denied the request`), denied, why)))
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(rg), rg)).To(Succeed())
	g.Expect(rg.Status.Disruption).To(BeNil(), "a refusal records nothing")

	// zone-b is whole again: a dry run is admitted and records nothing;
	// then the downscale is admitted and its intent recorded, the ordinals
	// it removes named, before the API server stores it.
	e.setReady(t, ns, zoneB.Name+"-0", true, time.Time{})
	g.Expect(scaleTo(ctx, e.admin, zoneA, 3, client.DryRunAll)).To(Succeed())
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(rg), rg)).To(Succeed())
	g.Expect(rg.Status.Disruption).To(BeNil(), "a dry run records nothing")
	g.Expect(scaleTo(ctx, e.admin, zoneA, 3)).To(Succeed())
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(rg), rg)).To(Succeed())
	g.Expect(rg.Status.Disruption).NotTo(BeNil())
	g.Expect(rg.Status.Disruption.Intents).To(ContainElement(And(
		HaveField("Zone", zoneA.Name),
		HaveField("Reason", v1alpha1.DisruptionDownscale),
		HaveField("Holder", HavePrefix("downscale of StatefulSet ingester-zone-a by ")),
		HaveField("Pods", ConsistOf(HaveField("Name", zoneA.Name+"-4"), HaveField("Name", zoneA.Name+"-3"))))))

	// Its pods are still there (no StatefulSet controller runs here): the
	// budget holds zone-a, and zone-b may not shrink; it may grow.
	g.Expect(setReplicas(ctx, e.admin, zoneB, 4)).To(MatchError(And(
		ContainSubstring("downscale of StatefulSet ingester-zone-b from 5 to 4 denied"), ContainSubstring(zoneA.Name))))
	before = asked("")
	g.Expect(scaleTo(ctx, e.admin, zoneB, 6)).To(Succeed())
	g.Expect(setReplicas(ctx, e.admin, zoneB, 7)).To(Succeed())
	g.Expect(asked("")).To(Equal(before), "growth of a member is not sent to the webhook")
}

// webhookRequests is the number of requests the webhook has answered with
// reason ("" for any).
func webhookRequests(t *testing.T, webhook, reason string) float64 {
	t.Helper()
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "echelon_webhook_requests_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["webhook"] == webhook && (reason == "" || labels["reason"] == reason) {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// completeGroup creates the RolloutGroup ingester of members and waits
// until the operator's cache holds it and its controller has found it
// Complete: no rollout is open.
func (e *env) completeGroup(t *testing.T, ns string, members ...string) *v1alpha1.RolloutGroup {
	t.Helper()
	ctx := context.Background()
	rg := builders.MakeRolloutGroup(ns, "ingester").Members(members...).Obj()
	if err := e.admin.Create(ctx, rg); err != nil {
		t.Fatal(err)
	}
	e.waitForCache(t, rg)
	NewWithT(t).Eventually(func() (v1alpha1.RolloutPhase, error) {
		err := e.admin.Get(ctx, client.ObjectKeyFromObject(rg), rg)
		return rg.Status.Phase, err
	}, 10*time.Second, 50*time.Millisecond).Should(Equal(v1alpha1.PhaseComplete))
	return rg
}

// setReplicas changes spec.replicas of sts with a merge patch, as kubectl
// edit or an apply would.
func setReplicas(ctx context.Context, c client.Client, sts *appsv1.StatefulSet, replicas int32) error {
	return c.Patch(ctx, sts.DeepCopy(), client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, replicas)))
}

// TestBudgetDownscaleSharedBudget: a kubectl scale down of a member of a
// group that shares a ZoneDisruptionBudget (issue 29, item 6) is judged with
// the other sharing group's zones: refused while a store-gateway of another
// zone is down, naming it; admitted in the zone that is down, its intent
// recorded in the shared budget and not in the group.
func TestBudgetDownscaleSharedBudget(t *testing.T) {
	e, g, ns := begin(t)
	ctx := context.Background()
	sets := e.zones(t, ns, "mimir", 3, "ingester-zone-a", "ingester-zone-b", "store-gateway-zone-a", "store-gateway-zone-b")
	e.waitForCache(t, sets[0], sets[1], sets[2], sets[3])
	zdb := builders.MakeZoneDisruptionBudget(ns, "mimir", budgetLabel, "mimir", builders.MakeZoneBudget())
	zdb.Spec.ZoneFrom = &v1alpha1.ZoneFrom{NameRegex: `zone-[a-z]$`}
	g.Expect(e.admin.Create(ctx, zdb)).To(Succeed())
	ing := builders.MakeRolloutGroup(ns, "ingester").Members("ingester-zone-a", "ingester-zone-b").Obj()
	ing.Spec.SharedDisruptionBudget = "mimir"
	sg := builders.MakeRolloutGroup(ns, "store-gateway").Members("store-gateway-zone-a", "store-gateway-zone-b").Obj()
	sg.Spec.SharedDisruptionBudget = "mimir"
	g.Expect(e.admin.Create(ctx, ing)).To(Succeed())
	g.Expect(e.admin.Create(ctx, sg)).To(Succeed())
	e.waitForCache(t, zdb, ing, sg)
	g.Eventually(func() (string, error) {
		cached := &appsv1.StatefulSet{}
		err := e.cache.Get(ctx, client.ObjectKeyFromObject(sets[0]), cached)
		return cached.Labels[v1alpha1.MemberLabel], err
	}, 10*time.Second, 20*time.Millisecond).ShouldNot(BeEmpty(), "the member label")

	e.setReady(t, ns, "store-gateway-zone-b-0", false, time.Time{})
	g.Expect(scaleTo(ctx, e.admin, sets[0], 2)).To(MatchError(ContainSubstring("zone store-gateway-zone-b (1 not available) is disrupted")))
	g.Expect(scaleTo(ctx, e.admin, sets[1], 2)).To(Succeed(), "the ingesters of the zone the store-gateway is down in")
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(zdb), zdb)).To(Succeed())
	g.Expect(zdb.Status.Disruption).NotTo(BeNil())
	g.Expect(zdb.Status.Disruption.Intents).To(ContainElement(And(HaveField("Zone", "ingester-zone-b"), HaveField("Reason", v1alpha1.DisruptionDownscale),
		HaveField("Pods", ConsistOf(HaveField("Name", "ingester-zone-b-2"))))), "the intent is the shared budget's")
	g.Expect(e.admin.Get(ctx, client.ObjectKeyFromObject(ing), ing)).To(Succeed())
	g.Expect(ing.Status.Disruption).To(BeNil(), "the group records nothing of its own")
}
