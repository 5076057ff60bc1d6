package notification

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/internal/notify"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/test/receiver"
)

func TestMain(m *testing.M) { controllertest.Main(m) }

// harness runs the notifier alone: the test writes the group's status as
// the RolloutGroup controller would.
type harness struct {
	*controllertest.Env
	rg *v1alpha1.RolloutGroup
}

func start(t *testing.T, build *builders.RolloutGroupWrapper) *harness {
	e := controllertest.New(t, controllertest.Options{})
	if err := Setup(e.Manager); err != nil {
		t.Fatal(err)
	}
	e.Start()
	rg := build.Obj()
	rg.Namespace = e.NS
	if err := e.Admin.Create(e.Ctx, rg); err != nil {
		t.Fatal(err)
	}
	return &harness{Env: e, rg: rg}
}

func (h *harness) secret(name, url, token string) {
	h.T.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: h.NS, Name: name}, StringData: map[string]string{"url": url}}
	if token != "" {
		s.StringData["token"] = token
	}
	if err := h.Admin.Create(h.Ctx, s); err != nil {
		h.T.Fatal(err)
	}
}

// setStatus writes the group's status as the RolloutGroup controller would:
// a merge patch that leaves status.notifications alone.
func (h *harness) setStatus(mutate func(*v1alpha1.RolloutGroupStatus)) {
	h.T.Helper()
	cur := &v1alpha1.RolloutGroup{}
	if err := h.Admin.Get(h.Ctx, client.ObjectKeyFromObject(h.rg), cur); err != nil {
		h.T.Fatal(err)
	}
	base := cur.DeepCopy()
	mutate(&cur.Status)
	if err := h.Admin.Status().Patch(h.Ctx, cur, client.MergeFrom(base)); err != nil {
		h.T.Fatal(err)
	}
}

func (h *harness) group() *v1alpha1.RolloutGroup {
	h.T.Helper()
	rg := &v1alpha1.RolloutGroup{}
	if err := h.Admin.Get(h.Ctx, client.ObjectKeyFromObject(h.rg), rg); err != nil {
		h.T.Fatal(err)
	}
	return rg
}

var started = metav1.NewTime(time.Now().Truncate(time.Second))

func rolling(member string) func(*v1alpha1.RolloutGroupStatus) {
	return func(st *v1alpha1.RolloutGroupStatus) {
		st.Phase, st.CurrentStatefulSet, st.RolloutStartTime, st.RolloutID = v1alpha1.PhaseProgressing, member, &started, "deploy-7"
		st.StatefulSets = []v1alpha1.MemberStatus{
			{Name: "a", Replicas: 3, Phase: v1alpha1.MemberRolling}, {Name: "b", Replicas: 120, Phase: v1alpha1.MemberPending},
			{Name: "c", Replicas: 3, Phase: v1alpha1.MemberPending},
		}
	}
}

func complete(st *v1alpha1.RolloutGroupStatus) {
	done := metav1.NewTime(started.Add(time.Minute))
	st.Phase, st.CurrentStatefulSet, st.RolloutCompletionTime = v1alpha1.PhaseComplete, "", &done
}

// A three-zone rollout: every event, the 120-pod member in three pages,
// each message under its own delivery id and one message key a page, and
// the callback with the rollout id; a receiver that fails twice is retried
// with the same delivery id and misses nothing.
func TestRolloutNotifications(t *testing.T) {
	rcv, cb := receiver.Start(), receiver.Start()
	defer rcv.Close()
	defer cb.Close()
	h := start(t, builders.MakeRolloutGroup("", "ingester").Members("a", "b", "c").RolloutID("deploy-7").
		Notify("hook", "hook", v1alpha1.NotificationFormatJSON).Callback("deploy-system"))
	h.secret("hook", rcv.URL+"/rollouts", "s3cret")
	h.secret("deploy-system", cb.URL, "")
	rcv.FailNext(2)

	for _, m := range []string{"a", "b", "c"} {
		h.setStatus(rolling(m))
		h.Eventually(20*time.Second, "MemberReached "+m, func() (bool, error) {
			n := rcv.Notifications()
			return len(n) > 0 && n[len(n)-1].Member == m && n[len(n)-1].Page == n[len(n)-1].Pages, nil
		})
	}
	h.setStatus(complete)
	h.Eventually(20*time.Second, "the callback", func() (bool, error) { return len(cb.Callbacks()) == 1, nil })

	want := []string{"Started", "MemberReached", "MemberReached", "MemberReached", "MemberReached", "MemberReached", "Complete"}
	if got := rcv.Events(); !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	var pages []string
	for _, n := range rcv.Notifications() {
		if n.RolloutID != "deploy-7" || n.Group.Name != "ingester" {
			t.Errorf("notification %+v lacks the rollout id or group", n)
		}
		if n.Member == "b" {
			pages = append(pages, fmt.Sprintf("%d/%d:%d:%s", n.Page, n.Pages, len(n.Pods), n.Pods[0]))
		}
	}
	if want := []string{"1/3:50:b-0", "2/3:50:b-50", "3/3:20:b-100"}; !slices.Equal(pages, want) {
		t.Errorf("pages of member b %v, want %v", pages, want)
	}
	if len(rcv.Latest()) != 3 {
		t.Errorf("%d message keys, want 3 (one a page of the rollout)", len(rcv.Latest()))
	}
	reqs := rcv.Requests()
	if reqs[0].Status != 500 || reqs[1].Status != 500 || reqs[2].Status != 200 || reqs[0].DeliveryID != reqs[2].DeliveryID {
		t.Errorf("the first message was not retried under its delivery id: %+v", reqs[:3])
	}
	if reqs[2].Authorization != "Bearer s3cret" {
		t.Errorf("Authorization %q", reqs[2].Authorization)
	}
	if rcv.Repeated() != 0 {
		t.Errorf("%d messages repeated", rcv.Repeated())
	}
	c := cb.Callbacks()[0]
	if c.Outcome != "Complete" || c.RolloutID != "deploy-7" || c.DeliveryID != notify.CallbackID(string(h.rg.UID), c.Rollout, "Complete") {
		t.Errorf("callback %+v", c)
	}
	h.Eventually(10*time.Second, "NotificationsDelivered True", func() (bool, error) {
		ns := h.group().Status.Notifications
		return ns != nil && meta.IsStatusConditionTrue(ns.Conditions, v1alpha1.ConditionNotificationsDelivered) && len(ns.Events) == 0 && len(ns.Callbacks) == 1 && ns.Callbacks[0].Delivered, nil
	})
}

