package notify

import (
	"strings"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// The retry schedule doubles from one second and is bounded.
func TestBackoff(t *testing.T) {
	tests := []struct {
		attempts int32
		want     time.Duration
	}{
		{1, time.Second}, {2, 2 * time.Second}, {3, 4 * time.Second}, {5, 16 * time.Second},
		{8, 128 * time.Second}, {9, 256 * time.Second}, {10, 5 * time.Minute}, {11, 5 * time.Minute}, {40, 5 * time.Minute},
	}
	for _, tt := range tests {
		if got := Backoff(tt.attempts); got != tt.want {
			t.Errorf("Backoff(%d) = %s, want %s", tt.attempts, got, tt.want)
		}
	}
	var total time.Duration
	for a := int32(1); a < MaxAttempts; a++ {
		total += Backoff(a)
	}
	if total < 15*time.Minute || total > 30*time.Minute {
		t.Errorf("a message is given up %s after its first attempt, want 15 to 30 minutes", total)
	}
}

// A member's pods go 50 a message.
func TestPagination(t *testing.T) {
	tests := []struct {
		replicas  int32
		wantPages int32
		wantLast  []string // the pods of the last page: first and last
	}{
		{0, 1, nil}, {1, 1, []string{"m-0", "m-0"}}, {50, 1, []string{"m-0", "m-49"}},
		{51, 2, []string{"m-50", "m-50"}}, {120, 3, []string{"m-100", "m-119"}}, {1000, 20, []string{"m-950", "m-999"}},
	}
	for _, tt := range tests {
		ev := v1alpha1.NotificationEvent{Sequence: 1, Member: "m", Replicas: tt.replicas}
		if got := Pages(ev); got != tt.wantPages {
			t.Errorf("%d pods: %d pages, want %d", tt.replicas, got, tt.wantPages)
		}
		seen := 0
		for p := int32(1); p <= Pages(ev); p++ {
			pods := PagePods(ev, p)
			if len(pods) > PageSize {
				t.Errorf("%d pods: page %d lists %d", tt.replicas, p, len(pods))
			}
			seen += len(pods)
			if p == Pages(ev) && tt.wantLast != nil && (pods[0] != tt.wantLast[0] || pods[len(pods)-1] != tt.wantLast[1]) {
				t.Errorf("%d pods: last page %s..%s, want %v", tt.replicas, pods[0], pods[len(pods)-1], tt.wantLast)
			}
		}
		if seen != int(tt.replicas) {
			t.Errorf("%d pods: %d listed", tt.replicas, seen)
		}
	}
}

// A receiver is sent every page of every event it wants, in order, each
// under its own delivery id, and moves on past the others; a failure is
// retried after the backoff, then given up.
func TestReceiverDelivery(t *testing.T) {
	events := []v1alpha1.NotificationEvent{
		{Sequence: 1, Type: v1alpha1.NotificationStarted, Rollout: "r@1"},
		{Sequence: 2, Type: v1alpha1.NotificationMemberReached, Rollout: "r@1", Member: "a", Replicas: 120},
		{Sequence: 3, Type: v1alpha1.NotificationComplete, Rollout: "r@1"},
	}
	tests := []struct {
		name   string
		events []v1alpha1.NotificationEventType
		want   []string // event/page sent, in order
	}{
		{"every event", nil, []string{"Started/1", "MemberReached/1", "MemberReached/2", "MemberReached/3", "Complete/1"}},
		{"only Complete", []v1alpha1.NotificationEventType{v1alpha1.NotificationComplete}, []string{"Complete/1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := v1alpha1.NotificationReceiver{Name: "x", Events: tt.events}
			var r v1alpha1.ReceiverStatus
			var got []string
			ids := map[string]bool{}
			for {
				var m Message
				var ok bool
				if r, m, ok = Next(r, spec, "uid", events); !ok {
					break
				}
				got = append(got, string(m.Event.Type)+"/"+itoa(m.Page))
				if ids[m.DeliveryID] {
					t.Fatalf("delivery id %s used twice", m.DeliveryID)
				}
				ids[m.DeliveryID] = true
				r = Delivered(r, m)
				if len(got) > 10 {
					t.Fatal("no end")
				}
			}
			if r.Delivered != 3 || r.PagesDelivered != 0 {
				t.Errorf("after every event: %+v", r)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("sent %v, want %v", got, tt.want)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("sent %v, want %v", got, tt.want)
				}
			}
		})
	}

	t.Run("retried after the backoff, then given up", func(t *testing.T) {
		now := testTime
		r, m, _ := Next(v1alpha1.ReceiverStatus{Name: "x"}, v1alpha1.NotificationReceiver{}, "uid", events)
		for a := int32(1); a < MaxAttempts; a++ {
			var dropped bool
			if r, dropped = Failed(r, m, v1alpha1.ReasonDeliveryFailing, "HTTP 500", now); dropped {
				t.Fatalf("dropped after %d attempts", a)
			}
			if r.Attempts != a || !r.NextAttemptTime.Time.Equal(now.Add(Backoff(a))) || r.LastError != "HTTP 500" {
				t.Fatalf("after %d failures: %+v", a, r)
			}
			if Due(r.NextAttemptTime, now) {
				t.Fatal("due before its backoff")
			}
			_, again, _ := Next(r, v1alpha1.NotificationReceiver{}, "uid", events)
			if again.DeliveryID != m.DeliveryID {
				t.Fatal("a retry has another delivery id")
			}
		}
		r, dropped := Failed(r, m, v1alpha1.ReasonDeliveryFailing, "HTTP 500", now)
		if !dropped || r.Delivered != 1 || r.Dropped != 1 || r.Attempts != 0 {
			t.Errorf("after the last attempt: dropped %v, %+v", dropped, r)
		}
	})
}

