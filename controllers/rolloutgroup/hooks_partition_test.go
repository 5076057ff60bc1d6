package rolloutgroup

import (
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/test/builders"
)

// A RollingUpdate member's pods are removed by the StatefulSet controller
// once Echelon lowers the partition, so beforePodRemoval is called, with
// reason rollout, for exactly the outdated pods the lowered partition
// releases, each once, while the partition is still where it was. Under
// failurePolicy Fail a refusal keeps the partition above the refusing pod:
// not lowered at all when it is the batch's highest, lowered only past the
// pods above it otherwise; the HookFailed condition and an Event name it.
// Under Ignore the partition goes down all the same.
func TestBeforePodRemovalHookOnPartitionRelease(t *testing.T) {
	e := newEnv(t, envOptions{})
	srv := e.startHookServer()
	for _, name := range []string{"zone-a", "zone-b"} {
		sts := e.StatefulSet(name, 3, "r1")
		e.Pods(sts, 3, "r1", controllertest.PodSpec{})
		e.setStrategy(name, appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType})
	}
	rg := builders.MakeRolloutGroup(e.NS, "ingester").MaxUnavailable(2).Members("zone-a", "zone-b").Obj()
	rg.Spec.Hooks = &v1alpha1.RolloutGroupHooks{BeforePodRemoval: &v1alpha1.PodRemovalHook{
		Endpoint:   v1alpha1.PrepareEndpoint{Port: 8080, Path: "/prepare-removal"},
		HookPolicy: v1alpha1.HookPolicy{Retries: ptr.To[int32](0), Timeout: &metav1.Duration{Duration: 2 * time.Second}},
	}}
	if err := e.Admin.Create(e.Ctx, rg); err != nil {
		t.Fatal(err)
	}
	e.playRevisions() // observes each partition write; the template's image names the revision
	e.reconcileUntil(e.r, "ingester", 10*time.Second, "both partitions held at 3", func(*v1alpha1.RolloutGroup) (bool, error) {
		return e.partitionOf("zone-a") == 3 && e.partitionOf("zone-b") == 3, nil
	})

	// A new revision, zone-a-1 already on it: maxUnavailable 2 releases
	// zone-a-2 and zone-a-0 (partition 3 -> 0), and only they are called.
	for _, name := range []string{"zone-a", "zone-b"} {
		if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			sts := e.GetSTS(name)
			sts.Spec.Template.Spec.Containers[0].Image = "app:r2"
			return e.Admin.Update(e.Ctx, sts)
		}); err != nil {
			t.Fatal(err)
		}
	}
	e.Eventually(10*time.Second, "r2 observed", func() (bool, error) {
		return e.GetSTS("zone-a").Status.UpdateRevision == "r2" && e.GetSTS("zone-b").Status.UpdateRevision == "r2", nil
	})
	e.RecreatePod(e.GetSTS("zone-a"), 1, "r2", controllertest.PodSpec{})
	if err := e.CountPods("zone-a"); err != nil {
		t.Fatal(err)
	}
	e.reconcileUntil(e.r, "ingester", 10*time.Second, "zone-a's partition lowered", func(*v1alpha1.RolloutGroup) (bool, error) {
		return e.partitionOf("zone-a") < 3, nil
	})
	if p := e.partitionOf("zone-a"); p != 0 {
		t.Errorf("zone-a partition %d, want 0 (zone-a-2 and zone-a-0 released)", p)
	}
	e.reconcile("ingester") // released pods not yet replaced: no new batch, no new call
	if got, want := srv.removalCalls(v1alpha1.RemovalRollout), map[string]int{"zone-a-2": 1, "zone-a-0": 1}; !maps.Equal(got, want) {
		t.Errorf("beforePodRemoval calls with reason rollout %v, want %v (the released outdated pods, once each)", got, want)
	}
	for _, c := range srv.recorded() {
		if c.partition != 3 || !c.podLive || c.body.Member != "zone-a" || c.body.Revision != "r2" || c.body.Group != "ingester" {
			t.Errorf("call %+v (partition %d when called): want it before the partition moved from 3, the pod there, member zone-a, revision r2", c.body, c.partition)
		}
	}
	if got := e.ReplaceReleased("zone-a"); !slices.Equal(got, []string{"zone-a-2", "zone-a-0"}) {
		t.Errorf("the StatefulSet controller replaced %v, want zone-a-2 and zone-a-0", got)
	}

	// Fail (the default): zone-b-2 and zone-b-1 refuse. zone-b-2 is the
	// batch's highest pod: the partition stays at 3.
	srv.setFailing("zone-b-2", true)
	srv.setFailing("zone-b-1", true)
	e.reconcileUntil(e.r, "ingester", 40*time.Second, "HookFailed naming zone-b-2", func(rg *v1alpha1.RolloutGroup) (bool, error) {
		c := hookCondition(rg)
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "pod zone-b-2 not removed") &&
			strings.Contains(c.Message, "answered 500"), nil
	})
	for range 2 {
		e.reconcile("ingester")
		if p := e.partitionOf("zone-b"); p != 3 {
			t.Fatalf("zone-b partition %d while its highest pod's hook fails under Fail, want 3", p)
		}
	}
	if n := srv.removalCalls(v1alpha1.RemovalRollout)["zone-b-2"]; n < 3 {
		t.Errorf("zone-b-2 called %d times, want it called again on each pass (at least 3)", n)
	}
	if msg := e.GetGroup("ingester").Status.Message; !strings.Contains(msg, "zone-b-2") {
		t.Errorf("status message %q, want it to name the held pod", msg)
	}
	e.waitEventNote("ingester", v1alpha1.ReasonHookFailed, "pod zone-b-2 not released (the partition of StatefulSet zone-b is not lowered past it)")

	// zone-b-2 answers, zone-b-1 still refuses: the partition goes down past
	// zone-b-2 only.
	srv.setFailing("zone-b-2", false)
	e.reconcileUntil(e.r, "ingester", 40*time.Second, "zone-b's partition lowered", func(*v1alpha1.RolloutGroup) (bool, error) {
		return e.partitionOf("zone-b") < 3, nil
	})
	if p := e.partitionOf("zone-b"); p != 2 {
		t.Errorf("zone-b partition %d while zone-b-1's hook fails, want 2 (zone-b-2 released alone)", p)
	}
	if c := hookCondition(e.GetGroup("ingester")); c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "pod zone-b-1 not removed") {
		t.Errorf("HookFailed %+v, want True naming zone-b-1", c)
	}
	e.ReplaceReleased("zone-b")

	// Ignore: zone-b-1 still refuses, and goes all the same.
	e.updateGroup(func(s *v1alpha1.RolloutGroupSpec) { s.Hooks.BeforePodRemoval.FailurePolicy = v1alpha1.HookIgnore })
	e.reconcileUntil(e.r, "ingester", 40*time.Second, "zone-b's partition lowered under Ignore", func(*v1alpha1.RolloutGroup) (bool, error) {
		return e.partitionOf("zone-b") < 2, nil
	})
	if got := e.ReplaceReleased("zone-b"); !slices.Equal(got, []string{"zone-b-1", "zone-b-0"}) {
		t.Errorf("released under Ignore %v, want zone-b-1 and zone-b-0", got)
	}
	e.reconcileUntil(e.r, "ingester", 40*time.Second, "Complete", func(rg *v1alpha1.RolloutGroup) (bool, error) {
		return rg.Status.Phase == v1alpha1.PhaseComplete, nil
	})
	if c := hookCondition(e.GetGroup("ingester")); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("HookFailed %+v after the rollout under Ignore, want False", c)
	}
	e.waitEventNote("ingester", v1alpha1.ReasonHookFailed, "zone-b-1 failed, ignored (failurePolicy Ignore)")
	calls := srv.removalCalls(v1alpha1.RemovalRollout)
	if calls["zone-b-0"] != 1 || calls["zone-a-1"] != 0 {
		t.Errorf("calls %v: want zone-b-0 called once, zone-a-1 (already updated) never", calls)
	}
}

// waitEventNote waits for an Event of reason about the group whose note
// contains part (Events are sent asynchronously).
func (e *env) waitEventNote(group, reason, part string) {
	e.T.Helper()
	e.Eventually(10*time.Second, reason+" Event saying "+part, func() (bool, error) {
		return slices.ContainsFunc(e.eventNotes(group, reason), func(n string) bool { return strings.Contains(n, part) }), nil
	})
}

// eventNotes returns the notes of the group's Events of reason.
func (e *env) eventNotes(group, reason string) []string {
	e.T.Helper()
	var list eventsv1.EventList
	if err := e.Admin.List(e.Ctx, &list, client.InNamespace(e.NS)); err != nil {
		e.T.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.Regarding.Name == group && ev.Regarding.Kind == "RolloutGroup" && ev.Reason == reason {
			out = append(out, ev.Note)
		}
	}
	return out
}
