package rolloutgroup

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/controllers/internal/controllertest"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
)

// startMonitor watches every pod of the namespace and records each breach of
// the guarantees at the moment a pod is rolled.
func (e *env) startMonitor(maxUnavailable int32, replicas int, members ...string) *framework.Monitor {
	e.T.Helper()
	cs, err := kubernetes.NewForConfig(controllertest.APIServer(e.T).Config())
	if err != nil {
		e.T.Fatal(err)
	}
	var watched []framework.WatchedMember
	for _, m := range members {
		watched = append(watched, framework.WatchedMember{Name: m, Replicas: replicas, MaxUnavailable: intstr.FromInt32(maxUnavailable)})
	}
	mon, err := framework.StartMonitor(e.Ctx, cs, e.NS, watched)
	if err != nil {
		e.T.Fatal(err)
	}
	e.T.Cleanup(mon.Stop)
	return mon
}

func (e *env) waitPhase(group string, phase v1alpha1.RolloutPhase, timeout time.Duration) *v1alpha1.RolloutGroup {
	e.T.Helper()
	var rg *v1alpha1.RolloutGroup
	e.Eventually(timeout, "group "+group+" phase "+string(phase), func() (bool, error) {
		rg = e.GetGroup(group)
		return rg.Status.Phase == phase && rg.Status.ObservedGeneration == rg.Generation, nil
	})
	return rg
}

// waitRolledTo waits until the group is Complete with every member on rev.
func (e *env) waitRolledTo(group, rev string, timeout time.Duration) *v1alpha1.RolloutGroup {
	e.T.Helper()
	var rg *v1alpha1.RolloutGroup
	e.Eventually(timeout, "group "+group+" complete on "+rev, func() (bool, error) {
		rg = e.GetGroup(group)
		if rg.Status.Phase != v1alpha1.PhaseComplete {
			return false, nil
		}
		for _, m := range rg.Status.StatefulSets {
			if m.UpdateRevision != rev || m.UpdatedReplicas != m.Replicas {
				return false, nil
			}
		}
		return true, nil
	})
	return rg
}

func expectNoBreaches(t *testing.T, mon *framework.Monitor) {
	t.Helper()
	for _, b := range mon.Breaches() {
		t.Errorf("breach at %s: %s", b.At.Format(time.StampMilli), b.Detail)
	}
}

// The controller is driven by its watches alone: a new update revision on the
// StatefulSets (a status change), pods becoming Ready, and nothing else, take
// the group from Complete through a rollout to Complete, and each member's
// status.currentRevision is set once its pods all run the new revision.
func TestControllerRollsOutOnWatchEventsAlone(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	a, b := e.StatefulSet("zone-a", 4, "r1"), e.StatefulSet("zone-b", 4, "r1")
	e.Pods(a, 4, "r1", controllertest.PodSpec{})
	e.Pods(b, 4, "r1", controllertest.PodSpec{})
	e.Group("ingester", 2, "zone-a", "zone-b")
	e.waitPhase("ingester", v1alpha1.PhaseComplete, 20*time.Second)

	e.PlayStatefulSetController(controllertest.KubeletTiming{ReadyAfter: 100 * time.Millisecond}, "zone-a", "zone-b")
	mon := e.startMonitor(2, 4, "zone-a", "zone-b")
	e.SetRevisions("zone-a", "r1", "r2")
	e.SetRevisions("zone-b", "r1", "r2")

	rg := e.waitRolledTo("ingester", "r2", 60*time.Second)
	expectNoBreaches(t, mon)
	if rg.Status.Updated != "8/8" || rg.Status.PodsRolled != 8 {
		t.Errorf("updated %s, podsRolled %d: want 8/8 and 8", rg.Status.Updated, rg.Status.PodsRolled)
	}
	if order := mon.MemberOrder(); strings.Join(order, ",") != "zone-a,zone-b" {
		t.Errorf("members rolled in order %v, want zone-a then zone-b", order)
	}
	for _, name := range []string{"zone-a", "zone-b"} {
		e.Eventually(10*time.Second, name+" status.currentRevision r2", func() (bool, error) {
			return e.GetSTS(name).Status.CurrentRevision == "r2", nil
		})
	}
}

