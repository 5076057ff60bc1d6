package notification

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/tools/events"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/internal/notify"
	"github.com/echelon-operator/echelon/test/builders"
)

// sink is the Events API as client-go's broadcaster writes to it: it counts
// the Events created and the series updates.
type sink struct {
	mu      sync.Mutex
	created []*eventsv1.Event
	patched int
}

func (s *sink) Create(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.created = append(s.created, e.DeepCopy())
	return e, nil
}

func (s *sink) Update(_ context.Context, e *eventsv1.Event) (*eventsv1.Event, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.patched++
	return e, nil
}

func (s *sink) Patch(_ context.Context, e *eventsv1.Event, _ []byte) (*eventsv1.Event, error) {
	return s.Update(context.Background(), e)
}

func (s *sink) notes() (notes []string, patched int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, e := range s.created {
		notes = append(notes, e.Note)
	}
	return notes, s.patched
}

// TestEveryDeliveryIsAnEvent: two deliveries to one receiver within a
// second (Started, then MemberReached) are two NotificationSent Events, each
// naming its delivery id, as docs/notifications.md promises; through
// client-go's Events recorder, which folds Events alike but for their
// message into one series that keeps the first message.
func TestEveryDeliveryIsAnEvent(t *testing.T) {
	s := &sink{}
	b := events.NewBroadcaster(s)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := b.StartRecordingToSinkWithContext(ctx); err != nil {
		t.Fatal(err)
	}
	defer b.Shutdown()
	rec := b.NewRecorder(controllertest.Scheme(), "echelon")
	rg := builders.MakeRolloutGroup("ns", "quick").Members("a").Obj()
	rg.UID = "u1"
	messages := []notify.Message{
		{Event: v1alpha1.NotificationEvent{Type: v1alpha1.NotificationStarted, Rollout: "r1"}, Page: 1, Pages: 1, DeliveryID: "d-started"},
		{Event: v1alpha1.NotificationEvent{Type: v1alpha1.NotificationMemberReached, Rollout: "r1", Member: "a"}, Page: 1, Pages: 1, DeliveryID: "d-member"},
	}
	for _, m := range messages {
		recordSent(rec, rg, "hook", m)
		time.Sleep(10 * time.Millisecond)
	}
	var notes []string
	var patched int
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if notes, patched = s.notes(); len(notes)+patched >= 2 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if len(notes) != 2 || patched != 0 {
		t.Fatalf("%d Events created, %d series updates; want two Events: %q", len(notes), patched, notes)
	}
	for _, m := range messages {
		if !slices.ContainsFunc(notes, func(n string) bool { return strings.Contains(n, "delivery "+m.DeliveryID) }) {
			t.Errorf("no Event names delivery %s: %q", m.DeliveryID, notes)
		}
	}
}
