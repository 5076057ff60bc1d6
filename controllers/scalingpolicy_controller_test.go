package controllers

import (
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// newScalingEnv is an env whose manager also runs the ScalingPolicy controller.
func newScalingEnv(t *testing.T) *env {
	t.Helper()
	return newEnv(t, envOptions{withScaling: true})
}

func (e *env) policy(name, target string, mutate func(*v1alpha1.ScalingPolicySpec)) *v1alpha1.ScalingPolicy {
	e.t.Helper()
	sp := &v1alpha1.ScalingPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec:       v1alpha1.ScalingPolicySpec{TargetRef: v1alpha1.PolicyTargetReference{Name: target}},
	}
	mutate(&sp.Spec)
	if err := e.admin.Create(e.ctx, sp); err != nil {
		e.t.Fatal(err)
	}
	return sp
}

func (e *env) getPolicy(name string) *v1alpha1.ScalingPolicy {
	e.t.Helper()
	sp := &v1alpha1.ScalingPolicy{}
	if err := e.admin.Get(e.ctx, client.ObjectKey{Namespace: e.ns, Name: name}, sp); err != nil {
		e.t.Fatal(err)
	}
	return sp
}

// setReplicas changes a StatefulSet's spec.replicas and reports, as its
// controller would, that it has them all Ready.
func (e *env) setReplicas(name string, n int32) {
	e.t.Helper()
	sts := e.getSTS(name)
	sts.Spec.Replicas = ptr.To(n)
	if err := e.admin.Update(e.ctx, sts); err != nil {
		e.t.Fatal(err)
	}
	e.markReady(name)
}

// markReady writes a StatefulSet's status as its controller would once every
// wanted pod exists and is Ready.
func (e *env) markReady(name string) {
	e.t.Helper()
	sts := e.getSTS(name)
	sts.Status.ObservedGeneration = sts.Generation
	sts.Status.Replicas, sts.Status.ReadyReplicas = *sts.Spec.Replicas, *sts.Spec.Replicas
	if err := e.admin.Status().Update(e.ctx, sts); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) waitReplicas(name string, n int32, timeout time.Duration) *appsv1.StatefulSet {
	e.t.Helper()
	var sts *appsv1.StatefulSet
	e.eventually(timeout, fmt.Sprintf("%s at %d replicas", name, n), func() (bool, error) {
		sts = e.getSTS(name)
		return *sts.Spec.Replicas == n, nil
	})
	return sts
}

