package webhooks

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/test/builders"

	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/delayed"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podcall"
	"github.com/echelon-operator/echelon/webhooks/webhookstest"
)

// TestSettle: a pending downscale is confirmed once the StatefulSet shows
// its replicas (or fewer), waits until its deadline, and is cancelled after.
func TestSettle(t *testing.T) {
	p := &v1alpha1.PendingDownscale{Replicas: 3, Deadline: metav1.NewMicroTime(testNow)}
	for _, tc := range []struct {
		name     string
		now      time.Time
		replicas *int32
		want     settlement
	}{
		{name: "stored", now: testNow.Add(-time.Second), replicas: ptr.To[int32](3), want: settleConfirm},
		{name: "stored and scaled further down", now: testNow.Add(time.Hour), replicas: ptr.To[int32](1), want: settleConfirm},
		{name: "not yet, deadline ahead", now: testNow.Add(-time.Millisecond), replicas: ptr.To[int32](5), want: settleWait},
		{name: "deadline passed", now: testNow, replicas: ptr.To[int32](5), want: settleCancel},
		{name: "StatefulSet gone after the deadline", now: testNow.Add(time.Second), want: settleCancel},
		{name: "StatefulSet gone before the deadline", now: testNow.Add(-time.Second), want: settleWait},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := settle(tc.now, p, tc.replicas); got != tc.want {
				t.Errorf("settle = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestPendingRecord: the record names the pods that prepared, with their
// URLs, a deadline a window past the request's, and the time to restore;
// a record still pending is merged in.
func TestPendingRecord(t *testing.T) {
	ctx, cancel := context.WithDeadline(context.Background(), testNow.Add(10*time.Second))
	defer cancel()
	earlier := metav1.NewMicroTime(testNow.Add(-time.Hour))
	provisional := metav1.NewMicroTime(testNow.Add(-time.Minute))
	targets := []podcall.Target{{Pod: "a-3", URL: "http://10.0.0.3/p"}, {Pod: "a-4", URL: "http://10.0.0.4/p"}}
	results := map[string]podcall.Result{"a-3": {}, "a-4": {}}

	policy := *builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Obj()
	policy.Status.LastDownscaleTime = &earlier
	rec := pendingRecord(ctx, &policy, 5, 3, testNow, targets, results)
	if rec.Replicas != 3 || !rec.AdmittedAt.Time.Equal(testNow) || !rec.Deadline.Time.Equal(testNow.Add(10*time.Second+laterAdmissionWindow)) {
		t.Errorf("record %+v, want replicas 3 admitted at %v, deadline %v", rec, testNow, testNow.Add(10*time.Second+laterAdmissionWindow))
	}
	if rec.PreviousDownscaleTime == nil || !rec.PreviousDownscaleTime.Equal(&earlier) {
		t.Errorf("previousDownscaleTime %v, want %v", rec.PreviousDownscaleTime, earlier)
	}
	if want := []v1alpha1.PendingPod{{Name: "a-3", URL: "http://10.0.0.3/p"}, {Name: "a-4", URL: "http://10.0.0.4/p"}}; !slices.Equal(rec.Pods, want) {
		t.Errorf("pods %+v, want %+v", rec.Pods, want)
	}

	// An earlier request's record, still pending: its pods stay listed, and
	// the time to restore is the one before it.
	policy.Status.LastDownscaleTime = &provisional
	policy.Status.PendingDownscale = &v1alpha1.PendingDownscale{Replicas: 4, AdmittedAt: provisional, PreviousDownscaleTime: &earlier,
		Pods: []v1alpha1.PendingPod{{Name: "a-4", URL: "http://old/p"}, {Name: "a-5", URL: "http://10.0.0.5/p"}}}
	rec = pendingRecord(ctx, &policy, 5, 3, testNow, targets, results)
	if rec.PreviousDownscaleTime == nil || !rec.PreviousDownscaleTime.Equal(&earlier) {
		t.Errorf("merged previousDownscaleTime %v, want %v", rec.PreviousDownscaleTime, earlier)
	}
	if want := []v1alpha1.PendingPod{{Name: "a-5", URL: "http://10.0.0.5/p"}, {Name: "a-3", URL: "http://10.0.0.3/p"}, {Name: "a-4", URL: "http://10.0.0.4/p"}}; !slices.Equal(rec.Pods, want) {
		t.Errorf("merged pods %+v, want %+v", rec.Pods, want)
	}
}

// TestPendingDownscalesReconcile: the leader's pass over a policy with a
// pending downscale, against a fake API server and pods on loopback.
func TestPendingDownscalesReconcile(t *testing.T) {
	const path = "/ingester/prepare-shutdown"
	earlier := metav1.NewMicroTime(testNow.Add(-time.Hour))
	admitted := metav1.NewMicroTime(testNow.Add(-15 * time.Second))
	for _, tc := range []struct {
		name string
		now  time.Time
		// cached and live are the StatefulSet's replicas in the cache and on
		// the API server.
		cached, live int32
		// last is status.lastDownscaleTime when the pass runs.
		last *metav1.MicroTime

		wantPending bool
		wantLast    *metav1.MicroTime
		wantCalls   []string
		wantEvent   string
		wantRequeue bool
		wantOutcome string
	}{
		{name: "stored: confirmed, lastDownscaleTime kept, no call", now: testNow, cached: 3, live: 3, last: &admitted,
			wantLast: &admitted, wantOutcome: metrics.PendingDownscaleConfirmed},
		{name: "not stored, deadline ahead: waits", now: testNow.Add(-time.Second), cached: 5, live: 5, last: &admitted,
			wantPending: true, wantLast: &admitted, wantRequeue: true},
		{name: "not stored by the deadline: pods cancelled, lastDownscaleTime restored", now: testNow, cached: 5, live: 5, last: &admitted,
			wantLast: &earlier, wantCalls: []string{"DELETE a-3", "DELETE a-4"}, wantEvent: EventReasonPreparedDownscaleCancelled,
			wantOutcome: metrics.PendingDownscaleCancelled},
		{name: "the cache lags, the API server has it: confirmed, no call", now: testNow, cached: 5, live: 3, last: &admitted,
			wantLast: &admitted, wantOutcome: metrics.PendingDownscaleConfirmed},
		{name: "the cache lags behind an upscale and shows the size, the API server does not, deadline ahead: waits", now: testNow.Add(-time.Second),
			cached: 3, live: 5, last: &admitted, wantPending: true, wantLast: &admitted, wantRequeue: true},
		{name: "the cache lags behind an upscale and shows the size, the API server does not, by the deadline: pods cancelled", now: testNow,
			cached: 3, live: 5, last: &admitted, wantLast: &earlier, wantCalls: []string{"DELETE a-3", "DELETE a-4"}, wantEvent: EventReasonPreparedDownscaleCancelled,
			wantOutcome: metrics.PendingDownscaleCancelled},
		{name: "cancelled after another downscale was recorded: that one stays", now: testNow, cached: 5, live: 5, last: ptr.To(metav1.NewMicroTime(testNow)),
			wantLast: ptr.To(metav1.NewMicroTime(testNow)), wantCalls: []string{"DELETE a-3", "DELETE a-4"}, wantEvent: EventReasonPreparedDownscaleCancelled,
			wantOutcome: metrics.PendingDownscaleCancelled},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pods := newPodServer(t, "a", 3, 4)
			var pending []v1alpha1.PendingPod
			for _, pod := range []string{"a-3", "a-4"} {
				pending = append(pending, v1alpha1.PendingPod{Name: pod, URL: fmt.Sprintf("http://%s:%d%s", pods.IPs()[pod], pods.Port, path)})
			}
			sp := *builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare(path, pods.Port, 2*time.Second).Obj()
			sp.Status.LastDownscaleTime = tc.last
			sp.Status.PendingDownscale = &v1alpha1.PendingDownscale{Replicas: 3, AdmittedAt: admitted, Deadline: metav1.NewMicroTime(testNow),
				PreviousDownscaleTime: &earlier, Pods: pending}
			cached := *builders.MakeStatefulSet(testNS, "a").Replicas(tc.cached).TypeMeta().Obj()
			live := *builders.MakeStatefulSet(testNS, "a").Replicas(tc.live).TypeMeta().Obj()
			scheme := runtime.NewScheme()
			for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
				if err := add(scheme); err != nil {
					t.Fatal(err)
				}
			}
			c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.ScalingPolicy{}).WithObjects(&sp, &cached).Build()
			liveReader := fake.NewClientBuilder().WithScheme(scheme).WithObjects(&live).Build()
			events := &eventRecorder{}
			r := &pendingDownscales{client: c, live: liveReader, tlsObjects: liveReader, pods: NewPodClient(), events: events, now: func() time.Time { return tc.now }}
			before := map[string]float64{}
			for _, o := range []string{metrics.PendingDownscaleConfirmed, metrics.PendingDownscaleCancelled} {
				before[o] = testutil.ToFloat64(metrics.WebhookPendingDownscales.WithLabelValues(o))
			}

			res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&sp)})
			if err != nil {
				t.Fatal(err)
			}
			if (res.RequeueAfter > 0) != tc.wantRequeue {
				t.Errorf("requeue after %v, want a requeue %v", res.RequeueAfter, tc.wantRequeue)
			}
			got := &v1alpha1.ScalingPolicy{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(&sp), got); err != nil {
				t.Fatal(err)
			}
			if (got.Status.PendingDownscale != nil) != tc.wantPending {
				t.Errorf("status.pendingDownscale %+v, want it kept %v", got.Status.PendingDownscale, tc.wantPending)
			}
			if !got.Status.LastDownscaleTime.Equal(tc.wantLast) {
				t.Errorf("status.lastDownscaleTime %v, want %v", got.Status.LastDownscaleTime, tc.wantLast)
			}
			if calls := pods.Calls(); !slices.Equal(calls, tc.wantCalls) {
				t.Errorf("pod calls %q, want %q", calls, tc.wantCalls)
			}
			evs := events.list()
			switch {
			case tc.wantEvent == "" && len(evs) > 0:
				t.Errorf("Events %+v, want none", evs)
			case tc.wantEvent != "" && (len(evs) != 1 || evs[0].reason != tc.wantEvent || evs[0].kind != "StatefulSet" || !strings.Contains(evs[0].note, "told the prepared pods a-3, a-4 to cancel")):
				t.Errorf("Events %+v, want one %s on the StatefulSet naming the pods", evs, tc.wantEvent)
			}
			for o, b := range before {
				want := 0.0
				if o == tc.wantOutcome {
					want = 1
				}
				if d := testutil.ToFloat64(metrics.WebhookPendingDownscales.WithLabelValues(o)) - b; d != want {
					t.Errorf("outcome %s counted %v times, want %v", o, d, want)
				}
			}
		})
	}
}

