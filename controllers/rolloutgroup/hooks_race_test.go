package rolloutgroup

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
)

// A slow beforePodRemoval hook races an eviction of another zone (issue 29,
// finding 1). The hook is called before the budget decides, so while
// zone-a's pods hear it nothing of zone-a is recorded and an eviction of
// zone-b is admitted; once the hook answers the rollout decides on what the
// API server then holds, sees zone-b's pod taken, and waits until zone-b is
// whole again. Before, the rollout recorded its hold, called the hook, and
// deleted the batch after it without another look: a hook outlasting the
// 15 s lease let zone-b go too. The monitor watches every pod throughout.
func TestSlowHookRacesAnEvictionOfAnotherZone(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	srv := e.startHookServer()
	hook := &v1alpha1.RolloutGroupHooks{BeforePodRemoval: &v1alpha1.PodRemovalHook{
		Endpoint:   v1alpha1.PrepareEndpoint{Port: 8080, Path: "/prepare-removal"},
		HookPolicy: v1alpha1.HookPolicy{Retries: ptr.To[int32](0), Timeout: &metav1.Duration{Duration: 10 * time.Second}},
	}}
	mon := e.hookedMembers(hook, "zone-a", "zone-b")

	var once sync.Once
	evicted := make(chan disruption.Verdict, 1)
	srv.during = func(c hookCall) {
		if !strings.HasPrefix(c.body.Pod, "zone-a-") {
			return
		}
		once.Do(func() {
			v, err := e.evictRecorded("zone-b", "zone-b-0")
			if err != nil {
				t.Errorf("eviction of zone-b-0: %v", err)
			}
			evicted <- v
		})
	}
	deniedBefore := rolloutDenials()
	e.rollTo("r2", "zone-a")
	select {
	case v := <-evicted:
		if !v.Allowed {
			t.Fatalf("eviction of zone-b-0 while zone-a's pods hear the hook refused: %s (a hold recorded before the hook)", v.Message)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no hook call for a pod of zone-a")
	}
	e.Eventually(60*time.Second, "zone-a rolled to r2 and the group complete", func() (bool, error) {
		return e.podRevisions("zone-a")["r2"] == 2 && e.GetGroup("ingester").Status.Phase == v1alpha1.PhaseComplete, nil
	})
	expectNoBreaches(t, mon)
	// The batch was decided after the hook answered, on zone-b-0 taken: the
	// budget refused it at least once before zone-b was whole again.
	if denied := rolloutDenials() - deniedBefore; denied < 1 {
		t.Errorf("the rollout's batch was never refused while zone-b-0 was being replaced (%v refusals): it was decided before the eviction", denied)
	}
}

// rolloutDenials counts the rollout batches the budget refused because
// another zone had pods taken, in this test binary.
func rolloutDenials() float64 {
	return testutil.ToFloat64(metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterRollout, "denied", disruption.CodeOtherZoneDisrupted)) +
		testutil.ToFloat64(metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterRollout, "denied", disruption.CodeHeldByOtherZone))
}

// evictRecorded admits the eviction of pod as the eviction webhook does
// (budget.Acquire on the group as the API server holds it, its intent
// recorded), then deletes the pod as the API server would.
func (e *env) evictRecorded(zone, pod string) (disruption.Verdict, error) {
	key := types.NamespacedName{Namespace: e.NS, Name: "ingester"}
	decide := func(ctx context.Context, rg *v1alpha1.RolloutGroup) (disruption.Verdict, error) {
		view, err := budget.GroupView(ctx, e.Admin, rg, v1alpha1.DisruptionEviction, time.Now())
		if err != nil {
			return disruption.Verdict{}, err
		}
		return disruption.Decide(view, disruption.Request{Zone: zone, Reason: v1alpha1.DisruptionEviction, Pods: []string{pod}, Holder: "eviction of pod " + pod}), nil
	}
	v, err := budget.Acquire(e.Ctx, e.Admin, e.Admin, key, func() *v1alpha1.RolloutGroup { return &v1alpha1.RolloutGroup{} }, decide, false, metrics.RequesterEviction)
	if err != nil || !v.Allowed {
		return v, err
	}
	p := &corev1.Pod{}
	if err := e.Admin.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: pod}, p); err != nil {
		return v, err
	}
	return v, e.Admin.Delete(e.Ctx, p, client.Preconditions{UID: &p.UID})
}