// Followers of a leader scale up at once and down one zone at a time, the
// second downscale waiting for the zone delay after the first, recorded in the
// policies' status.
func TestScalingPolicyFollowsALeaderWithAZoneDelay(t *testing.T) {
	e := newScalingEnv(t)
	for _, name := range []string{"zone-a", "zone-b", "zone-c"} {
		e.statefulSet(name, 3, "r1")
		e.markReady(name)
	}
	e.group("ingester", 1, "zone-a", "zone-b", "zone-c")
	delay := 3 * time.Second
	for _, name := range []string{"zone-b", "zone-c"} {
		e.policy(name, name, func(s *v1alpha1.ScalingPolicySpec) {
			s.ReplicasFrom = &v1alpha1.ReplicasSource{Leader: &v1alpha1.LeaderReference{Name: "zone-a"}}
			s.MinTimeBetweenZoneDownscales = &metav1.Duration{Duration: delay}
		})
	}

	e.setReplicas("zone-a", 5)
	for _, name := range []string{"zone-b", "zone-c"} {
		e.waitReplicas(name, 5, 10*time.Second)
		e.markReady(name)
	}

	e.setReplicas("zone-a", 2)
	var first, second string
	e.eventually(10*time.Second, "one follower downscaled", func() (bool, error) {
		b, c := *e.getSTS("zone-b").Spec.Replicas, *e.getSTS("zone-c").Spec.Replicas
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
	firstAt := e.getPolicy(first).Status.LastDownscaleTime
	if firstAt == nil {
		t.Fatalf("%s: no lastDownscaleTime after its downscale", first)
	}
	e.markReady(first)
	waiting := e.getPolicy(second)
	e.eventually(5*time.Second, second+" waiting for the zone delay", func() (bool, error) {
		waiting = e.getPolicy(second)
		c := meta.FindStatusCondition(waiting.Status.Conditions, v1alpha1.ScalingConditionReady)
		return waiting.Status.Phase == v1alpha1.ScalingPhaseWaiting && c != nil && c.Reason == v1alpha1.ScalingReasonZoneDelay, nil
	})
	if waiting.Status.WaitingUntil == nil || !waiting.Status.WaitingUntil.Time.Equal(firstAt.Add(delay)) {
		t.Errorf("waitingUntil = %v, want %s", waiting.Status.WaitingUntil, firstAt.Add(delay))
	}
	e.waitReplicas(second, 2, 10*time.Second)
	secondAt := e.getPolicy(second).Status.LastDownscaleTime
	if secondAt == nil || secondAt.Sub(firstAt.Time) < delay {
		t.Errorf("%s downscaled at %v, %s after %s; want at least the zone delay %s", second, secondAt, secondAt.Sub(firstAt.Time), first, delay)
	}
}

// Bad input never scales: a missing leader blocks, with the reason in the
// condition; a second policy on the same target blocks both.
func TestScalingPolicyBlocksOnBadInput(t *testing.T) {
	e := newScalingEnv(t)
	e.statefulSet("zone-b", 3, "r1")
	e.markReady("zone-b")
	e.policy("follow-missing", "zone-b", func(s *v1alpha1.ScalingPolicySpec) {
		s.ReplicasFrom = &v1alpha1.ReplicasSource{Leader: &v1alpha1.LeaderReference{Name: "zone-a"}}
	})
	e.eventually(10*time.Second, "the policy blocked", func() (bool, error) {
		sp := e.getPolicy("follow-missing")
		c := meta.FindStatusCondition(sp.Status.Conditions, v1alpha1.ScalingConditionReady)
		return sp.Status.Phase == v1alpha1.ScalingPhaseBlocked && c != nil && c.Reason == v1alpha1.ScalingReasonSourceNotFound, nil
	})
	e.policy("self", "zone-b", func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = ptr.To[int32](1) })
	e.eventually(10*time.Second, "the second policy blocked", func() (bool, error) {
		sp := e.getPolicy("self")
		c := meta.FindStatusCondition(sp.Status.Conditions, v1alpha1.ScalingConditionReady)
		return sp.Status.Phase == v1alpha1.ScalingPhaseBlocked && c != nil && c.Reason == v1alpha1.ScalingReasonTargetClaimedByOtherPolicy, nil
	})
	if n := *e.getSTS("zone-b").Spec.Replicas; n != 3 {
		t.Errorf("zone-b has %d replicas, want its 3 untouched", n)
	}
}

// The API server refuses a bad ScalingPolicy with a message naming the field.
func TestScalingPolicyValidation(t *testing.T) {
	cp := apiServer(t)
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
	e.statefulSet("zone-a", 4, "r1")
	e.markReady("zone-a")
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: e.ns},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "web"}}}}},
	}
	if err := e.admin.Create(e.ctx, dep); err != nil {
		t.Fatal(err)
	}
	guard := &v1alpha1.DownscaleRules{Allowed: ptr.To(false)}
	e.policy("sts-guard", "zone-a", func(s *v1alpha1.ScalingPolicySpec) { s.Downscale = guard })
	e.policy("web-guard", "web", func(s *v1alpha1.ScalingPolicySpec) {
		s.TargetRef.Kind, s.Downscale = v1alpha1.TargetKindDeployment, guard
	})
	for name, want := range map[string]int32{"sts-guard": 4, "web-guard": 3} {
		e.eventually(20*time.Second, name+" guarding", func() (bool, error) {
			st := e.getPolicy(name).Status
			return st.Phase == v1alpha1.ScalingPhaseStable && st.Replicas == want &&
				meta.IsStatusConditionTrue(st.Conditions, v1alpha1.ScalingConditionReady) &&
				strings.Contains(st.Message, "only guards downscales"), nil
		})
	}
	// The Deployment's replicas change: the metadata watch wakes its policy.
	dep.Spec.Replicas = ptr.To[int32](5)
	if err := e.admin.Update(e.ctx, dep); err != nil {
		t.Fatal(err)
	}
	e.eventually(20*time.Second, "web-guard sees 5 replicas", func() (bool, error) {
		return e.getPolicy("web-guard").Status.Replicas == 5, nil
	})
	if got := *e.getSTS("zone-a").Spec.Replicas; got != 4 {
		t.Errorf("zone-a scaled to %d by a policy that only guards", got)
	}
}