// A new process (a leader after a handover) whose cache has not seen deletions
// made by someone else plans on pods that are gone; the live read of the member
// before the batch stops it from taking the member past maxUnavailable.
func TestControllerStaleViewAfterSomeoneElsesDeletions(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.StatefulSet("zone-a", 6, "r1")
	e.Pods(a, 6, "r1", controllertest.PodSpec{Bound: true})
	e.Group("ingester", 2, "zone-a")
	e.Eventually(10*time.Second, "the cache to hold the pods", func() (bool, error) {
		var list corev1.PodList
		err := e.view.List(e.Ctx, &list, client.InNamespace(e.NS))
		return len(list.Items) == 6, err
	})
	e.SetRevisions("zone-a", "r1", "r2")

	// The view freezes with every pod Ready; then two pods are deleted behind
	// its back (the old leader's last batch, or a person). Being bound to a
	// node, they stay terminating.
	if err := e.view.freeze(e.Ctx); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"zone-a-0", "zone-a-1"} {
		if err := e.Admin.Delete(e.Ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: name}}); err != nil {
			t.Fatal(err)
		}
	}
	e.Eventually(10*time.Second, "the StatefulSet to be observed with r2", func() (bool, error) {
		return e.r.Get(e.Ctx, client.ObjectKeyFromObject(a), a) == nil && a.Status.UpdateRevision == "r2", nil
	})

	e.reconcile("ingester")
	if n := e.Terminating("zone-a"); n != 2 {
		t.Errorf("%d pods of zone-a terminating after the reconcile, want the 2 deleted before it (maxUnavailable 2)", n)
	}
	if e.liveReads.count() != 1 {
		t.Errorf("%d live reads, want exactly 1 for the one batch planned", e.liveReads.count())
	}
	rg := e.GetGroup("ingester")
	if c := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionProgressing); c == nil || c.Reason != v1alpha1.ReasonWaitingForPods {
		t.Errorf("Progressing = %+v, want reason %s", c, v1alpha1.ReasonWaitingForPods)
	}
}

// Within one process, the expectations (deleted pod UIDs) cover the cache lag
// after the process's own batch: a second pass on a view that has not seen the
// deletions deletes nothing and needs no live read.
func TestControllerExpectationsCoverTheProcessOwnDeletions(t *testing.T) {
	deletes := 0
	e := newEnv(t, envOptions{wrapClient: func(c client.Client) client.Client {
		return &deleteHook{Client: c, before: func(context.Context, client.Object) { deletes++ }}
	}})
	a := e.StatefulSet("zone-a", 6, "r1")
	e.Pods(a, 6, "r1", controllertest.PodSpec{Bound: true})
	e.Group("ingester", 2, "zone-a")
	e.SetRevisions("zone-a", "r1", "r2")
	e.Eventually(10*time.Second, "the cache to hold the pods and the revision", func() (bool, error) {
		var list corev1.PodList
		if err := e.view.List(e.Ctx, &list, client.InNamespace(e.NS)); err != nil {
			return false, err
		}
		return len(list.Items) == 6 && e.r.Get(e.Ctx, client.ObjectKeyFromObject(a), a) == nil && a.Status.UpdateRevision == "r2", nil
	})
	if err := e.view.freeze(e.Ctx); err != nil {
		t.Fatal(err)
	}

	e.reconcile("ingester")
	if n := e.Terminating("zone-a"); n != 2 {
		t.Fatalf("first batch: %d pods terminating, want 2", n)
	}
	reads, attempts := e.liveReads.count(), deletes
	e.reconcile("ingester") // the frozen view still shows both pods Ready
	if n := e.Terminating("zone-a"); n != 2 {
		t.Errorf("second pass on a stale view: %d pods terminating, want still 2", n)
	}
	if deletes != attempts {
		t.Errorf("second pass tried %d deletions, want none", deletes-attempts)
	}
	if e.liveReads.count() != reads {
		t.Errorf("second pass made %d live reads; the expectations alone should have held it back", e.liveReads.count()-reads)
	}
}

