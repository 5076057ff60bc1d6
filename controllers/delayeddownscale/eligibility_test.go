package delayeddownscale

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/controllers/scalingpolicy"
	"github.com/echelon-operator/echelon/internal/podcall"
)

// createDelayed creates the DelayedDownscale "ing" of StatefulSet "ing", its
// pods answering on pods' port.
func createDelayed(e *controllertest.Env, pods *preparePods, delay string) *v1alpha1.DelayedDownscale {
	e.T.Helper()
	dd := &v1alpha1.DelayedDownscale{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "ing"},
		Spec: v1alpha1.DelayedDownscaleSpec{
			TargetRef: v1alpha1.ScalingTargetReference{Name: "ing"}, Delay: delay,
			PrepareEndpoint: v1alpha1.PrepareEndpoint{Port: int32(pods.port), Path: "/prepare"},
			Timeout:         &metav1.Duration{Duration: time.Second},
		},
	}
	if err := e.Admin.Create(e.Ctx, dd); err != nil {
		e.T.Fatal(err)
	}
	return dd
}

func getDelayed(e *controllertest.Env, c client.Reader) (*v1alpha1.DelayedDownscale, error) {
	got := &v1alpha1.DelayedDownscale{}
	return got, c.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: "ing"}, got)
}

// waitCacheShowsDelayed waits until cached shows the DelayedDownscale as
// the API server has it: a pass run by hand then reads what was written.
func waitCacheShowsDelayed(e *controllertest.Env, cached client.Reader) {
	e.T.Helper()
	e.Eventually(5*time.Second, "the cache shows the DelayedDownscale as written", func() (bool, error) {
		latest, err := getDelayed(e, e.Admin)
		if err != nil {
			return false, err
		}
		seen, err := getDelayed(e, cached)
		return err == nil && seen.ResourceVersion == latest.ResourceVersion, err
	})
}

// A pod recreated after it became eligible is not prepared: the eligible
// replicas go back above it, it is asked again, and the StatefulSet shrinks
// past it only once the new pod has been prepared for the delay.
func TestDelayedDownscaleRecreatedPodIsPreparedAgain(t *testing.T) {
	e := newScalingEnv(t)
	pods := startPreparePods(t)
	sts := servedStatefulSet(e, 4)
	delay := 4 * time.Second
	createDelayed(e, pods, "4s")
	// The policy wants 2 but waits (paused here; a zone delay or a rollout
	// does the same) while pods 3 and 2 become eligible.
	e.Policy("ing", "ing", func(s *v1alpha1.ScalingPolicySpec) { s.Replicas, s.Paused = ptr.To[int32](2), true })
	e.Eventually(15*time.Second, "pods 3 and 2 eligible", func() (bool, error) {
		got, err := getDelayed(e, e.Admin)
		return err == nil && got.Status.EligibleReplicas != nil && *got.Status.EligibleReplicas == 2, err
	})

	// Pod 2 is recreated: another UID, and its preparation forgotten.
	pods.restart(podIP(2))
	recreated := time.Now()
	e.RecreatePod(sts, 2, "r1", controllertest.PodSpec{IP: podIP(2)})

	e.Eventually(5*time.Second, "the eligible replicas back to 3, above the new pod 2", func() (bool, error) {
		got, err := getDelayed(e, e.Admin)
		return err == nil && got.Status.EligibleReplicas != nil && *got.Status.EligibleReplicas == 3, err
	})
	e.Eventually(5*time.Second, "the new pod 2 asked to prepare", func() (bool, error) {
		return pods.isPrepared(podIP(2)), nil
	})

	sp := e.GetPolicy("ing")
	sp.Spec.Paused = false
	if err := e.Admin.Update(e.Ctx, sp); err != nil {
		t.Fatal(err)
	}
	e.Eventually(10*time.Second, "the StatefulSet shrunk past pod 3", func() (bool, error) {
		return *e.GetSTS("ing").Spec.Replicas <= 3, nil
	})
	e.MarkReady("ing")
	e.WaitReplicas("ing", 2, 15*time.Second)
	// The pod answers whole seconds: its delay may count from up to a second
	// before it was asked.
	if took := time.Since(recreated); took < delay-time.Second {
		t.Errorf("shrunk past the new pod 2 %s after it was created, before it was prepared for %s", took, delay)
	}
}

