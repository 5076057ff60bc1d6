package scalingpolicy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
)

// The scenarios of issue 21: a downscale of one zone of a RolloutGroup must
// wait for the group's one disruption budget, whatever else takes pods away.
// The RolloutGroup controller does not run here: the tests write its status
// (a rollout's phase, the intents recorded) as it would.

var zones = []string{"zone-a", "zone-b", "zone-c"}

// newZones runs the controllers over three zones of three Ready pods each,
// members of RolloutGroup ingester.
func newZones(t *testing.T) *controllertest.Env {
	t.Helper()
	e := newScalingEnv(t)
	for _, name := range zones {
		sts := e.StatefulSet(name, 3, "r1")
		e.Pods(sts, 3, "r1", controllertest.PodSpec{})
		e.MarkReady(name)
	}
	e.Group("ingester", 1, zones...)
	return e
}

// shrink creates the policy of zone that asks for 2 of its 3 replicas.
func shrink(e *controllertest.Env, zone string) {
	e.T.Helper()
	e.Policy(zone, zone, func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = ptr.To[int32](2) })
}

// expectWaiting fails the test when the policy of zone shrinks it: it waits
// until the policy has judged its spec (status shows the desired 2), gives a
// pass still under way time to act, and then wants zone at 3 replicas and the
// policy Waiting for reason. It returns the policy's status message.
func expectWaiting(e *controllertest.Env, zone, why, reason string) string {
	e.T.Helper()
	shrunk := func() {
		e.T.Helper()
		if n := *e.GetSTS(zone).Spec.Replicas; n != 3 {
			e.T.Fatalf("%s shrunk from 3 to %d replicas while %s", zone, n, why)
		}
	}
	e.Eventually(10*time.Second, "the policy of "+zone+" judging its downscale", func() (bool, error) {
		shrunk()
		sp := e.GetPolicy(zone)
		return sp.Status.ObservedGeneration == sp.Generation && sp.Status.DesiredReplicas != nil && *sp.Status.DesiredReplicas == 2, nil
	})
	for range 20 {
		shrunk()
		time.Sleep(100 * time.Millisecond)
	}
	sp := e.GetPolicy(zone)
	c := meta.FindStatusCondition(sp.Status.Conditions, v1alpha1.ScalingConditionReady)
	if sp.Status.Phase != v1alpha1.ScalingPhaseWaiting || c == nil || c.Reason != reason {
		e.T.Fatalf("policy of %s: phase %s, condition %+v; want Waiting for %s", zone, sp.Status.Phase, c, reason)
	}
	return sp.Status.Message
}

func wantMessage(t *testing.T, msg string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(msg, p) {
			t.Errorf("message %q does not contain %q", msg, p)
		}
	}
}

// recordedIntent is an intent of zone for reason by holder, decided at
// decided (expiring 45 s later, as the budget records them), letting go
// zone's pods at ordinals as the API server holds them now (their UIDs).
func recordedIntent(e *controllertest.Env, zone string, reason v1alpha1.DisruptionReason, holder string, decided metav1.Time, ordinals ...int) v1alpha1.DisruptionIntent {
	e.T.Helper()
	in := v1alpha1.DisruptionIntent{Zone: zone, Reason: reason, Holder: holder, DecidedAt: decided, ExpiresAt: metav1.NewTime(decided.Add(45 * time.Second))}
	for _, o := range ordinals {
		pod := &corev1.Pod{}
		if err := e.Admin.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: fmt.Sprintf("%s-%d", zone, o)}, pod); err != nil {
			e.T.Fatal(err)
		}
		in.Pods = append(in.Pods, v1alpha1.IntentPod{Name: pod.Name, UID: string(pod.UID)})
	}
	return in
}

// setGroupStatus writes the RolloutGroup's status as its controller would.
func setGroupStatus(e *controllertest.Env, mutate func(*v1alpha1.RolloutGroupStatus)) {
	e.T.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rg := e.GetGroup("ingester")
		mutate(&rg.Status)
		return e.Admin.Status().Update(e.Ctx, rg)
	}); err != nil {
		e.T.Fatal(err)
	}
}

