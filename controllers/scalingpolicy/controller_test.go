package scalingpolicy

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/controllers/delayeddownscale"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/internal/podcall"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Followers of a leader scale up at once and down one zone at a time, the
// second downscale waiting for the zone delay after the first, recorded in the
// policies' status, and then for the group's disruption budget: the first
// zone's hold to lapse and its pods to be gone.
func TestScalingPolicyFollowsALeaderWithAZoneDelay(t *testing.T) {
	e := newScalingEnv(t)
	for _, name := range []string{"zone-a", "zone-b", "zone-c"} {
		e.StatefulSet(name, 3, "r1")
		e.SyncPods(name)
	}
	e.Group("ingester", 1, "zone-a", "zone-b", "zone-c")
	delay := 3 * time.Second
	for _, name := range []string{"zone-b", "zone-c"} {
		e.Policy(name, name, func(s *v1alpha1.ScalingPolicySpec) {
			s.ReplicasFrom = &v1alpha1.ReplicasSource{Leader: &v1alpha1.LeaderReference{Name: "zone-a"}}
			s.MinTimeBetweenZoneDownscales = &metav1.Duration{Duration: delay}
		})
	}

	scaleLeader(e, 5)
	for _, name := range []string{"zone-b", "zone-c"} {
		e.WaitReplicas(name, 5, 10*time.Second)
		e.SyncPods(name)
	}

	scaleLeader(e, 2)
	var first, second string
	e.Eventually(10*time.Second, "one follower downscaled", func() (bool, error) {
		b, c := *e.GetSTS("zone-b").Spec.Replicas, *e.GetSTS("zone-c").Spec.Replicas
		switch {
		case b == 2 && c == 5:
			first, second = "zone-b", "zone-c"
		case c == 2 && b == 5:
			first, second = "zone-c", "zone-b"
		case b == 2 && c == 2:
			t.Fatal("both followers downscaled at once, inside the zone delay")
		}
		return first != "", nil
	})
	firstAt := e.GetPolicy(first).Status.LastDownscaleTime
	if firstAt == nil {
		t.Fatalf("%s: no lastDownscaleTime after its downscale", first)
	}
	e.SyncPods(first)
	// The downscale is recorded twice: as intended before the patch, then at
	// the time the patch returned, from which the other zones' delay counts;
	// the second write may land after the replicas were first seen above, so
	// the wait holds until the waiting zone shows the final record's delay.
	var waiting *v1alpha1.ScalingPolicy
	e.Eventually(5*time.Second, second+" waiting for the zone delay", func() (bool, error) {
		waiting = e.GetPolicy(second)
		firstAt = e.GetPolicy(first).Status.LastDownscaleTime
		c := meta.FindStatusCondition(waiting.Status.Conditions, v1alpha1.ScalingConditionReady)
		return waiting.Status.Phase == v1alpha1.ScalingPhaseWaiting && c != nil && c.Reason == v1alpha1.ScalingReasonZoneDelay &&
			waiting.Status.WaitingUntil != nil && waiting.Status.WaitingUntil.Time.Equal(firstAt.Add(delay+time.Second)), nil // the planner's recordLead
	})
	// The first zone's hold lapses after disruption.DefaultLease.
	e.WaitReplicas(second, 2, 30*time.Second)
	secondAt := e.GetPolicy(second).Status.LastDownscaleTime
	if secondAt == nil || secondAt.Sub(firstAt.Time) < delay {
		t.Errorf("%s downscaled at %v, %s after %s; want at least the zone delay %s", second, secondAt, secondAt.Sub(firstAt.Time), first, delay)
	}
}

// scaleLeader scales zone-a to n as a person would, its pods following as
// the StatefulSet controller makes or removes them.
func scaleLeader(e *controllertest.Env, n int32) {
	e.T.Helper()
	sts := e.GetSTS("zone-a")
	sts.Spec.Replicas = ptr.To(n)
	if err := e.Admin.Update(e.Ctx, sts); err != nil {
		e.T.Fatal(err)
	}
	e.SyncPods("zone-a")
}

// Bad input never scales: a missing leader blocks, with the reason in the
// condition; a second policy on the same target blocks both.
func TestScalingPolicyBlocksOnBadInput(t *testing.T) {
	e := newScalingEnv(t)
	e.StatefulSet("zone-b", 3, "r1")
	e.MarkReady("zone-b")
	e.Policy("follow-missing", "zone-b", func(s *v1alpha1.ScalingPolicySpec) {
		s.ReplicasFrom = &v1alpha1.ReplicasSource{Leader: &v1alpha1.LeaderReference{Name: "zone-a"}}
	})
	e.Eventually(10*time.Second, "the policy blocked", func() (bool, error) {
		sp := e.GetPolicy("follow-missing")
		c := meta.FindStatusCondition(sp.Status.Conditions, v1alpha1.ScalingConditionReady)
		return sp.Status.Phase == v1alpha1.ScalingPhaseBlocked && c != nil && c.Reason == v1alpha1.ScalingReasonSourceNotFound, nil
	})
	e.Policy("self", "zone-b", func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = ptr.To[int32](1) })
	e.Eventually(10*time.Second, "the second policy blocked", func() (bool, error) {
		sp := e.GetPolicy("self")
		c := meta.FindStatusCondition(sp.Status.Conditions, v1alpha1.ScalingConditionReady)
		return sp.Status.Phase == v1alpha1.ScalingPhaseBlocked && c != nil && c.Reason == v1alpha1.ScalingReasonTargetClaimedByOtherPolicy, nil
	})
	if n := *e.GetSTS("zone-b").Spec.Replicas; n != 3 {
		t.Errorf("zone-b has %d replicas, want its 3 untouched", n)
	}
}

