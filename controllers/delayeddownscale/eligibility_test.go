package delayeddownscale

import (
	"context"
	"slices"
	"testing"
	"time"

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
	e.Eventually(5*time.Second, "the cache shows the DelayedDownscale as written", func() (bool, error) {
		latest, err := getDelayed(e, e.Admin)
		if err != nil {
			return false, err
		}
		seen, err := getDelayed(e, cached)
		return err == nil && seen.ResourceVersion == latest.ResourceVersion, err
	})

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