// TestPendingRecordAfterAStoredDownscale: a record still pending whose
// downscale the StatefulSet already shows (the request starts from its
// replicas) was stored: it is not merged into the next one, whose refusal
// would otherwise tell that downscale's pods to cancel and put
// lastDownscaleTime back before it, opening the zone delay it started.
func TestPendingRecordAfterAStoredDownscale(t *testing.T) {
	const path = "/ingester/prepare-shutdown"
	earlier := metav1.NewMicroTime(testNow.Add(-time.Hour))
	stored := metav1.NewMicroTime(testNow.Add(-time.Second))
	pods := newPodServer(t, "a", 0, 1, 2, 3)
	policy := *builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare(path, pods.Port, 2*time.Second).Obj()
	policy.Status.LastDownscaleTime = &stored
	policy.Status.PendingDownscale = &v1alpha1.PendingDownscale{Replicas: 4, AdmittedAt: stored, Deadline: metav1.NewMicroTime(testNow.Add(time.Minute)),
		PreviousDownscaleTime: &earlier, Pods: []v1alpha1.PendingPod{{Name: "a-4", URL: "http://10.0.0.4/p"}}}
	cluster := &fakeCluster{
		policies: []v1alpha1.ScalingPolicy{policy},
		sets:     []appsv1.StatefulSet{*builders.MakeStatefulSet(testNS, "a").Replicas(4).TypeMeta().Obj()},
		pods:     runningPods("a", pods),
	}
	prep := &PrepareDownscale{Cluster: cluster, Pods: NewPodClient(), Addressing: podcall.Addressing{PodAddressIP: true}, Now: func() time.Time { return testNow }}
	a := serve(t, handler("test-prepare", prep, nil), stsUpdate("a", 4, 3).review(), "timeout=10s")
	prep.cancels.Wait()
	checkAnswer(t, a, true, 0, "", "")
	rec, ok := cluster.pending["a-scaling"]
	if !ok {
		t.Fatal("no pending record written")
	}
	if rec.PreviousDownscaleTime == nil || !rec.PreviousDownscaleTime.Equal(&stored) {
		t.Errorf("previousDownscaleTime %v, want %v: the downscale to 4 was stored", rec.PreviousDownscaleTime, stored)
	}
	if want := []string{"a-3"}; !slices.Equal(pendingPodNames(rec.Pods), want) {
		t.Errorf("pods %q, want %q: pod a-4 left with the stored downscale", pendingPodNames(rec.Pods), want)
	}
}

