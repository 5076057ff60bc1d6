package notification

import (
	"slices"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/notify"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/receiver"
)

// A rollout Fails and its callback is refused; before the retry gets
// through, a new rolloutId completes. Both callbacks arrive, in order, each
// with its own delivery id and rollout id: the Complete one does not
// replace the Failed one still being retried.
func TestCallbacksQueueInOrder(t *testing.T) {
	cb := receiver.Start()
	defer cb.Close()
	h := start(t, builders.MakeRolloutGroup("", "store").Members("a").RolloutID("deploy-1").Callback("deploy-system"))
	h.secret("deploy-system", cb.URL, "")
	cb.FailNext(3) // retried after 1 s, 2 s, 4 s
	h.setStatus(func(st *v1alpha1.RolloutGroupStatus) {
		rolling("a")(st)
		st.RolloutID = "deploy-1"
	})
	h.setStatus(func(st *v1alpha1.RolloutGroupStatus) {
		st.Phase = v1alpha1.PhaseFailed
		st.Analysis = &v1alpha1.AnalysisStatus{Failure: &v1alpha1.AnalysisFailure{Time: started}}
	})
	h.Eventually(10*time.Second, "the Failed callback refused", func() (bool, error) { return len(cb.Requests()) >= 1, nil })
	h.setStatus(func(st *v1alpha1.RolloutGroupStatus) {
		st.Phase, st.RolloutID, st.Analysis = v1alpha1.PhaseProgressing, "deploy-2", nil
	})
	h.setStatus(complete)
	h.Eventually(10*time.Second, "both callbacks queued", func() (bool, error) {
		ns := h.group().Status.Notifications
		return ns != nil && (len(ns.Callbacks) == 2 || len(cb.Callbacks()) > 0), nil
	})
	h.Eventually(30*time.Second, "both callbacks delivered", func() (bool, error) { return len(cb.Callbacks()) == 2, nil })
	got := cb.Callbacks()
	if got[0].Outcome != "Failed" || got[0].RolloutID != "deploy-1" || got[1].Outcome != "Complete" || got[1].RolloutID != "deploy-2" {
		t.Fatalf("callbacks %+v, want Failed of deploy-1 then Complete of deploy-2", got)
	}
	if got[0].DeliveryID == got[1].DeliveryID {
		t.Errorf("both callbacks carry delivery id %s", got[0].DeliveryID)
	}
	reqs := cb.Requests()
	for i, r := range reqs[:4] {
		if r.DeliveryID != got[0].DeliveryID {
			t.Errorf("request %d (status %d) carries %s, want the Failed callback's %s: a later callback went first", i, r.Status, r.DeliveryID, got[0].DeliveryID)
		}
	}
	if cb.Repeated() != 0 {
		t.Errorf("%d callbacks repeated", cb.Repeated())
	}
	h.Eventually(10*time.Second, "the queue pruned to the last callback", func() (bool, error) {
		ns := h.group().Status.Notifications
		return len(ns.Callbacks) == 1 && ns.Callbacks[0].Delivered && ns.Callbacks[0].RolloutID == "deploy-2" &&
			meta.IsStatusConditionTrue(ns.Conditions, v1alpha1.ConditionNotificationsDelivered), nil
	})
}

// patchStatus writes the status of obj (created beforehand) as its own
// controller would: a merge patch that leaves status.notifications alone.
func patchStatus[T client.Object](h *harness, obj T, mutate func(T)) {
	h.T.Helper()
	if err := h.Admin.Get(h.Ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
		h.T.Fatal(err)
	}
	base := obj.DeepCopyObject().(T)
	mutate(obj)
	if err := h.Admin.Status().Patch(h.Ctx, obj, client.MergeFrom(base)); err != nil {
		h.T.Fatal(err)
	}
}

func eventNotes(h *harness, reason string) []string {
	var list eventsv1.EventList
	if err := h.Admin.List(h.Ctx, &list, client.InNamespace(h.NS)); err != nil {
		h.T.Fatal(err)
	}
	var out []string
	for _, ev := range list.Items {
		if ev.Reason == reason {
			out = append(out, ev.Note)
		}
	}
	return out
}

func spStatus(phase v1alpha1.ScalingPhase, reason string, replicas, desired int32) func(*v1alpha1.ScalingPolicy) {
	return func(sp *v1alpha1.ScalingPolicy) {
		sp.Status.Phase, sp.Status.Replicas, sp.Status.DesiredReplicas = phase, replicas, &desired
		meta.SetStatusCondition(&sp.Status.Conditions, metav1.Condition{Type: v1alpha1.ScalingConditionReady, Status: metav1.ConditionTrue, Reason: reason})
	}
}