// Scenario 1: the RolloutGroup deleted a pod of zone-b, which terminates
// while zone-b's StatefulSet status still counts it Ready. Zone-a waits
// until zone-b is whole again, then shrinks.
func TestScalingPolicyWaitsForATerminatingPodOfAnotherZone(t *testing.T) {
	e := newZones(t)
	pod := &corev1.Pod{}
	if err := e.Admin.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "zone-b-1"}, pod); err != nil {
		t.Fatal(err)
	}
	release := e.DeleteHeld(pod)
	if sts := e.GetSTS("zone-b"); sts.Status.ReadyReplicas != 3 {
		t.Fatalf("zone-b status counts %d Ready, want the stale 3", sts.Status.ReadyReplicas)
	}
	shrink(e, "zone-a")
	msg := expectWaiting(e, "zone-a", "pod zone-b-1 terminates (status.readyReplicas 3 of 3)", v1alpha1.ScalingReasonDisruption)
	wantMessage(t, msg, "zone-b", "1 terminating")

	// The pod goes, its replacement comes back Ready: zone-b is whole.
	release()
	e.Eventually(10*time.Second, "zone-b-1 gone", func() (bool, error) {
		err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(pod), &corev1.Pod{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err := e.CountPods("zone-b"); err != nil {
		t.Fatal(err)
	}
	e.Pod(e.GetSTS("zone-b"), 1, "r1", controllertest.PodSpec{})
	if err := e.CountPods("zone-b"); err != nil {
		t.Fatal(err)
	}
	e.WaitReplicas("zone-a", 2, 20*time.Second)
	rg := e.GetGroup("ingester")
	if h := rg.Status.Disruption; h == nil || len(h.Intents) == 0 {
		t.Errorf("status.disruption of the group %+v; want the downscale of zone-a recorded", h)
	} else if in := h.Intents[len(h.Intents)-1]; in.Zone != "zone-a" || in.Reason != v1alpha1.DisruptionDownscale || in.Holder != "ScalingPolicy zone-a" ||
		len(in.Pods) != 1 || in.Pods[0].Name != "zone-a-2" || in.Pods[0].UID == "" || !in.ExpiresAt.After(in.DecidedAt.Time) {
		t.Errorf("last intent recorded %+v; want the downscale of zone-a, by ScalingPolicy zone-a, naming zone-a-2 and its UID", in)
	}
}

// Scenario 2: a downscale held back while zone-a rolled must not be released
// into zone-b's rollout: neither while the group records the intent of a
// batch of zone-b not seen done (recorded before its pods are deleted,
// before its status shows a rollout), nor while its status shows a rollout
// open at zone-b.
func TestScalingPolicyWaitsForTheRolloutOfAnotherZone(t *testing.T) {
	t.Run("intent of a batch of zone-b recorded", func(t *testing.T) {
		e := newZones(t)
		batch := recordedIntent(e, "zone-b", v1alpha1.DisruptionRollout, "RolloutGroup ingester", metav1.Now(), 2)
		setGroupStatus(e, func(st *v1alpha1.RolloutGroupStatus) {
			st.Disruption = &v1alpha1.DisruptionHold{Intents: []v1alpha1.DisruptionIntent{batch}}
		})
		shrink(e, "zone-a")
		msg := expectWaiting(e, "zone-a", "a batch of zone-b's rollout is recorded and not seen done", v1alpha1.ScalingReasonDisruption)
		wantMessage(t, msg, "rollout of zone zone-b", "RolloutGroup ingester", "a downscale waits for it")
	})
	t.Run("rollout open at zone-b", func(t *testing.T) {
		e := newZones(t)
		setGroupStatus(e, func(st *v1alpha1.RolloutGroupStatus) {
			st.Phase, st.CurrentStatefulSet, st.RolloutStartTime = v1alpha1.PhaseProgressing, "zone-b", ptr.To(metav1.Now())
		})
		shrink(e, "zone-a")
		msg := expectWaiting(e, "zone-a", "the group rolls zone-b", v1alpha1.ScalingReasonRollout)
		wantMessage(t, msg, "zone-b", "rollout")
	})
}

// Scenario 3: while the group is Analyzing, Paused or Failed half-way
// through zone-a, neither zone-a (whose pods a gate judges) nor another zone
// is shrunk.
func TestScalingPolicyWaitsForARolloutInAnyPhase(t *testing.T) {
	for _, phase := range []v1alpha1.RolloutPhase{v1alpha1.PhaseAnalyzing, v1alpha1.PhasePaused, v1alpha1.PhaseFailed} {
		t.Run(string(phase), func(t *testing.T) {
			e := newZones(t)
			setGroupStatus(e, func(st *v1alpha1.RolloutGroupStatus) {
				st.Phase, st.CurrentStatefulSet, st.RolloutStartTime = phase, "zone-a", ptr.To(metav1.Now())
			})
			shrink(e, "zone-a")
			shrink(e, "zone-b")
			for _, zone := range []string{"zone-a", "zone-b"} {
				msg := expectWaiting(e, zone, fmt.Sprintf("the group is %s half-way through zone-a", phase), v1alpha1.ScalingReasonRollout)
				wantMessage(t, msg, "zone-a")
			}
		})
	}
}

// A DelayedDownscale's release (the policy shrinking its target as far as
// the pods prepared allow) obeys the group's budget too: it waits while
// another zone's recorded eviction names a pod shown untouched, and goes
// once that pod is seen replaced and available, long before the intent
// would expire.
func TestScalingPolicyReleasesADelayedDownscaleWithinTheBudget(t *testing.T) {
	// No DelayedDownscale controller: its status is written by hand.
	e := controllertest.New(t, controllertest.Options{})
	if err := New(e.Manager).SetupWithManager(e.Manager); err != nil {
		t.Fatal(err)
	}
	e.Start()
	for _, name := range zones {
		sts := e.StatefulSet(name, 3, "r1")
		e.Pods(sts, 3, "r1", controllertest.PodSpec{})
		e.MarkReady(name)
	}
	e.Group("ingester", 1, zones...)
	dd := &v1alpha1.DelayedDownscale{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "zone-a"},
		Spec: v1alpha1.DelayedDownscaleSpec{
			TargetRef: v1alpha1.ScalingTargetReference{Name: "zone-a"}, Delay: "1h",
			PrepareEndpoint: v1alpha1.PrepareEndpoint{Port: 8080, Path: "/prepare"},
		},
	}
	if err := e.Admin.Create(e.Ctx, dd); err != nil {
		t.Fatal(err)
	}
	shrink(e, "zone-a")
	e.Eventually(10*time.Second, "the policy waiting for the DelayedDownscale", func() (bool, error) {
		sp := e.GetPolicy("zone-a")
		return sp.Status.DesiredReplicas != nil && *sp.Status.DesiredReplicas == 2 && sp.Status.Phase == v1alpha1.ScalingPhaseWaiting, nil
	})

	// A drain's eviction of zone-b-0 is recorded; then zone-a-2 has been
	// prepared for the delay.
	eviction := recordedIntent(e, "zone-b", v1alpha1.DisruptionEviction, "eviction of pod zone-b-0", metav1.Now(), 0)
	setGroupStatus(e, func(st *v1alpha1.RolloutGroupStatus) {
		st.Disruption = &v1alpha1.DisruptionHold{Intents: []v1alpha1.DisruptionIntent{eviction}}
	})
	pod := &corev1.Pod{}
	if err := e.Admin.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "zone-a-2"}, pod); err != nil {
		t.Fatal(err)
	}
	prepared, eligible := metav1.NewTime(time.Now().Add(-2*time.Hour)), metav1.NewTime(time.Now().Add(-time.Hour))
	if err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(dd), dd); err != nil {
		t.Fatal(err)
	}
	dd.Status = v1alpha1.DelayedDownscaleStatus{
		ObservedGeneration: dd.Generation, Phase: v1alpha1.DelayedPhaseScalingDown,
		DesiredReplicas: ptr.To[int32](2), Replicas: 3, EligibleReplicas: ptr.To[int32](2), PreparedCount: 1,
		PreparedPods: []v1alpha1.PreparedPod{{Name: "zone-a-2", UID: string(pod.UID), PreparedAt: &prepared, EligibleAt: &eligible}},
	}
	if err := e.Admin.Status().Update(e.Ctx, dd); err != nil {
		t.Fatal(err)
	}
	var msg string
	e.Eventually(5*time.Second, "the release waiting for the disruption budget", func() (bool, error) {
		if n := *e.GetSTS("zone-a").Spec.Replicas; n != 3 {
			t.Fatalf("zone-a shrunk to %d while zone-b-0's eviction is recorded and the pod shown untouched", n)
		}
		sp := e.GetPolicy("zone-a")
		c := meta.FindStatusCondition(sp.Status.Conditions, v1alpha1.ScalingConditionReady)
		msg = sp.Status.Message
		return c != nil && c.Reason == v1alpha1.ScalingReasonDisruption, nil
	})
	wantMessage(t, msg, "zone-b", "eviction of pod zone-b-0", "not seen going yet")
	for range 10 {
		if n := *e.GetSTS("zone-a").Spec.Replicas; n != 3 {
			t.Fatalf("zone-a shrunk to %d while zone-b-0's eviction is recorded and the pod shown untouched", n)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// The eviction happens: zone-b-0 goes and is replaced by a pod Ready at
	// once, zone-b's StatefulSet status following as its controller's would.
	gone := &corev1.Pod{}
	if err := e.Admin.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "zone-b-0"}, gone); err != nil {
		t.Fatal(err)
	}
	if err := e.Admin.Delete(e.Ctx, gone, client.GracePeriodSeconds(0)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(10*time.Second, "zone-b-0 gone", func() (bool, error) {
		err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(gone), &corev1.Pod{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	if err := e.CountPods("zone-b"); err != nil {
		t.Fatal(err)
	}
	e.Pod(e.GetSTS("zone-b"), 0, "r1", controllertest.PodSpec{})
	if err := e.CountPods("zone-b"); err != nil {
		t.Fatal(err)
	}
	e.WaitReplicas("zone-a", 2, 20*time.Second)
	if !time.Now().Before(eviction.ExpiresAt.Time) {
		t.Errorf("zone-a shrunk at %s, not before the eviction's intent expired at %s: it went on the clock, not on the replacement", time.Now().Format(time.RFC3339), eviction.ExpiresAt.Format(time.RFC3339))
	}
}
