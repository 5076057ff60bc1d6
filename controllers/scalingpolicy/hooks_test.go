package scalingpolicy

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/internal/hooks"
)

// A downscale calls each pod it removes with reason downscale first; a pod
// whose call fails under failurePolicy Fail is kept, and so is every pod
// below it, while the pods above it go; once it answers, the downscale ends.
// A pod already called is not called again.
func TestDownscaleCallsBeforePodRemoval(t *testing.T) {
	e := controllertest.New(t, controllertest.Options{})
	r := New(e.Manager)
	var mu sync.Mutex
	calls := map[string]int{}
	failing := map[string]bool{"zone-a-2": true}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		q := req.URL.Query()
		mu.Lock()
		defer mu.Unlock()
		if q.Get("reason") != "downscale" || req.URL.Path != "/prepare-shutdown" {
			http.Error(w, "wrong call", http.StatusBadRequest)
			return
		}
		calls[q.Get("pod")]++
		if failing[q.Get("pod")] {
			http.Error(w, "still flushing", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	addr := srv.Listener.Addr().String()
	r.podHost = func(pod *corev1.Pod, _ string) (string, string) { return pod.Name, "" }
	r.hookCaller = &hooks.Caller{HTTP: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}}
	if err := r.SetupWithManager(e.Manager); err != nil {
		t.Fatal(err)
	}
	e.Start()

	e.StatefulSet("zone-a", 4, "r1")
	e.SyncPods("zone-a")
	e.Policy("zone-a", "zone-a", func(s *v1alpha1.ScalingPolicySpec) {
		s.Replicas = ptr.To[int32](4)
		s.Hooks = &v1alpha1.ScalingPolicyHooks{BeforePodRemoval: &v1alpha1.PodRemovalHook{
			Endpoint:   v1alpha1.PrepareEndpoint{Port: 8080, Path: "/prepare-shutdown"},
			HookPolicy: v1alpha1.HookPolicy{Retries: ptr.To[int32](0), Timeout: &metav1.Duration{Duration: time.Second}},
		}}
	})
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sp := e.GetPolicy("zone-a")
		sp.Spec.Replicas = ptr.To[int32](1)
		return e.Admin.Update(e.Ctx, sp)
	}); err != nil {
		t.Fatal(err)
	}

	// zone-a-2 refuses: zone-a-3 goes, zone-a-2 and zone-a-1 stay.
	e.WaitReplicas("zone-a", 3, 20*time.Second)
	e.SyncPods("zone-a")
	e.Eventually(20*time.Second, "a HookFailed Event naming zone-a-2", func() (bool, error) {
		var list eventsv1.EventList
		if err := e.Admin.List(e.Ctx, &list, client.InNamespace(e.NS)); err != nil {
			return false, err
		}
		for _, ev := range list.Items {
			if ev.Reason == v1alpha1.ReasonHookFailed && strings.Contains(ev.Note, "pod zone-a-2 not removed") {
				return true, nil
			}
		}
		return false, nil
	})
	if got := *e.GetSTS("zone-a").Spec.Replicas; got != 3 {
		t.Errorf("replicas %d while zone-a-2 refuses, want 3 (zone-a-1 below it is kept)", got)
	}
	if msg := e.GetPolicy("zone-a").Status.Message; !strings.Contains(msg, "beforePodRemoval holds zone-a-2") {
		t.Errorf("status message %q, want it to name the held pod", msg)
	}

	mu.Lock()
	failing["zone-a-2"] = false
	mu.Unlock()
	e.WaitReplicas("zone-a", 1, 30*time.Second)
	mu.Lock()
	defer mu.Unlock()
	if calls["zone-a-3"] != 1 || calls["zone-a-1"] != 1 || calls["zone-a-2"] < 2 {
		t.Errorf("calls %v: want zone-a-3 and zone-a-1 once each, zone-a-2 again after its refusal", calls)
	}
	if calls["zone-a-0"] != 0 {
		t.Errorf("zone-a-0, which stays, was called %d times", calls["zone-a-0"])
	}
}