// A ScalingPolicy whose target follows its leader up tells its receiver
// Scaled (from, to, leader); a receiver whose Secret is missing gets a
// condition and an Event naming the field, and the other receiver is not
// held.
func TestScalingPolicyNotifications(t *testing.T) {
	rcv := receiver.Start()
	defer rcv.Close()
	h := start(t, builders.MakeRolloutGroup("", "unused").Members("x"))
	sp := builders.MakeScalingPolicy(h.NS, "zone-b").Target("StatefulSet", "zone-b").Leader("zone-a").
		Notify("missing", "no-such-secret", v1alpha1.NotificationFormatSlack).Notify("hook", "hook", v1alpha1.NotificationFormatJSON).Obj()
	if err := h.Admin.Create(h.Ctx, sp); err != nil {
		t.Fatal(err)
	}
	h.secret("hook", rcv.URL, "")
	patchStatus(h, sp, spStatus(v1alpha1.ScalingPhaseStable, v1alpha1.ScalingReasonAtDesiredReplicas, 3, 3))
	h.Eventually(10*time.Second, "the baseline recorded", func() (bool, error) {
		got := &v1alpha1.ScalingPolicy{}
		err := h.Admin.Get(h.Ctx, client.ObjectKeyFromObject(sp), got)
		return err == nil && got.Status.Notifications != nil && got.Status.Notifications.Observed != nil, err
	})
	patchStatus(h, sp, spStatus(v1alpha1.ScalingPhaseScalingUp, v1alpha1.ScalingReasonScaledUp, 5, 5))
	h.Eventually(20*time.Second, "Scaled", func() (bool, error) { return len(rcv.Notifications()) == 1, nil })
	n := rcv.Notifications()[0]
	if n.Event != "Scaled" || n.Object.Kind != "ScalingPolicy" || n.Object.Name != "zone-b" || n.Target != "zone-b" ||
		n.Leader != "zone-a" || *n.FromReplicas != 3 || *n.ToReplicas != 5 || n.Group != nil || n.Rollout != "" {
		t.Errorf("notification %+v", n)
	}
	h.Eventually(10*time.Second, "SecretUnreadable naming the receiver and field", func() (bool, error) {
		got := &v1alpha1.ScalingPolicy{}
		if err := h.Admin.Get(h.Ctx, client.ObjectKeyFromObject(sp), got); err != nil || got.Status.Notifications == nil {
			return false, err
		}
		c := meta.FindStatusCondition(got.Status.Notifications.Conditions, v1alpha1.ConditionNotificationsDelivered)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1alpha1.ReasonSecretUnreadable &&
			strings.Contains(c.Message, "spec.notifications[missing].secretRef: Secret no-such-secret not found"), nil
	})
	h.Eventually(10*time.Second, "a NotificationFailed Event naming the field", func() (bool, error) {
		return slices.ContainsFunc(eventNotes(h, "NotificationFailed"), func(s string) bool {
			return strings.Contains(s, "spec.notifications[missing].secretRef")
		}), nil
	})
	if got := eventNotes(h, "NotificationSent"); len(got) != 1 || !strings.Contains(got[0], "receiver hook: Scaled (page 1 of 1") {
		t.Errorf("NotificationSent Events %q", got)
	}
}

// A DelayedDownscale tells its sequence: requested (the pods listed),
// delayed, done.
func TestDelayedDownscaleNotifications(t *testing.T) {
	rcv, chat := receiver.Start(), receiver.Start()
	defer rcv.Close()
	defer chat.Close()
	h := start(t, builders.MakeRolloutGroup("", "unused").Members("x"))
	dd := builders.MakeDelayedDownscale(h.NS, "zone-a").Delay("1h").PrepareEndpoint("/prepare", 8080).
		Notify("chat", "chat", v1alpha1.NotificationFormatSlack).Notify("hook", "hook", v1alpha1.NotificationFormatJSON).Obj()
	if err := h.Admin.Create(h.Ctx, dd); err != nil {
		t.Fatal(err)
	}
	h.secret("hook", rcv.URL, "")
	h.secret("chat", chat.URL, "")
	set := func(phase v1alpha1.DelayedDownscalePhase, replicas, desired int32) {
		patchStatus(h, dd, func(dd *v1alpha1.DelayedDownscale) {
			dd.Status.Phase, dd.Status.Replicas, dd.Status.DesiredReplicas, dd.Status.Message = phase, replicas, &desired, string(phase)
			meta.SetStatusCondition(&dd.Status.Conditions, metav1.Condition{Type: v1alpha1.DelayedConditionReady, Status: metav1.ConditionFalse, Reason: string(phase)})
		})
	}
	set(v1alpha1.DelayedPhaseIdle, 3, 3)
	h.Eventually(10*time.Second, "the baseline recorded", func() (bool, error) {
		got := &v1alpha1.DelayedDownscale{}
		err := h.Admin.Get(h.Ctx, client.ObjectKeyFromObject(dd), got)
		return err == nil && got.Status.Notifications != nil && got.Status.Notifications.Observed != nil, err
	})
	set(v1alpha1.DelayedPhasePreparing, 3, 1)
	h.Eventually(10*time.Second, "DownscaleRequested", func() (bool, error) { return len(rcv.Notifications()) == 1, nil })
	set(v1alpha1.DelayedPhaseWaiting, 3, 1)
	h.Eventually(10*time.Second, "DownscaleDelayed", func() (bool, error) { return len(rcv.Notifications()) == 2, nil })
	set(v1alpha1.DelayedPhaseIdle, 1, 1)
	h.Eventually(10*time.Second, "DownscaleDone to both receivers", func() (bool, error) {
		return len(rcv.Accepted()) == 3 && len(chat.Accepted()) == 3, nil
	})
	want := []string{"DownscaleRequested", "DownscaleDelayed", "DownscaleDone"}
	if got := rcv.Events(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	n := rcv.Notifications()[0]
	if !slices.Equal(n.Pods, []string{"zone-a-1", "zone-a-2"}) || *n.FromReplicas != 3 || *n.ToReplicas != 1 || n.Object.Kind != notify.KindDelayedDownscale {
		t.Errorf("DownscaleRequested %+v", n)
	}
	for _, r := range chat.Accepted() {
		if !strings.Contains(string(r.Body), `"blocks"`) {
			t.Errorf("a Slack body without blocks: %s", r.Body)
		}
	}
}