// The pods about to be asked are in status before the POSTs: an operator
// killed during the calls, whose downscale is cancelled before it restarts,
// still sends DELETE to every pod it asked.
func TestDelayedDownscaleRestartDuringThePreparesCancelsThem(t *testing.T) {
	e := controllertest.New(t, controllertest.Options{})
	if err := scalingpolicy.New(e.Manager).SetupWithManager(e.Manager); err != nil {
		t.Fatal(err)
	}
	e.Start()
	pods := startPreparePods(t)
	pods.hold = make(chan struct{})
	servedStatefulSet(e, 4)
	createDelayed(e, pods, "1h")
	e.Policy("ing", "ing", func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = ptr.To[int32](2) })
	cached := e.Manager.GetClient()
	policyWants := func(n int32) func() (bool, error) {
		return func() (bool, error) {
			sp := &v1alpha1.ScalingPolicy{}
			err := cached.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: "ing"}, sp)
			return err == nil && sp.Status.DesiredReplicas != nil && *sp.Status.DesiredReplicas == n && sp.Status.ObservedGeneration == sp.Generation, client.IgnoreNotFound(err)
		}
	}
	e.Eventually(10*time.Second, "the policy wants 2", policyWants(2))

	// The DelayedDownscale reconciler is run by hand, so that it can be
	// killed in the middle of its calls.
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: e.NS, Name: "ing"}}
	ctx, kill := context.WithCancel(e.Ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = New(e.Manager, podcall.Addressing{PodAddressIP: true}).Reconcile(ctx, req)
	}()
	e.Eventually(10*time.Second, "pods 3 and 2 asked", func() (bool, error) {
		return len(pods.callsOf("POST")) >= 2, nil
	})
	written, err := getDelayed(e, e.Admin)
	if err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, p := range written.Status.PreparedPods {
		live := &corev1.Pod{}
		if err := e.Admin.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: p.Name}, live); err != nil {
			t.Fatal(err)
		}
		if p.UID != string(live.UID) {
			t.Errorf("status names %s with uid %q, want the pod's %q", p.Name, p.UID, live.UID)
		}
		named = append(named, p.Name)
	}
	if !slices.Equal(named, []string{"ing-3", "ing-2"}) {
		t.Errorf("while the POSTs wait, status.preparedPods names %v, want [ing-3 ing-2]", named)
	}
	kill()
	<-done
	e.Eventually(5*time.Second, "pods 3 and 2 prepared all the same", func() (bool, error) {
		return pods.isPrepared(podIP(3)) && pods.isPrepared(podIP(2)), nil
	})

	// While the operator is down, the downscale is cancelled.
	sp := e.GetPolicy("ing")
	sp.Spec.Replicas = ptr.To[int32](4)
	if err := e.Admin.Update(e.Ctx, sp); err != nil {
		t.Fatal(err)
	}
	e.Eventually(10*time.Second, "the policy wants 4", policyWants(4))
	waitCacheShowsDelayed(e, cached)

	// A new process starts.
	if _, err := New(e.Manager, podcall.Addressing{PodAddressIP: true}).Reconcile(e.Ctx, req); err != nil {
		t.Fatal(err)
	}
	deletes := pods.callsOf("DELETE")
	for _, ord := range []int{3, 2} {
		if !slices.Contains(deletes, podIP(ord)) || pods.isPrepared(podIP(ord)) {
			t.Errorf("pod %d asked before the restart got no DELETE after it (DELETEs to %v); it stays prepared", ord, deletes)
		}
	}
}

