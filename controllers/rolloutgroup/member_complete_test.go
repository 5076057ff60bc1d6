package rolloutgroup

// A member completes once per rollout: its phase and its MemberComplete Event
// follow the StatefulSet controller's own count of the pods, which lags the
// pods it recreates.

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/internal/kube"
)

// eventLog passes the reconciler's Events on and keeps the notes of each
// reason, as emitted: the Events API folds repeated Events into a series
// whose count it publishes later, so a count read back from it may be behind.
type eventLog struct {
	recorder.EventRecorder
	mu    sync.Mutex
	notes map[string][]string
}

func (l *eventLog) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	l.mu.Lock()
	l.notes[reason] = append(l.notes[reason], fmt.Sprintf(note, args...))
	l.mu.Unlock()
	l.EventRecorder.Eventf(regarding, related, eventtype, reason, action, note, args...)
}

func (l *eventLog) of(reason string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.notes[reason])
}

// setStatusCounts writes status.replicas and readyReplicas of a StatefulSet,
// as its controller does from the pods it has counted so far, each pod counted
// on the update revision.
func (e *env) setStatusCounts(name string, replicas, ready int32) {
	e.T.Helper()
	e.setStatusCountsUpdated(name, replicas, ready, replicas)
}

// setStatusCountsUpdated writes status.replicas, readyReplicas and
// updatedReplicas of a StatefulSet.
func (e *env) setStatusCountsUpdated(name string, replicas, ready, updated int32) {
	e.T.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := e.GetSTS(name)
		sts.Status.Replicas, sts.Status.ReadyReplicas, sts.Status.UpdatedReplicas = replicas, ready, updated
		sts.Status.CurrentReplicas = replicas - updated // the pods not on the update revision are on the current one
		return e.Admin.Status().Update(e.Ctx, sts)
	}); err != nil {
		e.T.Fatal(err)
	}
	e.Eventually(10*time.Second, fmt.Sprintf("the cache to show %s's status at %d/%d, %d updated", name, ready, replicas, updated), func() (bool, error) {
		sts := e.GetSTS(name)
		err := e.r.Get(e.Ctx, client.ObjectKeyFromObject(sts), sts)
		return err == nil && sts.Status.Replicas == replicas && sts.Status.ReadyReplicas == ready && sts.Status.UpdatedReplicas == updated, err
	})
}

// The e2e spec "maxUnavailable 30%" counted 4 MemberComplete Events for 3
// members: after zone-b's last batch, kube-controller-manager reported zone-b
// at 9/9 Ready of 10 wanted (it had not counted the pod it had just
// recreated), then 9/10, then 10/10, while the cache already showed the ten
// pods Ready. Judged on the pods alone at 9/9, zone-b went Complete, then
// Waiting ("StatefulSet status shows 9 of 10 pods Ready"), then Complete
// again, each completion with its Event. The next zone waiting for zone-b's
// hold to lapse made those passes quick enough to see each step.
func TestControllerMemberCompletesOnceWhileItsStatusCountsItsPods(t *testing.T) {
	memberCompletesOnce(t, []statusCounts{{3, 3, 3}, {4, 3, 4}, {4, 4, 4}},
		[]v1alpha1.MemberPhase{v1alpha1.MemberRolling, v1alpha1.MemberRolling, v1alpha1.MemberComplete})
}

// The e2e spec "maxUnavailable 1" counted 4 MemberComplete Events for 3
// members, zone-a's twice. Pods and StatefulSets come through separate
// watches, so the cache can show the last recreated pod Ready while it still
// holds zone-a's status from before that pod's deletion: 10 of 10 Ready, 9 of
// them updated. Judged whole then, zone-a went Complete, then Waiting when the
// status written while the pod started arrived (9 of 10 Ready), then Complete.
// The stale status counts fewer updated pods than the cache shows.
func TestControllerMemberCompletesOnceWhileItsStatusPrecedesItsPods(t *testing.T) {
	memberCompletesOnce(t, []statusCounts{{4, 4, 0}, {4, 3, 4}, {4, 4, 4}},
		[]v1alpha1.MemberPhase{v1alpha1.MemberRolling, v1alpha1.MemberRolling, v1alpha1.MemberComplete})
}