// With every pod event reaching the cache 300ms late, while StatefulSet status
// updates (which trigger reconciles) arrive on time, the controller rolls a
// group faster than the lag: no pod is rolled past the guarantees, and none
// twice (a terminating pod the stale cache still shows Ready is not deleted
// again, nor counted).
func TestControllerLaggingCacheNeverExceedsMaxUnavailable(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true, podLag: 300 * time.Millisecond})
	for _, name := range []string{"zone-a", "zone-b", "zone-c"} {
		e.Pods(e.StatefulSet(name, 5, "r1"), 5, "r1", controllertest.PodSpec{Bound: true})
	}
	e.Group("ingester", 2, "zone-a", "zone-b", "zone-c")
	e.waitPhase("ingester", v1alpha1.PhaseComplete, 20*time.Second)

	e.PlayStatefulSetController(controllertest.KubeletTiming{ReadyAfter: 50 * time.Millisecond, TerminateAfter: 200 * time.Millisecond}, "zone-a", "zone-b", "zone-c")
	mon := e.startMonitor(2, 5, "zone-a", "zone-b", "zone-c")
	for _, name := range []string{"zone-a", "zone-b", "zone-c"} {
		e.SetRevisions(name, "r1", "r2")
	}
	rg := e.waitRolledTo("ingester", "r2", 90*time.Second)
	expectNoBreaches(t, mon)
	if rg.Status.Updated != "15/15" || rg.Status.PodsRolled != 15 {
		t.Errorf("updated %s, podsRolled %d: want 15/15 and 15", rg.Status.Updated, rg.Status.PodsRolled)
	}
	if n := len(mon.Rolls()); n != 15 {
		t.Errorf("%d pods rolled, want each of the 15 once", n)
	}
}

// deleteHook runs before every pod deletion the reconciler makes.
type deleteHook struct {
	client.Client
	before func(ctx context.Context, pod client.Object)
}

func (d *deleteHook) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	d.before(ctx, obj)
	return d.Client.Delete(ctx, obj, opts...)
}

// A NotFound or a Conflict on a deletion is evidence the plan was made on a
// stale view: the batch ends there, the rest of it is not deleted, and the group
// is planned again soon, without an error.
func TestControllerStaleViewOnDeletionEndsTheBatch(t *testing.T) {
	for _, tt := range []struct {
		name string
		// interfere changes the pod just before the reconciler deletes it.
		interfere func(e *env, pod client.Object)
	}{
		{"NotFound: the pod is already gone", func(e *env, pod client.Object) {
			if err := e.Admin.Delete(e.Ctx, pod.DeepCopyObject().(client.Object), client.GracePeriodSeconds(0)); err != nil {
				e.T.Fatal(err)
			}
		}},
		{"Conflict: the pod was replaced by one with a new UID", func(e *env, pod client.Object) {
			if err := e.Admin.Delete(e.Ctx, pod.DeepCopyObject().(client.Object), client.GracePeriodSeconds(0)); err != nil {
				e.T.Fatal(err)
			}
			e.Pod(e.GetSTS("zone-a"), 3, "r1", controllertest.PodSpec{})
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var e *env
			interfered := 0
			e = newEnv(t, envOptions{wrapClient: func(c client.Client) client.Client {
				return &deleteHook{Client: c, before: func(_ context.Context, pod client.Object) {
					if interfered++; interfered == 1 {
						tt.interfere(e, pod)
					}
				}}
			}})
			a := e.StatefulSet("zone-a", 4, "r1")
			e.Pods(a, 4, "r1", controllertest.PodSpec{Bound: true})
			e.Group("ingester", 2, "zone-a")
			e.SetRevisions("zone-a", "r1", "r2")
			e.Eventually(10*time.Second, "the cache to see the revision", func() (bool, error) {
				return e.r.Get(e.Ctx, client.ObjectKeyFromObject(a), a) == nil && a.Status.UpdateRevision == "r2", nil
			})

			res, err := e.r.Reconcile(e.Ctx, reconcileRequest(e, "ingester"))
			if err != nil {
				t.Fatalf("Reconcile returned %v; a stale view is not an error", err)
			}
			if res.RequeueAfter <= 0 || res.RequeueAfter > staleViewRetryInterval {
				t.Errorf("RequeueAfter = %s, want (0, %s]", res.RequeueAfter, staleViewRetryInterval)
			}
			if interfered != 1 {
				t.Errorf("%d deletions attempted, want the batch to end at the first", interfered)
			}
			if n := e.Terminating("zone-a"); n != 0 {
				t.Errorf("%d pods terminating, want none: the second pod of the batch must not be deleted", n)
			}
		})
	}
}

