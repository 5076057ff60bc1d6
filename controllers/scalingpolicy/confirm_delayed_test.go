package scalingpolicy

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/internal/scaling"
	"github.com/echelon-operator/echelon/test/builders"
)

// Right before it shrinks a StatefulSet, the policy checks that every pod it
// removes is the pod the DelayedDownscale prepared: a status that says pods 3
// and 2 are eligible, written before pod 2 was recreated, lets the StatefulSet
// lose pod 3 only.
func TestScalingPolicyConfirmsThePreparedPodsBeforeShrinking(t *testing.T) {
	// No DelayedDownscale controller: its status is written by hand, as it
	// stood before the pod was recreated.
	e := controllertest.New(t, controllertest.Options{})
	if err := New(e.Manager).SetupWithManager(e.Manager); err != nil {
		t.Fatal(err)
	}
	e.Start()
	sts := e.StatefulSet("ing", 4, "r1")
	uids := map[string]string{}
	for i := range 4 {
		p := e.Pod(sts, i, "r1", controllertest.PodSpec{})
		uids[p.Name] = string(p.UID)
	}
	e.MarkReady("ing")
	dd := &v1alpha1.DelayedDownscale{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "ing"},
		Spec: v1alpha1.DelayedDownscaleSpec{
			TargetRef: v1alpha1.ScalingTargetReference{Name: "ing"}, Delay: "1h",
			PrepareEndpoint: v1alpha1.PrepareEndpoint{Port: 8080, Path: "/prepare"},
		},
	}
	if err := e.Admin.Create(e.Ctx, dd); err != nil {
		t.Fatal(err)
	}
	e.Policy("ing", "ing", func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = ptr.To[int32](2) })
	e.Eventually(10*time.Second, "the policy waiting for the DelayedDownscale", func() (bool, error) {
		sp := e.GetPolicy("ing")
		return sp.Status.DesiredReplicas != nil && *sp.Status.DesiredReplicas == 2 && sp.Status.Phase == v1alpha1.ScalingPhaseWaiting, nil
	})

	e.RecreatePod(sts, 2, "r1", controllertest.PodSpec{})

	// The DelayedDownscale's status still speaks of the pod before.
	prepared, eligible := metav1.NewTime(time.Now().Add(-2*time.Hour)), metav1.NewTime(time.Now().Add(-time.Hour))
	if err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(dd), dd); err != nil {
		t.Fatal(err)
	}
	dd.Status = v1alpha1.DelayedDownscaleStatus{
		ObservedGeneration: dd.Generation, Phase: v1alpha1.DelayedPhaseScalingDown,
		DesiredReplicas: ptr.To[int32](2), Replicas: 4, EligibleReplicas: ptr.To[int32](2), PreparedCount: 2,
		PreparedPods: []v1alpha1.PreparedPod{
			{Name: "ing-3", UID: uids["ing-3"], PreparedAt: &prepared, EligibleAt: &eligible},
			{Name: "ing-2", UID: uids["ing-2"], PreparedAt: &prepared, EligibleAt: &eligible},
		},
	}
	if err := e.Admin.Status().Update(e.Ctx, dd); err != nil {
		t.Fatal(err)
	}

	e.Eventually(10*time.Second, "the StatefulSet shrunk", func() (bool, error) {
		return *e.GetSTS("ing").Spec.Replicas < 4, nil
	})
	if n := *e.GetSTS("ing").Spec.Replicas; n != 3 {
		t.Fatalf("StatefulSet shrunk to %d replicas, want 3: the new pod 2 was never prepared", n)
	}
	e.MarkReady("ing")
	// Long enough for a second pass to have shrunk it again.
	time.Sleep(2 * time.Second)
	if n := *e.GetSTS("ing").Spec.Replicas; n != 3 {
		t.Errorf("StatefulSet at %d replicas, want 3: the new pod 2 was never prepared", n)
	}
	e.Eventually(5*time.Second, "an Event naming ing-2 as recreated", func() (bool, error) {
		var list eventsv1.EventList
		if err := e.Admin.List(e.Ctx, &list, client.InNamespace(e.NS)); err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason == "DelayedDownscaleUnconfirmed" && ev.Regarding.Name == "ing" && strings.Contains(ev.Note, "ing-2 was recreated") {
				return true, nil
			}
		}
		return false, nil
	})
}

// TestConfirmedFloor: the live confirm vouches for a pod only with a record
// of its current UID, eligible now, in a status written for the
// DelayedDownscale's current spec: a status that has not caught up with a
// longer spec.delay speaks of eligibility under the old one.
func TestConfirmedFloor(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	sts := builders.MakeStatefulSet("ns", "ing").Replicas(4).Obj()
	var pods []*corev1.Pod
	for i := range 4 {
		pods = append(pods, builders.MakePod("ns", "ing", i).ControlledBy(sts).Obj())
	}
	prepared, eligible := metav1.NewTime(now.Add(-2*time.Hour)), metav1.NewTime(now.Add(-time.Hour))
	record := func(p *corev1.Pod) v1alpha1.PreparedPod {
		return v1alpha1.PreparedPod{Name: p.Name, UID: string(p.UID), PreparedAt: &prepared, EligibleAt: &eligible}
	}
	plan := scaling.Plan{Current: 4, Scale: ptr.To[int32](2)}
	for _, tc := range []struct {
		name       string
		generation int64
		observed   int64
		eligible   *int32
		want       int32
		held       string
	}{
		{name: "status of the current spec: both pods confirmed", generation: 1, observed: 1, eligible: ptr.To[int32](2), want: 2},
		{name: "spec changed since the status was written (a longer delay): nothing confirmed", generation: 2, observed: 1, eligible: ptr.To[int32](2), want: 4,
			held: "has not caught up with its spec"},
		{name: "Blocked since (another DelayedDownscale of the StatefulSet): its status allows nothing", generation: 1, observed: 1, want: 4,
			held: "allows no downscale"},
		{name: "its status allows less than its records would", generation: 1, observed: 1, eligible: ptr.To[int32](3), want: 3,
			held: "allows no further than 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dd := builders.MakeDelayedDownscale("ns", "ing").Delay("1h").Obj()
			dd.Generation = tc.generation
			dd.Status = v1alpha1.DelayedDownscaleStatus{ObservedGeneration: tc.observed, Replicas: 4,
				DesiredReplicas: ptr.To[int32](2), EligibleReplicas: tc.eligible,
				PreparedPods: []v1alpha1.PreparedPod{record(pods[3]), record(pods[2])}}
			got, held := confirmedFloor(dd, sts, pods, plan, now)
			if got != tc.want {
				t.Errorf("confirmed floor %d, want %d (held: %q)", got, tc.want, held)
			}
			if (held == "") != (tc.held == "") || !strings.Contains(held, tc.held) {
				t.Errorf("held %q, want %q", held, tc.held)
			}
		})
	}
}