// statusCounts are a StatefulSet's status.replicas, readyReplicas and
// updatedReplicas.
type statusCounts struct{ replicas, ready, updated int32 }

// memberCompletesOnce rolls zone-a's four pods in one batch, shows the cache
// its four new pods Ready, then zone-a's StatefulSet status at each of counts
// with a pass after each; it wants zone-a's phases, as written, after those
// passes and one MemberComplete Event. A member waiting for its last pods
// within a rollout is written Rolling until the next progress write (the
// flip is not written at once: urgentStatusChange); Complete is written at
// once.
func memberCompletesOnce(t *testing.T, counts []statusCounts, want []v1alpha1.MemberPhase) {
	e := newEnv(t, envOptions{})
	events := &eventLog{EventRecorder: e.r.events, notes: map[string][]string{}}
	e.r.events = events
	a, b := e.StatefulSet("zone-a", 4, "r1"), e.StatefulSet("zone-b", 4, "r1")
	e.Pods(a, 4, "r1", controllertest.PodSpec{})
	e.Pods(b, 4, "r1", controllertest.PodSpec{})
	e.setStatusCounts("zone-a", 4, 4)
	e.setStatusCounts("zone-b", 4, 4)
	// maxUnavailable 4: zone-a goes in one batch.
	e.Group("ingester", 4, "zone-a", "zone-b")
	e.Eventually(10*time.Second, "the cache to hold the group and the pods", func() (bool, error) {
		var list corev1.PodList
		if err := e.view.List(e.Ctx, &list, client.InNamespace(e.NS)); err != nil {
			return false, err
		}
		return len(list.Items) == 8 && e.r.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: "ingester"}, &v1alpha1.RolloutGroup{}) == nil, nil
	})
	e.reconcile("ingester") // Complete

	e.SetRevisions("zone-a", "r1", "r2")
	e.SetRevisions("zone-b", "r1", "r2")
	e.Eventually(10*time.Second, "the cache to see the revisions", func() (bool, error) {
		err := e.r.Get(e.Ctx, client.ObjectKeyFromObject(b), b)
		return err == nil && b.Status.UpdateRevision == "r2", err
	})
	e.reconcile("ingester") // the rollout starts: zone-a's four pods go
	e.Eventually(10*time.Second, "zone-a's pods gone", func() (bool, error) {
		var list corev1.PodList
		err := e.Admin.List(e.Ctx, &list, client.InNamespace(e.NS), client.MatchingLabels{"app": "zone-a"})
		return len(list.Items) == 0, err
	})
	e.Pods(a, 4, "r2", controllertest.PodSpec{})
	e.Eventually(10*time.Second, "the cache to show zone-a's new pods Ready", func() (bool, error) {
		var list corev1.PodList
		if err := e.view.List(e.Ctx, &list, client.InNamespace(e.NS), client.MatchingLabels{"app": "zone-a"}); err != nil {
			return false, err
		}
		ready := 0
		for _, p := range list.Items {
			if p.Labels[appsv1.ControllerRevisionHashLabelKey] == "r2" && kube.PodReady(&p) {
				ready++
			}
		}
		return ready == 4, nil
	})

	var phases []v1alpha1.MemberPhase
	pass := func() {
		e.reconcile("ingester")
		for _, m := range e.GetGroup("ingester").Status.StatefulSets {
			if m.Name == "zone-a" {
				phases = append(phases, m.Phase)
			}
		}
	}
	for _, c := range counts {
		e.setStatusCountsUpdated("zone-a", c.replicas, c.ready, c.updated)
		pass()
	}
	if !slices.Equal(phases, want) {
		t.Errorf("zone-a's phase while its StatefulSet's status counted %v (replicas, Ready, updated) of 4 wanted: %v, want %v", counts, phases, want)
	}
	if got := events.of("MemberComplete"); len(got) != 1 {
		t.Errorf("%d MemberComplete Events, want 1 (zone-a completes once): %q", len(got), got)
	}
}