// Ids are stable for a message and differ between messages; the message key
// is one per page of a rollout.
func TestIDs(t *testing.T) {
	// A restarted (or upgraded) operator must compute the id the first one
	// sent: it is pinned.
	if id := DeliveryID("u", "r@1", 2, 1); id != "a08afe56f0b50165c508656b4b466335" {
		t.Errorf("delivery id %s changed", id)
	}
	distinct := map[string]bool{
		DeliveryID("u", "r@1", 2, 1): true, DeliveryID("u", "r@1", 2, 2): true, DeliveryID("u", "r@1", 3, 1): true,
		DeliveryID("u", "s@1", 2, 1): true, DeliveryID("v", "r@1", 2, 1): true,
	}
	if len(distinct) != 5 {
		t.Error("two messages share a delivery id")
	}
	if MessageKey("u", "r@1", 1) == MessageKey("u", "r@1", 2) || MessageKey("u", "r@1", 1) == MessageKey("u", "r@2", 1) {
		t.Error("message keys of two pages or two rollouts collide")
	}
	if CallbackID("u", "r@1", v1alpha1.OutcomeFailed) == CallbackID("u", "r@1", v1alpha1.OutcomeComplete) {
		t.Error("callbacks of two outcomes share an id")
	}
}

// A new receiver is not sent the past; events every receiver had are pruned.
func TestSyncAndPrune(t *testing.T) {
	ns := v1alpha1.NotificationStatus{
		Sequence:  5,
		Events:    []v1alpha1.NotificationEvent{{Sequence: 4}, {Sequence: 5}},
		Receivers: []v1alpha1.ReceiverStatus{{Name: "old", Delivered: 4}, {Name: "gone", Delivered: 1}},
	}
	SyncReceivers(&ns, []v1alpha1.NotificationReceiver{{Name: "old"}, {Name: "new"}})
	if len(ns.Receivers) != 2 || ns.Receivers[1].Name != "new" || ns.Receivers[1].Delivered != 5 {
		t.Fatalf("receivers %+v", ns.Receivers)
	}
	Prune(&ns)
	if len(ns.Events) != 1 || ns.Events[0].Sequence != 5 {
		t.Errorf("events %+v, want 5 only", ns.Events)
	}
}

func itoa(i int32) string { return string(rune('0' + i)) }

// The condition names the first receiver that fails, then the callback.
func TestCondition(t *testing.T) {
	next := ptrTime(testTime)
	tests := []struct {
		name       string
		ns         v1alpha1.NotificationStatus
		wantStatus string
		wantReason string
		wantIn     string
	}{
		{"nothing failing", v1alpha1.NotificationStatus{Receivers: []v1alpha1.ReceiverStatus{{Name: "a"}}}, "True", v1alpha1.ReasonDelivered, "delivered"},
		{"a missing Secret", v1alpha1.NotificationStatus{Receivers: []v1alpha1.ReceiverStatus{{Name: "a"}, {
			Name: "slack", Attempts: 2, NextAttemptTime: next, Reason: v1alpha1.ReasonSecretUnreadable,
			LastError: "spec.notifications[slack].secretRef: read Secret hook: not found",
		}}}, "False", v1alpha1.ReasonSecretUnreadable, "receiver slack: spec.notifications[slack].secretRef: read Secret hook: not found (attempt 2 of 12 failed; next at 2026-11-26T07:00:00Z)"},
		{"a dropped message", v1alpha1.NotificationStatus{Receivers: []v1alpha1.ReceiverStatus{{
			Name: "a", Reason: v1alpha1.ReasonDeliveryDropped, LastError: "HTTP 500",
		}}}, "False", v1alpha1.ReasonDeliveryDropped, "given up"},
		{"a failing callback", v1alpha1.NotificationStatus{Callbacks: []v1alpha1.CallbackStatus{{
			Rollout: "d1@1", Attempts: 1, NextAttemptTime: next, Reason: v1alpha1.ReasonInvalidURL, LastError: "spec.callback.secretRef: bad URL",
		}}}, "False", v1alpha1.ReasonInvalidURL, "callback of rollout d1@1: spec.callback.secretRef"},
		{"a callback given up, the last one made", v1alpha1.NotificationStatus{Callbacks: []v1alpha1.CallbackStatus{{
			Rollout: "d1@1", Delivered: true, Reason: v1alpha1.ReasonDeliveryDropped, LastError: "HTTP 500",
		}}}, "False", v1alpha1.ReasonDeliveryDropped, "callback of rollout d1@1: HTTP 500 (given up"},
		{"a callback given up, then one delivered", v1alpha1.NotificationStatus{Callbacks: []v1alpha1.CallbackStatus{{
			Rollout: "d2@2", Delivered: true,
		}}}, "True", v1alpha1.ReasonDelivered, "delivered"},
		{"the oldest pending callback is the one named", v1alpha1.NotificationStatus{Callbacks: []v1alpha1.CallbackStatus{
			{Rollout: "d1@1", Attempts: 3, NextAttemptTime: next, Reason: v1alpha1.ReasonDeliveryFailing, LastError: "HTTP 503"},
			{Rollout: "d2@2"},
		}}, "False", v1alpha1.ReasonDeliveryFailing, "callback of rollout d1@1: HTTP 503 (attempt 3 of 12"},
	}
	for _, tt := range tests {
		c := Condition(tt.ns)
		if string(c.Status) != tt.wantStatus || c.Reason != tt.wantReason || !strings.Contains(c.Message, tt.wantIn) {
			t.Errorf("%s: %s %s %q, want %s %s containing %q", tt.name, c.Status, c.Reason, c.Message, tt.wantStatus, tt.wantReason, tt.wantIn)
		}
	}
}