// failingDeletes fails every pod deletion with a server error while fail is set.
type failingDeletes struct {
	client.Client
	fail bool
}

func (f *failingDeletes) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if f.fail {
		return apierrors.NewInternalError(errors.New("injected by the test"))
	}
	return f.Client.Delete(ctx, obj, opts...)
}

// status.observedGeneration says a pass over that generation succeeded: a
// pass whose action failed keeps the generation before it, as Cluster API
// does, while the rest of its status is still written.
func TestControllerFailedPassKeepsObservedGeneration(t *testing.T) {
	deletes := &failingDeletes{}
	e := newEnv(t, envOptions{wrapClient: func(c client.Client) client.Client {
		deletes.Client = c
		return deletes
	}})
	a := e.StatefulSet("zone-a", 3, "r1")
	e.Pods(a, 3, "r1", controllertest.PodSpec{Bound: true})
	e.Group("ingester", 1, "zone-a")
	e.Eventually(10*time.Second, "the cache to see the group", func() (bool, error) {
		return e.r.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "ingester"}, &v1alpha1.RolloutGroup{}) == nil, nil
	})
	e.reconcile("ingester")
	if got := e.GetGroup("ingester").Status.ObservedGeneration; got != 1 {
		t.Fatalf("observedGeneration = %d after a pass that succeeded, want 1", got)
	}

	rg := e.GetGroup("ingester")
	rg.Spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
	if err := e.Admin.Update(e.Ctx, rg); err != nil {
		t.Fatal(err)
	}
	e.SetRevisions("zone-a", "r1", "r2")
	e.Eventually(10*time.Second, "the cache to see generation 2 and the revision", func() (bool, error) {
		cached := &v1alpha1.RolloutGroup{}
		return e.r.Get(e.Ctx, client.ObjectKeyFromObject(rg), cached) == nil && cached.Generation == 2 &&
			e.r.Get(e.Ctx, client.ObjectKeyFromObject(a), a) == nil && a.Status.UpdateRevision == "r2", nil
	})
	deletes.fail = true
	if _, err := e.r.Reconcile(e.Ctx, reconcileRequest(e, "ingester")); err == nil {
		t.Fatal("Reconcile succeeded; want the injected deletion error")
	}
	if got := e.GetGroup("ingester").Status.ObservedGeneration; got != 1 {
		t.Errorf("observedGeneration = %d after a failed pass over generation 2, want 1", got)
	}

	deletes.fail = false
	e.reconcile("ingester")
	if got := e.GetGroup("ingester").Status.ObservedGeneration; got != 2 {
		t.Errorf("observedGeneration = %d after a pass over generation 2 succeeded, want 2", got)
	}
}

// failingStatefulSetStatus fails every write of a StatefulSet's status with a
// server error; other writes pass through.
type failingStatefulSetStatus struct {
	client.Client
}

func (f *failingStatefulSetStatus) Status() client.SubResourceWriter {
	return &failingStatusWriter{SubResourceWriter: f.Client.Status()}
}

type failingStatusWriter struct {
	client.SubResourceWriter
}

func (w *failingStatusWriter) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if _, ok := obj.(*appsv1.StatefulSet); ok {
		return apierrors.NewInternalError(errors.New("injected by the test"))
	}
	return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
}

