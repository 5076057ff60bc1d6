package webhooks

import (
	"context"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/podcall"
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

	policy := makePolicy("a-scaling", "StatefulSet", "a").obj()
	policy.Status.LastDownscaleTime = &earlier
	rec := pendingRecord(ctx, &policy, 3, testNow, targets, results)
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
	rec = pendingRecord(ctx, &policy, 3, testNow, targets, results)
	if rec.PreviousDownscaleTime == nil || !rec.PreviousDownscaleTime.Equal(&earlier) {
		t.Errorf("merged previousDownscaleTime %v, want %v", rec.PreviousDownscaleTime, earlier)
	}
	if want := []v1alpha1.PendingPod{{Name: "a-5", URL: "http://10.0.0.5/p"}, {Name: "a-3", URL: "http://10.0.0.3/p"}, {Name: "a-4", URL: "http://10.0.0.4/p"}}; !slices.Equal(rec.Pods, want) {
		t.Errorf("merged pods %+v, want %+v", rec.Pods, want)
	}
}
