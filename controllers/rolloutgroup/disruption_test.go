package rolloutgroup

// The group's one disruption budget, as the RolloutGroup obeys it: a hold
// another decision recorded (a ScalingPolicy's downscale, an admitted
// eviction) in status.disruption before it acted.

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
)

// writeHold records a hold in the group's status.disruption as
// budget.Acquire does for another decision, renewed now.
func (e *env) writeHold(group, zone string, reason v1alpha1.DisruptionReason, holder string) *v1alpha1.DisruptionHold {
	e.T.Helper()
	now := metav1.NewTime(time.Now().Truncate(time.Second))
	hold := &v1alpha1.DisruptionHold{Zone: zone, Reason: reason, Holder: holder, Since: now, RenewTime: now, LeaseSeconds: 15}
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rg := e.GetGroup(group)
		patched := rg.DeepCopy()
		patched.Status.Disruption = hold
		return e.Admin.Status().Patch(e.Ctx, patched, client.MergeFromWithOptions(rg, client.MergeFromWithOptimisticLock{}))
	}); err != nil {
		e.T.Fatal(err)
	}
	return hold
}

// waitCachedHold waits until the reconciler's cache shows the group's hold
// on zone.
func (e *env) waitCachedHold(group, zone string) {
	e.T.Helper()
	e.Eventually(10*time.Second, "the cache to show the hold on "+zone, func() (bool, error) {
		cached := &v1alpha1.RolloutGroup{}
		if err := e.r.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: group}, cached); err != nil {
			return false, err
		}
		return cached.Status.Disruption != nil && cached.Status.Disruption.Zone == zone, nil
	})
}

// holdHidingGroups serves the reconciler's cached RolloutGroup reads without
// status.disruption, as a cache that has not seen a hold written a moment
// ago would.
type holdHidingGroups struct {
	client.Client
}

func (h holdHidingGroups) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := h.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if rg, ok := obj.(*v1alpha1.RolloutGroup); ok {
		rg.Status.Disruption = nil
	}
	return nil
}

// The second scenario: the group's live read covered only the member
// it rolls, so a follower's downscale (or an eviction) that the cache did not
// show yet did not stop a batch. A decision that disrupts a zone now records
// a hold first: while another zone holds the budget, the rollout of zone-a
// deletes nothing, whether or not the cache shows the hold yet, and says
// which zone holds it, why and for whom.
func TestControllerWaitsForAnotherZonesHold(t *testing.T) {
	for _, tt := range []struct {
		name   string
		reason v1alpha1.DisruptionReason
		holder string
		// cacheBehind hides the hold from the reconciler's cache.
		cacheBehind bool
	}{
		{"a downscale of zone-b, the cache shows the hold", v1alpha1.DisruptionDownscale, "ScalingPolicy zone-b", false},
		{"a downscale of zone-b, the cache does not show the hold yet", v1alpha1.DisruptionDownscale, "ScalingPolicy zone-b", true},
		{"an eviction in zone-b, the cache shows the hold", v1alpha1.DisruptionEviction, "eviction of pod zone-b-3", false},
		{"an eviction in zone-b, the cache does not show the hold yet", v1alpha1.DisruptionEviction, "eviction of pod zone-b-3", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			opts := envOptions{}
			if tt.cacheBehind {
				opts.wrapClient = func(c client.Client) client.Client { return holdHidingGroups{Client: c} }
			}
			e := newEnv(t, opts)
			a, b := e.StatefulSet("zone-a", 4, "r1"), e.StatefulSet("zone-b", 4, "r1")
			e.Pods(a, 4, "r1", controllertest.PodSpec{Bound: true})
			e.Pods(b, 4, "r1", controllertest.PodSpec{Bound: true})
			e.Group("ingester", 2, "zone-a", "zone-b")
			e.Eventually(10*time.Second, "the cache to see the group", func() (bool, error) {
				return e.r.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "ingester"}, &v1alpha1.RolloutGroup{}) == nil, nil
			})
			e.reconcile("ingester") // Complete

			// zone-b's pods are all there and Ready: the decision that holds
			// zone-b has not acted yet, or its effect has not reached any view.
			hold := e.writeHold("ingester", "zone-b", tt.reason, tt.holder)
			if !tt.cacheBehind {
				e.waitCachedHold("ingester", "zone-b")
			}
			e.SetRevisions("zone-a", "r1", "r2")
			e.Eventually(10*time.Second, "the cache to see the revision", func() (bool, error) {
				return e.r.Get(e.Ctx, client.ObjectKeyFromObject(a), a) == nil && a.Status.UpdateRevision == "r2", nil
			})

			denied := testutil.ToFloat64(metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterRollout, "denied", disruption.CodeHeldByOtherZone))
			res := e.reconcile("ingester")
			if got := testutil.ToFloat64(metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterRollout, "denied", disruption.CodeHeldByOtherZone)); got != denied+1 {
				t.Errorf("echelon_disruption_decisions_total{requester=rollout,decision=denied,code=%s} rose by %v, want 1", disruption.CodeHeldByOtherZone, got-denied)
			}
			if n := e.Terminating("zone-a"); n != 0 {
				t.Errorf("%d pods of zone-a terminating, want none: zone-b holds the disruption budget (%s)", n, tt.reason)
			}
			if res.RequeueAfter <= 0 || res.RequeueAfter > 15*time.Second {
				t.Errorf("RequeueAfter = %s, want (0, 15s]: when the hold lapses", res.RequeueAfter)
			}
			rg := e.GetGroup("ingester")
			c := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionProgressing)
			if c == nil || c.Reason != v1alpha1.ReasonWaitingForDisruption {
				t.Errorf("Progressing = %+v, want reason %s", c, v1alpha1.ReasonWaitingForDisruption)
			}
			for _, s := range []string{"zone-b", string(tt.reason), tt.holder} {
				if !strings.Contains(rg.Status.Message, s) {
					t.Errorf("message %q does not name %q", rg.Status.Message, s)
				}
			}
			if got := rg.Status.Disruption; !equality.Semantic.DeepEqual(got, hold) {
				t.Errorf("status.disruption = %+v after the pass, want the hold of zone-b untouched %+v", got, hold)
			}
		})
	}
}