// A pass where one action meets a stale view (a pod already gone) and
// another fails (the write of a complete member's currentRevision) has
// failed: the failure is returned, not swallowed with the stale view, and
// observedGeneration is not bumped.
func TestControllerStaleViewDoesNotHideAFailure(t *testing.T) {
	var e *env
	interfered := false
	e = newEnv(t, envOptions{wrapClient: func(c client.Client) client.Client {
		return &deleteHook{Client: &failingStatefulSetStatus{Client: c}, before: func(_ context.Context, pod client.Object) {
			if !interfered {
				interfered = true
				if err := e.Admin.Delete(e.Ctx, pod.DeepCopyObject().(client.Object), client.GracePeriodSeconds(0)); err != nil {
					e.T.Fatal(err)
				}
			}
		}}
	}})
	a := e.StatefulSet("zone-a", 2, "r1")
	e.Pods(a, 2, "r2", controllertest.PodSpec{Bound: true})
	e.SetRevisions("zone-a", "r1", "r2") // every pod on r2: currentRevision to advance
	b := e.StatefulSet("zone-b", 2, "r1")
	e.Pods(b, 2, "r1", controllertest.PodSpec{Bound: true})
	e.SetRevisions("zone-b", "r1", "r2")
	e.Group("ingester", 1, "zone-a", "zone-b")
	e.Eventually(10*time.Second, "the cache to see the group and both revisions", func() (bool, error) {
		return e.r.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "ingester"}, &v1alpha1.RolloutGroup{}) == nil &&
			e.r.Get(e.Ctx, client.ObjectKeyFromObject(a), a) == nil && a.Status.UpdateRevision == "r2" &&
			e.r.Get(e.Ctx, client.ObjectKeyFromObject(b), b) == nil && b.Status.UpdateRevision == "r2", nil
	})

	_, err := e.r.Reconcile(e.Ctx, reconcileRequest(e, "ingester"))
	if !interfered {
		t.Fatal("no pod deletion attempted: the pass met no stale view")
	}
	if err == nil || !strings.Contains(err.Error(), "injected by the test") {
		t.Errorf("Reconcile returned %v; want the failed currentRevision write", err)
	}
	if got := e.GetGroup("ingester").Status.ObservedGeneration; got != 0 {
		t.Errorf("observedGeneration = %d after a pass whose currentRevision write failed, want 0", got)
	}
}

// An eviction a PodDisruptionBudget refuses (429) ends the batch; the group
// says so and retries later.
func TestControllerEvictionRefusedByABudget(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.StatefulSet("zone-a", 3, "r1")
	e.Pods(a, 3, "r1", controllertest.PodSpec{Bound: true})
	rg := &v1alpha1.RolloutGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "ingester", Namespace: e.NS},
		Spec: v1alpha1.RolloutGroupSpec{StatefulSets: []v1alpha1.RolloutMember{{Name: "zone-a"}},
			MaxUnavailable: ptr.To(intstr.FromInt32(2)), PodDeletion: v1alpha1.PodDeletionEvict},
	}
	if err := e.Admin.Create(e.Ctx, rg); err != nil {
		t.Fatal(err)
	}
	// No disruption controller runs here: the test writes the budget's status,
	// allowing no disruption, as that controller would.
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Name: "zone-a", Namespace: e.NS},
		Spec:       policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(3)), Selector: a.Spec.Selector},
	}
	if err := e.Admin.Create(e.Ctx, pdb); err != nil {
		t.Fatal(err)
	}
	pdb.Status = policyv1.PodDisruptionBudgetStatus{ObservedGeneration: pdb.Generation, DisruptionsAllowed: 0,
		CurrentHealthy: 3, DesiredHealthy: 3, ExpectedPods: 3}
	if err := e.Admin.Status().Update(e.Ctx, pdb); err != nil {
		t.Fatal(err)
	}
	e.SetRevisions("zone-a", "r1", "r2")
	e.Eventually(10*time.Second, "the cache to see the revision", func() (bool, error) {
		return e.r.Get(e.Ctx, client.ObjectKeyFromObject(a), a) == nil && a.Status.UpdateRevision == "r2", nil
	})

	res := e.reconcile("ingester")
	if res.RequeueAfter <= 0 || res.RequeueAfter > evictionRetryInterval {
		t.Errorf("RequeueAfter = %s, want (0, %s]", res.RequeueAfter, evictionRetryInterval)
	}
	if n := e.Terminating("zone-a"); n != 0 {
		t.Errorf("%d pods terminating, want none", n)
	}
	got := e.GetGroup("ingester")
	c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionProgressing)
	if c == nil || c.Reason != v1alpha1.ReasonEvictionRefused || !strings.Contains(got.Status.Message, "PodDisruptionBudget") {
		t.Errorf("Progressing %+v, message %q: want reason %s and the budget named", c, got.Status.Message, v1alpha1.ReasonEvictionRefused)
	}
}