// A pod that no longer goes (the StatefulSet grew, the downscale is shallower)
// keeps its record in the status written before the POSTs, until it is told
// to cancel: an operator killed during those POSTs, before the DELETE, still
// sends it after a restart.
func TestDelayedDownscaleRestartBeforeTheCancelsStillCancels(t *testing.T) {
	// No controller: the policy's status is written by hand and the
	// DelayedDownscale reconciler is run by hand, to be killed mid-pass.
	e := controllertest.New(t, controllertest.Options{})
	e.Start()
	pods := startPreparePods(t)
	servedStatefulSet(e, 4)
	createDelayed(e, pods, "1h")
	e.Policy("ing", "ing", func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = ptr.To[int32](2) })
	cached := e.Manager.GetClient()
	policyWants := func(n int32) {
		t.Helper()
		sp := e.GetPolicy("ing")
		sp.Spec.Replicas = ptr.To(n)
		if err := e.Admin.Update(e.Ctx, sp); err != nil {
			t.Fatal(err)
		}
		sp.Status.DesiredReplicas, sp.Status.ObservedGeneration = ptr.To(n), sp.Generation
		if err := e.Admin.Status().Update(e.Ctx, sp); err != nil {
			t.Fatal(err)
		}
		e.Eventually(5*time.Second, fmt.Sprintf("the cache shows the policy wanting %d", n), func() (bool, error) {
			seen := &v1alpha1.ScalingPolicy{}
			err := cached.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: "ing"}, seen)
			return err == nil && seen.Status.DesiredReplicas != nil && *seen.Status.DesiredReplicas == n && seen.Status.ObservedGeneration == seen.Generation, err
		})
	}
	req := ctrl.Request{NamespacedName: types.NamespacedName{Namespace: e.NS, Name: "ing"}}
	policyWants(2)
	if _, err := New(e.Manager, podcall.Addressing{PodAddressIP: true}).Reconcile(e.Ctx, req); err != nil {
		t.Fatal(err)
	}
	if !pods.isPrepared(podIP(3)) || !pods.isPrepared(podIP(2)) {
		t.Fatal("pods 3 and 2 not prepared")
	}
	waitCacheShowsDelayed(e, cached)

	// The StatefulSet grows to 5 and the policy wants 3: pod 4 is to be
	// asked, and pod 2, which stays, told to cancel.
	sts := e.GetSTS("ing")
	sts.Spec.Replicas = ptr.To[int32](5)
	if err := e.Admin.Update(e.Ctx, sts); err != nil {
		t.Fatal(err)
	}
	e.Pod(sts, 4, "r1", controllertest.PodSpec{IP: podIP(4)})
	policyWants(3)
	e.Eventually(5*time.Second, "the cache shows pod 4 and 5 replicas", func() (bool, error) {
		var list corev1.PodList
		err := cached.List(e.Ctx, &list, client.InNamespace(e.NS))
		seen := &appsv1.StatefulSet{}
		if err == nil {
			err = cached.Get(e.Ctx, client.ObjectKeyFromObject(sts), seen)
		}
		return err == nil && len(list.Items) == 5 && *seen.Spec.Replicas == 5, err
	})

	pods.mu.Lock()
	pods.hold = make(chan struct{})
	pods.mu.Unlock()
	ctx, kill := context.WithCancel(e.Ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, _ = New(e.Manager, podcall.Addressing{PodAddressIP: true}).Reconcile(ctx, req)
	}()
	e.Eventually(10*time.Second, "pod 4 asked", func() (bool, error) {
		return slices.Contains(pods.callsOf("POST"), podIP(4)), nil
	})
	kill()
	<-done
	if deletes := pods.callsOf("DELETE"); len(deletes) > 0 || !pods.isPrepared(podIP(2)) {
		t.Fatalf("DELETEs %v before the restart, want none and pod 2 still prepared", deletes)
	}
	pods.mu.Lock()
	pods.hold = nil
	pods.mu.Unlock()
	waitCacheShowsDelayed(e, cached)

	// A new process starts.
	if _, err := New(e.Manager, podcall.Addressing{PodAddressIP: true}).Reconcile(e.Ctx, req); err != nil {
		t.Fatal(err)
	}
	if deletes := pods.callsOf("DELETE"); !slices.Contains(deletes, podIP(2)) || pods.isPrepared(podIP(2)) {
		t.Errorf("pod 2, which stays, got no DELETE after the restart (DELETEs to %v): it stays prepared", deletes)
	}
}
