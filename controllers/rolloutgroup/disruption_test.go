package rolloutgroup

// The group's one disruption budget, as the RolloutGroup obeys it: the
// intent another decision recorded (a ScalingPolicy's downscale, an
// admitted eviction) in status.disruption before it acted.

import (
	"context"
	"fmt"
	"slices"
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

// writeHold records in the group's status.disruption, as budget.Acquire
// does for another decision, an intent of zone for reason by holder decided
// now, letting go zone's pods at ordinals (named with their UIDs as the API
// server holds them). It returns the record written.
func (e *env) writeHold(group, zone string, reason v1alpha1.DisruptionReason, holder string, ordinals ...int) *v1alpha1.DisruptionHold {
	e.T.Helper()
	now := time.Now()
	in := disruption.Intent{Zone: zone, Reason: reason, Holder: holder, Decided: now, Expires: now.Add(disruption.ActWindow + 15*time.Second)}
	for _, o := range ordinals {
		pod := &corev1.Pod{}
		if err := e.Admin.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: fmt.Sprintf("%s-%d", zone, o)}, pod); err != nil {
			e.T.Fatal(err)
		}
		in.Pods = append(in.Pods, disruption.IntentPod{Name: pod.Name, UID: pod.UID})
	}
	hold := disruption.RecordOf([]disruption.Intent{in})
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

// waitCachedHold waits until the reconciler's cache shows an intent of
// zone recorded in the group.
func (e *env) waitCachedHold(group, zone string) {
	e.T.Helper()
	e.Eventually(10*time.Second, "the cache to show the intent of "+zone, func() (bool, error) {
		cached := &v1alpha1.RolloutGroup{}
		if err := e.r.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: group}, cached); err != nil {
			return false, err
		}
		return cached.Status.Disruption != nil && slices.ContainsFunc(cached.Status.Disruption.Intents, func(in v1alpha1.DisruptionIntent) bool { return in.Zone == zone }), nil
	})
}

// holdHidingGroups serves the reconciler's cached RolloutGroup reads without
// status.disruption, as a cache that has not seen an intent recorded a
// moment ago would: with the resourceVersion of a version before it, so
// that a write made on that copy meets a Conflict, as it would.
type holdHidingGroups struct {
	client.Client
}

func (h holdHidingGroups) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := h.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	if rg, ok := obj.(*v1alpha1.RolloutGroup); ok && rg.Status.Disruption != nil {
		rg.Status.Disruption = nil
		rg.ResourceVersion = "1"
	}
	return nil
}

// The second scenario: the group's live read covered only the member
// it rolls, so a follower's downscale (or an eviction) that the cache did not
// show yet did not stop a batch. A decision that disrupts a zone now records
// its intent first: while another zone's recorded intent names a pod shown
// untouched, the rollout of zone-a deletes nothing, whether or not the cache
// shows the intent yet, says which zone holds the budget, why and for whom,
// and writes nothing.
func TestControllerWaitsForAnotherZonesHold(t *testing.T) {
	for _, tt := range []struct {
		name   string
		reason v1alpha1.DisruptionReason
		holder string
		// cacheBehind hides the hold from the reconciler's cache.
		cacheBehind bool
	}{
		{"a downscale of zone-b, the cache shows its intent", v1alpha1.DisruptionDownscale, "ScalingPolicy zone-b", false},
		{"a downscale of zone-b, the cache does not show its intent yet", v1alpha1.DisruptionDownscale, "ScalingPolicy zone-b", true},
		{"an eviction in zone-b, the cache shows its intent", v1alpha1.DisruptionEviction, "eviction of pod zone-b-3", false},
		{"an eviction in zone-b, the cache does not show its intent yet", v1alpha1.DisruptionEviction, "eviction of pod zone-b-3", true},
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

			// zone-b's pods are all there and Ready: the decision that let
			// zone-b-3 go (a downscale from 4 to 3, or its eviction) has not
			// acted yet, or its effect has not reached any view.
			hold := e.writeHold("ingester", "zone-b", tt.reason, tt.holder, 3)
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
				t.Errorf("%d pods of zone-a terminating, want none: zone-b-3's %s is recorded and the pod shown untouched", n, tt.reason)
			}
			if expires := hold.Intents[0].ExpiresAt.Time; res.RequeueAfter <= 0 || res.RequeueAfter > time.Until(expires)+time.Second {
				t.Errorf("RequeueAfter = %s, want (0, %s]: at the latest when the intent expires", res.RequeueAfter, time.Until(expires))
			}
			rg := e.GetGroup("ingester")
			c := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionProgressing)
			if c == nil || c.Reason != v1alpha1.ReasonWaitingForDisruption {
				t.Errorf("Progressing = %+v, want reason %s", c, v1alpha1.ReasonWaitingForDisruption)
			}
			for _, s := range []string{"zone-b", strings.ToLower(string(tt.reason)), tt.holder} {
				if !strings.Contains(rg.Status.Message, s) {
					t.Errorf("message %q does not name %q", rg.Status.Message, s)
				}
			}
			if got := rg.Status.Disruption; !equality.Semantic.DeepEqual(got, hold) {
				t.Errorf("status.disruption = %+v after the pass, want zone-b's intent untouched, nothing recorded %+v", got, hold)
			}
		})
	}
}

// An eviction in the zone being rolled does not stop it: the rollout goes on
// within zone-a's maxUnavailable, counting the evicted pod (seen
// terminating), and records its batch after the eviction, which it keeps.
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
	evicted := e.writeHold("ingester", "zone-a", v1alpha1.DisruptionEviction, "eviction of pod zone-a-0", 0)
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
	// The batch recorded before it went, after the eviction, which is not
	// seen done (its pod terminating, not replaced).
	h := e.GetGroup("ingester").Status.Disruption
	if h == nil || len(h.Intents) != 2 || !equality.Semantic.DeepEqual(h.Intents[0], evicted.Intents[0]) {
		t.Fatalf("status.disruption = %+v, want the eviction's intent %+v, then the batch's", h, evicted.Intents)
	}
	if in := h.Intents[1]; in.Zone != "zone-a" || in.Reason != v1alpha1.DisruptionRollout || in.Holder != "RolloutGroup ingester" ||
		len(in.Pods) != 1 || in.Pods[0].Name != "zone-a-3" || in.Pods[0].UID == "" || in.DecidedAt.Before(&evicted.Intents[0].DecidedAt) {
		t.Errorf("batch's intent %+v, want zone-a's rollout by RolloutGroup ingester, naming zone-a-3 and its UID, decided after the eviction", in)
	}
}

// Only budget.Acquire writes status.disruption. The controller's own status
// writes never send it: an intent another decision recorded survives them,
// in a process that takes the group over (whose first write is computed
// against the status as read, record included) and in one that has written
// before.
func TestControllerStatusWritesKeepAnotherDecisionsHold(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.StatefulSet("zone-a", 3, "r1")
	e.Pods(a, 3, "r1", controllertest.PodSpec{Bound: true})
	e.Group("ingester", 1, "zone-a")
	hold := e.writeHold("ingester", "zone-a", v1alpha1.DisruptionEviction, "eviction of pod zone-a-2", 2)
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