func pendingPodNames(pods []v1alpha1.PendingPod) []string {
	var names []string
	for _, p := range pods {
		names = append(names, p.Name)
	}
	return names
}

// TestPendingCancelRetried: a prepared pod whose DELETE fails when its
// downscale was not stored stays named in status.pendingCancels (the zone
// delay is restored at once) and is told again with backoff until it
// answers; a pod that is gone by then is dropped without a call.
func TestPendingCancelRetried(t *testing.T) {
	const path = "/ingester/prepare-shutdown"
	earlier := metav1.NewMicroTime(testNow.Add(-time.Hour))
	admitted := metav1.NewMicroTime(testNow.Add(-15 * time.Second))
	pods := newPodServer(t, "a", 3, 4)
	pods.Answer(http.MethodDelete, "a-4", webhookstest.Status(http.StatusServiceUnavailable, "flushing"))
	var pending []v1alpha1.PendingPod
	for _, pod := range []string{"a-3", "a-4"} {
		pending = append(pending, v1alpha1.PendingPod{Name: pod, URL: fmt.Sprintf("http://%s:%d%s", pods.IPs()[pod], pods.Port, path)})
	}
	sp := builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare(path, pods.Port, 2*time.Second).Obj()
	sp.Status.LastDownscaleTime = &admitted
	sp.Status.PendingDownscale = &v1alpha1.PendingDownscale{Replicas: 3, AdmittedAt: admitted, Deadline: metav1.NewMicroTime(testNow),
		PreviousDownscaleTime: &earlier, Pods: pending}
	sts := builders.MakeStatefulSet(testNS, "a").Replicas(5).TypeMeta().Obj()
	pod4 := builders.MakePod(testNS, "a", 4).Obj()
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme} {
		if err := add(scheme); err != nil {
			t.Fatal(err)
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme).WithStatusSubresource(&v1alpha1.ScalingPolicy{}).WithObjects(sp, sts, pod4).Build()
	live := fake.NewClientBuilder().WithScheme(scheme).WithObjects(sts.DeepCopy()).Build()
	now := testNow
	r := &pendingDownscales{client: c, live: live, tlsObjects: live, pods: NewPodClient(), events: &eventRecorder{}, now: func() time.Time { return now }}
	pass := func() (time.Duration, *v1alpha1.ScalingPolicy) {
		t.Helper()
		res, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: client.ObjectKeyFromObject(sp)})
		if err != nil {
			t.Fatal(err)
		}
		got := &v1alpha1.ScalingPolicy{}
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(sp), got); err != nil {
			t.Fatal(err)
		}
		return res.RequeueAfter, got
	}

	after, got := pass()
	if got.Status.PendingDownscale != nil || !got.Status.LastDownscaleTime.Equal(&earlier) {
		t.Errorf("pendingDownscale %+v lastDownscaleTime %v, want the record settled and the time restored", got.Status.PendingDownscale, got.Status.LastDownscaleTime)
	}
	cancels := got.Status.PendingCancels
	if len(cancels) != 1 || cancels[0].Name != "a-4" || cancels[0].Attempts != 1 || !strings.Contains(cancels[0].Error, "503") ||
		cancels[0].NextAttemptTime == nil || !cancels[0].NextAttemptTime.Time.Equal(now.Add(delayed.RetryAfterError)) {
		t.Fatalf("pendingCancels %+v, want a-4 after 1 failed DELETE, told again at %s", cancels, now.Add(delayed.RetryAfterError))
	}
	if after != delayed.RetryAfterError {
		t.Errorf("requeue after %s, want %s", after, delayed.RetryAfterError)
	}

	pods.Reset()
	now = now.Add(delayed.RetryAfterError / 2)
	if _, got = pass(); len(pods.Calls()) != 0 || len(got.Status.PendingCancels) != 1 {
		t.Errorf("before the backoff ends: calls %q, pendingCancels %+v; want no call, the retry kept", pods.Calls(), got.Status.PendingCancels)
	}
	now = testNow.Add(delayed.RetryAfterError)
	after, got = pass()
	if calls := pods.Calls(); !slices.Equal(calls, []string{"DELETE a-4"}) || len(got.Status.PendingCancels) != 1 || got.Status.PendingCancels[0].Attempts != 2 {
		t.Fatalf("once due: calls %q, pendingCancels %+v; want a-4 told again, 2 attempts", calls, got.Status.PendingCancels)
	}
	if after != 2*delayed.RetryAfterError {
		t.Errorf("requeue after %s, want the doubled backoff %s", after, 2*delayed.RetryAfterError)
	}

	pods.Reset()
	pods.Answer(http.MethodDelete, "a-4", webhookstest.Status(http.StatusOK, ""))
	now = now.Add(2 * delayed.RetryAfterError)
	if after, got = pass(); !slices.Equal(pods.Calls(), []string{"DELETE a-4"}) || len(got.Status.PendingCancels) != 0 || after != 0 {
		t.Errorf("the pod answered: calls %q, pendingCancels %+v, requeue %s; want none left", pods.Calls(), got.Status.PendingCancels, after)
	}

	// A pod gone before it answered is dropped without a call.
	pods.Reset()
	got.Status.PendingCancels = []v1alpha1.PendingCancel{{Name: "a-3", URL: pending[0].URL, Attempts: 3, NextAttemptTime: &metav1.Time{Time: now}}}
	if err := c.Status().Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	if _, got = pass(); len(pods.Calls()) != 0 || len(got.Status.PendingCancels) != 0 {
		t.Errorf("the pod is gone: calls %q, pendingCancels %+v; want no call and none left", pods.Calls(), got.Status.PendingCancels)
	}
}