// The API server refuses a bad ScalingPolicy with a message naming the field.
func TestScalingPolicyValidation(t *testing.T) {
	cp := controllertest.APIServer(t)
	ns, err := cp.CreateNamespace(t.Context(), "sp-validation")
	if err != nil {
		t.Fatal(err)
	}
	leader := &v1alpha1.ReplicasSource{Leader: &v1alpha1.LeaderReference{Name: "zone-a"}}
	resource := &v1alpha1.ReplicasSource{Resource: &v1alpha1.ScaleResourceReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "d"}}
	tests := []struct {
		name string
		spec v1alpha1.ScalingPolicySpec
		want string // "" means accepted
	}{
		{"a leader", v1alpha1.ScalingPolicySpec{ReplicasFrom: leader}, ""},
		{"its own replicas", v1alpha1.ScalingPolicySpec{Replicas: ptr.To[int32](3)}, ""},
		{"a resource with writeBack", v1alpha1.ScalingPolicySpec{ReplicasFrom: resource, WriteBack: ptr.To(false)}, ""},
		{"no source: guards only", v1alpha1.ScalingPolicySpec{Downscale: &v1alpha1.DownscaleRules{Allowed: ptr.To(false)}}, ""},
		{"two sources", v1alpha1.ScalingPolicySpec{ReplicasFrom: leader, Replicas: ptr.To[int32](3)}, "at most one source"},
		{"a guarded Deployment", v1alpha1.ScalingPolicySpec{TargetRef: v1alpha1.PolicyTargetReference{Kind: "Deployment", Name: "web"},
			Downscale: &v1alpha1.DownscaleRules{Allowed: ptr.To(false)}}, ""},
		{"a scaled Deployment", v1alpha1.ScalingPolicySpec{TargetRef: v1alpha1.PolicyTargetReference{Kind: "Deployment", Name: "web"}, Replicas: ptr.To[int32](3)},
			"spec.targetRef.kind Deployment or ReplicaSet is only guarded"},
		{"a forced ReplicaSet", v1alpha1.ScalingPolicySpec{TargetRef: v1alpha1.PolicyTargetReference{Kind: "ReplicaSet", Name: "web"}, ForceReplicas: ptr.To[int32](3)},
			"spec.targetRef.kind Deployment or ReplicaSet is only guarded"},
		{"a prepared Deployment", v1alpha1.ScalingPolicySpec{TargetRef: v1alpha1.PolicyTargetReference{Kind: "Deployment", Name: "web"},
			Downscale: &v1alpha1.DownscaleRules{Prepare: &v1alpha1.PrepareDownscaleEndpoint{PrepareEndpoint: v1alpha1.PrepareEndpoint{Path: "/prepare", Port: 8080}}}},
			"spec.downscale.prepare applies to StatefulSet targets only"},
		{"a prepared StatefulSet", v1alpha1.ScalingPolicySpec{ReplicasFrom: leader,
			Downscale: &v1alpha1.DownscaleRules{Prepare: &v1alpha1.PrepareDownscaleEndpoint{PrepareEndpoint: v1alpha1.PrepareEndpoint{Path: "/ingester/prepare-shutdown", Port: 8080, Scheme: "https"}}}}, ""},
		{"a prepare path without a slash", v1alpha1.ScalingPolicySpec{ReplicasFrom: leader,
			Downscale: &v1alpha1.DownscaleRules{Prepare: &v1alpha1.PrepareDownscaleEndpoint{PrepareEndpoint: v1alpha1.PrepareEndpoint{Path: "prepare", Port: 8080}}}}, "spec.downscale.prepare.path"},
		{"a prepare port of 0", v1alpha1.ScalingPolicySpec{ReplicasFrom: leader,
			Downscale: &v1alpha1.DownscaleRules{Prepare: &v1alpha1.PrepareDownscaleEndpoint{PrepareEndpoint: v1alpha1.PrepareEndpoint{Path: "/p", Port: 0}}}}, "spec.downscale.prepare.port"},
		{"a prepare scheme of ftp", v1alpha1.ScalingPolicySpec{ReplicasFrom: leader,
			Downscale: &v1alpha1.DownscaleRules{Prepare: &v1alpha1.PrepareDownscaleEndpoint{PrepareEndpoint: v1alpha1.PrepareEndpoint{Path: "/p", Port: 80, Scheme: "ftp"}}}}, "spec.downscale.prepare.scheme"},
		{"a negative prepare timeout", v1alpha1.ScalingPolicySpec{ReplicasFrom: leader,
			Downscale: &v1alpha1.DownscaleRules{Prepare: &v1alpha1.PrepareDownscaleEndpoint{PrepareEndpoint: v1alpha1.PrepareEndpoint{Path: "/p", Port: 80}, Timeout: &metav1.Duration{Duration: -time.Second}}}}, "spec.downscale.prepare.timeout"},
		{"leader and resource", v1alpha1.ScalingPolicySpec{ReplicasFrom: &v1alpha1.ReplicasSource{Leader: leader.Leader, Resource: resource.Resource}},
			"spec.replicasFrom must set exactly one of leader or resource"},
		{"following itself", v1alpha1.ScalingPolicySpec{ReplicasFrom: &v1alpha1.ReplicasSource{Leader: &v1alpha1.LeaderReference{Name: "zone-b"}}},
			"spec.replicasFrom.leader.name must not be spec.targetRef.name"},
		{"writeBack without a resource", v1alpha1.ScalingPolicySpec{ReplicasFrom: leader, WriteBack: ptr.To(true)}, "spec.writeBack applies only with spec.replicasFrom.resource"},
		{"negative replicas", v1alpha1.ScalingPolicySpec{Replicas: ptr.To[int32](-1)}, "spec.replicas"},
		{"negative forceReplicas", v1alpha1.ScalingPolicySpec{ReplicasFrom: leader, ForceReplicas: ptr.To[int32](-2)}, "spec.forceReplicas"},
		{"negative zone delay", v1alpha1.ScalingPolicySpec{ReplicasFrom: leader, MinTimeBetweenZoneDownscales: &metav1.Duration{Duration: -time.Minute}}, "spec.minTimeBetweenZoneDownscales"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.spec.TargetRef.Name == "" {
				tt.spec.TargetRef = v1alpha1.PolicyTargetReference{Name: "zone-b"}
			}
			sp := &v1alpha1.ScalingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("p%d", i)}, Spec: tt.spec}
			err := cp.Client().Create(t.Context(), sp, client.DryRunAll)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// A policy without a source only guards: it reports its target, a StatefulSet