// A group with a deletionTimestamp (a finalizer holds it) deletes nothing more,
// and says why.
func TestControllerGroupBeingDeletedDeletesNothing(t *testing.T) {
	e := newEnv(t, envOptions{})
	a := e.StatefulSet("zone-a", 3, "r1")
	e.Pods(a, 3, "r1", controllertest.PodSpec{Bound: true})
	rg := e.Group("ingester", 2, "zone-a")
	rg.Finalizers = []string{"example.com/gitops"}
	if err := e.Admin.Update(e.Ctx, rg); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background() // the test's context is done by now
		err := e.Admin.Get(ctx, client.ObjectKeyFromObject(rg), rg)
		if err == nil {
			rg.Finalizers = nil
			err = e.Admin.Update(ctx, rg)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("remove finalizer: %v", err)
		}
	})
	e.SetRevisions("zone-a", "r1", "r2")
	if err := e.Admin.Delete(e.Ctx, rg); err != nil {
		t.Fatal(err)
	}
	e.Eventually(10*time.Second, "the cache to see the deletion and the revision", func() (bool, error) {
		cached := &v1alpha1.RolloutGroup{}
		if err := e.r.Get(e.Ctx, client.ObjectKeyFromObject(rg), cached); err != nil {
			return false, err
		}
		return cached.DeletionTimestamp != nil && e.r.Get(e.Ctx, client.ObjectKeyFromObject(a), a) == nil && a.Status.UpdateRevision == "r2", nil
	})

	e.reconcile("ingester")
	if n := e.Terminating("zone-a"); n != 0 {
		t.Errorf("%d pods terminating, want none", n)
	}
	got := e.GetGroup("ingester")
	if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady); got.Status.Phase != v1alpha1.PhaseBlocked || c == nil || c.Reason != v1alpha1.ReasonGroupDeleting {
		t.Errorf("phase %s, Ready %+v: want Blocked with reason %s", got.Status.Phase, c, v1alpha1.ReasonGroupDeleting)
	}
}

// Two groups claiming one StatefulSet both block; deleting one wakes the other
// through the mapping from a group to the groups sharing its members.
func TestControllerSharedMemberUnblocksWhenTheOtherGroupGoes(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	e.Pods(e.StatefulSet("zone-a", 2, "r1"), 2, "r1", controllertest.PodSpec{})
	first := e.Group("first", 1, "zone-a")
	e.Group("second", 1, "zone-a")
	for _, g := range []string{"first", "second"} {
		rg := e.waitPhase(g, v1alpha1.PhaseBlocked, 20*time.Second)
		if c := meta.FindStatusCondition(rg.Status.Conditions, v1alpha1.ConditionReady); c == nil || c.Reason != v1alpha1.ReasonMemberClaimedByOtherGroup {
			t.Errorf("group %s Ready %+v, want reason %s", g, c, v1alpha1.ReasonMemberClaimedByOtherGroup)
		}
	}
	if err := e.Admin.Delete(e.Ctx, first); err != nil {
		t.Fatal(err)
	}
	e.waitPhase("second", v1alpha1.PhaseComplete, 20*time.Second)
}