// An eviction in the zone being rolled holds the same zone: the rollout goes
// on within zone-a's maxUnavailable, counting the evicted pod, and the hold
// stays with zone-a.
func TestControllerRollsOnWithinItsZoneUnderAnEvictionHold(t *testing.T) {
	e := newEnv(t, envOptions{})
	a, b := e.StatefulSet("zone-a", 4, "r1"), e.StatefulSet("zone-b", 4, "r1")
	e.Pods(a, 4, "r1", controllertest.PodSpec{Bound: true})
	e.Pods(b, 4, "r1", controllertest.PodSpec{Bound: true})
	e.Group("ingester", 2, "zone-a", "zone-b")
	e.Eventually(10*time.Second, "the cache to see the group", func() (bool, error) {
		return e.r.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "ingester"}, &v1alpha1.RolloutGroup{}) == nil, nil
	})
	e.reconcile("ingester")

	// The eviction webhook admitted the eviction of zone-a-0 (recorded
	// first); the pod terminates on its bound node.
	evicted := e.writeHold("ingester", "zone-a", v1alpha1.DisruptionEviction, "eviction of pod zone-a-0")
	if err := e.Admin.Delete(e.Ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "zone-a-0"}}); err != nil {
		t.Fatal(err)
	}
	e.waitCachedHold("ingester", "zone-a")
	e.SetRevisions("zone-a", "r1", "r2")
	e.Eventually(10*time.Second, "the cache to see the revision", func() (bool, error) {
		return e.r.Get(e.Ctx, client.ObjectKeyFromObject(a), a) == nil && a.Status.UpdateRevision == "r2", nil
	})

	e.reconcile("ingester")
	if n := e.Terminating("zone-a"); n != 2 {
		t.Errorf("%d pods of zone-a terminating, want 2: the evicted one and one rolled (maxUnavailable 2)", n)
	}
	if n := e.Terminating("zone-b"); n != 0 {
		t.Errorf("%d pods of zone-b terminating, want none", n)
	}
	// Recorded as the rollout's before its batch, since the eviction's.
	if h := e.GetGroup("ingester").Status.Disruption; h == nil || h.Zone != "zone-a" || h.Reason != v1alpha1.DisruptionRollout ||
		h.Holder != "RolloutGroup ingester" || !h.Since.Equal(&evicted.Since) {
		t.Errorf("status.disruption = %+v, want the hold of zone-a recorded by the rollout, since %v", h, evicted.Since)
	}
}

// Only budget.Acquire writes status.disruption. The controller's own status
// writes never send it: a hold another decision wrote survives them, in a
// process that takes the group over (whose first write is computed against
// the status as read, hold included) and in one that has written before.
func TestControllerStatusWritesKeepAnotherDecisionsHold(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.StatefulSet("zone-a", 3, "r1")
	e.Pods(a, 3, "r1", controllertest.PodSpec{Bound: true})
	e.Group("ingester", 1, "zone-a")
	hold := e.writeHold("ingester", "zone-a", v1alpha1.DisruptionEviction, "eviction of pod zone-a-2")
	e.waitCachedHold("ingester", "zone-a")

	e.reconcile("ingester") // a process that has just taken the group over
	rg := e.GetGroup("ingester")
	if rg.Status.Phase != v1alpha1.PhaseComplete {
		t.Fatalf("phase %q after the first pass, want Complete written", rg.Status.Phase)
	}
	if got := rg.Status.Disruption; !equality.Semantic.DeepEqual(got, hold) {
		t.Fatalf("status.disruption = %+v after the first status write, want %+v", got, hold)
	}

	// A pod becomes not Ready: the phase changes, written at once.
	e.RecreatePod(a, 1, "r1", controllertest.PodSpec{Bound: true, NotReady: true})
	e.Eventually(10*time.Second, "the group to wait for the pod", func() (bool, error) {
		e.reconcile("ingester")
		return e.GetGroup("ingester").Status.Phase == v1alpha1.PhaseWaiting, nil
	})
	if got := e.GetGroup("ingester").Status.Disruption; !equality.Semantic.DeepEqual(got, hold) {
		t.Errorf("status.disruption = %+v after the next status write, want %+v", got, hold)
	}
}