// or a Deployment read through its scale subresource, and never scales it.
func TestScalingPolicyThatOnlyGuards(t *testing.T) {
	e := newScalingEnv(t)
	e.StatefulSet("zone-a", 4, "r1")
	e.MarkReady("zone-a")
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.NS},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}}},
	}
	if err := e.Admin.Create(e.Ctx, dep); err != nil {
		t.Fatal(err)
	}
	guard := &v1alpha1.DownscaleRules{Allowed: ptr.To(false)}
	e.Policy("sts-guard", "zone-a", func(s *v1alpha1.ScalingPolicySpec) { s.Downscale = guard })
	e.Policy("web-guard", "web", func(s *v1alpha1.ScalingPolicySpec) {
		s.TargetRef.Kind, s.Downscale = v1alpha1.TargetKindDeployment, guard
	})
	for name, want := range map[string]int32{"sts-guard": 4, "web-guard": 3} {
		e.Eventually(20*time.Second, name+" guarding", func() (bool, error) {
			st := e.GetPolicy(name).Status
			return st.Phase == v1alpha1.ScalingPhaseStable && st.Replicas == want &&
				meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ScalingConditionReady) &&
				strings.Contains(st.Message, "only guards downscales"), nil
		})
	}
	// The Deployment's replicas change: the metadata watch wakes its policy.
	dep.Spec.Replicas = ptr.To[int32](5)
	if err := e.Admin.Update(e.Ctx, dep); err != nil {
		t.Fatal(err)
	}
	e.Eventually(20*time.Second, "web-guard sees 5 replicas", func() (bool, error) {
		return e.GetPolicy("web-guard").Status.Replicas == 5, nil
	})
	if got := *e.GetSTS("zone-a").Spec.Replicas; got != 4 {
		t.Errorf("zone-a scaled to %d by a policy that only guards", got)
	}
}

// newScalingEnv runs the ScalingPolicy and DelayedDownscale controllers,
// which work together on a downscale, in a fresh namespace.
func newScalingEnv(t *testing.T) *controllertest.Env {
	t.Helper()
	e := controllertest.New(t, controllertest.Options{})
	if err := New(e.Manager).SetupWithManager(e.Manager); err != nil {
		t.Fatal(err)
	}
	// Pods are called on their IPs: the tests' pods get loopback IPs that a
	// test server answers on.
	if err := delayeddownscale.New(e.Manager, podcall.Addressing{PodAddressIP: true}).SetupWithManager(e.Manager); err != nil {
		t.Fatal(err)
	}
	e.Start()
	return e
}

func TestMain(m *testing.M) { controllertest.Main(m) }