// A missing Secret and a bad URL give a False condition naming the receiver
// and the field; fixed, the notifications go out.
func TestBadReceivers(t *testing.T) {
	rcv := receiver.Start()
	defer rcv.Close()
	h := start(t, builders.MakeRolloutGroup("", "store").Members("a").
		Notify("missing", "nope", v1alpha1.NotificationFormatSlack).Notify("badurl", "bad", v1alpha1.NotificationFormatJSON))
	h.secret("bad", "ftp://example.invalid/x", "")
	h.setStatus(rolling("a"))
	condition := func(reason string, in ...string) func() (bool, error) {
		return func() (bool, error) {
			ns := h.group().Status.Notifications
			if ns == nil {
				return false, nil
			}
			c := meta.FindStatusCondition(ns.Conditions, v1alpha1.ConditionNotificationsDelivered)
			if c == nil || c.Reason != reason {
				return false, nil
			}
			for _, s := range in {
				if !strings.Contains(c.Message, s) {
					return false, nil
				}
			}
			return true, nil
		}
	}
	h.Eventually(10*time.Second, "SecretUnreadable naming the receiver and field",
		condition(v1alpha1.ReasonSecretUnreadable, "receiver missing", "spec.notifications[missing].secretRef", "Secret nope not found"))
	h.secret("nope", rcv.URL, "")
	h.Eventually(20*time.Second, "InvalidURL naming the receiver and field",
		condition(v1alpha1.ReasonInvalidURL, "receiver badurl", "spec.notifications[badurl].secretRef", "is not an http:// or https:// URL"))
	// The condition may name the bad URL before the second message reached
	// the fixed receiver: the two receivers are sent to concurrently.
	h.Eventually(10*time.Second, "the Slack receiver to get both messages once its Secret came", func() (bool, error) {
		return len(rcv.Requests()) >= 2, nil
	})
	if got := rcv.Requests(); !strings.Contains(string(got[0].Body), `"blocks"`) {
		t.Errorf("the Slack receiver's first request is not a Slack body: %s", got[0].Body)
	}
	for _, ns := range []*v1alpha1.NotificationStatus{h.group().Status.Notifications} {
		if strings.Contains(ns.Receivers[1].LastError, "example.invalid") {
			t.Errorf("lastError quotes the URL: %s", ns.Receivers[1].LastError)
		}
	}
}

// A backlog longer than one pass sends (a 1,200-pod member: 24 pages) goes
// out in full, over several passes, without waiting for another status
// change.
func TestLongBacklog(t *testing.T) {
	rcv := receiver.Start()
	defer rcv.Close()
	h := start(t, builders.MakeRolloutGroup("", "big").Members("a", "b", "c").Notify("hook", "hook", v1alpha1.NotificationFormatJSON))
	h.secret("hook", rcv.URL, "")
	h.setStatus(func(st *v1alpha1.RolloutGroupStatus) {
		rolling("b")(st)
		st.StatefulSets[1].Replicas = 1200
	})
	h.Eventually(30*time.Second, "Started and 24 pages of member b", func() (bool, error) { return len(rcv.Accepted()) == 25, nil })
	last := rcv.Notifications()[24]
	if last.Page != 24 || last.Pages != 24 || last.Pods[len(last.Pods)-1] != "b-1199" {
		t.Errorf("last message: page %d of %d, pods ending %s", last.Page, last.Pages, last.Pods[len(last.Pods)-1])
	}
}
