package notify

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// PageSize is the most pods one message lists: Slack's Bedrock operator
// settled on 50 after messages about 1,000-pod sets hit rate limits.
const PageSize = 50

// Retry schedule: the first retry after InitialBackoff, each next one after
// twice as long, never more than MaxBackoff apart; a message is given up
// (counted dropped) after MaxAttempts failed attempts, some 20 minutes after
// the first.
const (
	InitialBackoff = time.Second
	MaxBackoff     = 5 * time.Minute
	MaxAttempts    = 12
)

// Backoff is how long to wait after the attempts-th failed attempt (from 1)
// before the next one.
func Backoff(attempts int32) time.Duration {
	d := InitialBackoff
	for i := int32(1); i < attempts; i++ {
		d *= 2
		if d >= MaxBackoff {
			return MaxBackoff
		}
	}
	return d
}

// Pages is how many messages an event takes: its member's pods, PageSize a
// message; one for an event that lists no pods.
func Pages(ev v1alpha1.NotificationEvent) int32 {
	n := ev.Replicas - ev.FirstOrdinal
	if n <= PageSize {
		return 1
	}
	return (n + PageSize - 1) / PageSize
}

// PagePods are the pods that page (from 1) of ev lists: the member's pods
// by ordinal from ev.FirstOrdinal, as a StatefulSet names them.
func PagePods(ev v1alpha1.NotificationEvent, page int32) []string {
	if ev.Member == "" || ev.Replicas <= ev.FirstOrdinal {
		return nil
	}
	first := ev.FirstOrdinal + (page-1)*PageSize
	last := min(first+PageSize, ev.Replicas)
	pods := make([]string, 0, max(0, last-first))
	for i := first; i < last; i++ {
		pods = append(pods, fmt.Sprintf("%s-%d", ev.Member, i))
	}
	return pods
}

// Message is one message to one receiver: a page of an event.
type Message struct {
	Event v1alpha1.NotificationEvent
	// Page counts from 1 to Pages.
	Page, Pages int32
	// DeliveryID is the same on every attempt of the message and differs
	// from every other message: receivers drop a message whose id they have
	// seen (Echelon delivers at least once).
	DeliveryID string
	// MessageKey is the same for every message of one page of a rollout: a
	// receiver that supports it replaces the message it holds under that
	// key, so that a rollout is one message updated in place.
	MessageKey string
	Pods       []string
}

// Next is the next message for the receiver r, with r moved past the events
// it does not want; ok is false when r has had every event.
func Next(r v1alpha1.ReceiverStatus, spec v1alpha1.NotificationReceiver, groupUID string, events []v1alpha1.NotificationEvent) (_ v1alpha1.ReceiverStatus, _ Message, ok bool) {
	for _, ev := range events {
		if ev.Sequence <= r.Delivered {
			continue
		}
		if len(spec.Events) > 0 && !slices.Contains(spec.Events, ev.Type) {
			r.Delivered, r.PagesDelivered = ev.Sequence, 0
			continue
		}
		page := r.PagesDelivered + 1
		return r, Message{
			Event: ev, Page: page, Pages: Pages(ev),
			DeliveryID: DeliveryID(groupUID, ev.Rollout, ev.Sequence, page),
			MessageKey: messageKey(groupUID, ev, page),
			Pods:       PagePods(ev, page),
		}, true
	}
	return r, Message{}, false
}

// Delivered is r once m was accepted.
func Delivered(r v1alpha1.ReceiverStatus, m Message) v1alpha1.ReceiverStatus {
	r.PagesDelivered++
	if r.PagesDelivered >= m.Pages {
		r.Delivered, r.PagesDelivered = m.Event.Sequence, 0
	}
	r.LastDeliveryID, r.Attempts, r.NextAttemptTime, r.LastError, r.Reason = m.DeliveryID, 0, nil, "", ""
	return r
}

// Failed is r once an attempt of m failed with why: retried after Backoff,
// or, at MaxAttempts, given up (dropped is then true) and the receiver moves
// on to the next message. lastError stays until a message is accepted.
func Failed(r v1alpha1.ReceiverStatus, m Message, reason, why string, now time.Time) (_ v1alpha1.ReceiverStatus, dropped bool) {
	r.Attempts++
	r.LastError, r.Reason = truncate(why, maxMessage), reason
	if r.Attempts >= MaxAttempts {
		r.PagesDelivered++
		if r.PagesDelivered >= m.Pages {
			r.Delivered, r.PagesDelivered = m.Event.Sequence, 0
		}
		r.Attempts, r.NextAttemptTime = 0, nil
		r.Dropped++
		r.Reason = v1alpha1.ReasonDeliveryDropped
		return r, true
	}
	r.NextAttemptTime = ptrTime(now.Add(Backoff(r.Attempts)))
	return r, false
}

// Due reports whether an attempt planned at next may go at now.
func Due(next *metav1.Time, now time.Time) bool {
	return next == nil || !now.Before(next.Time)
}

// Prune drops the events every receiver has had.
func Prune(ns *v1alpha1.NotificationStatus) {
	if len(ns.Receivers) == 0 {
		ns.Events = nil
		return
	}
	low := ns.Receivers[0].Delivered
	for _, r := range ns.Receivers[1:] {
		low = min(low, r.Delivered)
	}
	ns.Events = slices.DeleteFunc(ns.Events, func(e v1alpha1.NotificationEvent) bool { return e.Sequence <= low })
	if len(ns.Events) == 0 {
		ns.Events = nil
	}
}

// SyncReceivers gives every receiver of spec a state, in spec order: a new
// receiver starts after the events already derived (it is not sent the
// past), a removed one is forgotten.
func SyncReceivers(ns *v1alpha1.NotificationStatus, spec []v1alpha1.NotificationReceiver) {
	var out []v1alpha1.ReceiverStatus
	for _, rs := range spec {
		i := slices.IndexFunc(ns.Receivers, func(r v1alpha1.ReceiverStatus) bool { return r.Name == rs.Name })
		if i >= 0 {
			out = append(out, ns.Receivers[i])
			continue
		}
		out = append(out, v1alpha1.ReceiverStatus{Name: rs.Name, Delivered: ns.Sequence})
	}
	ns.Receivers = out
}

// DeliveryID identifies one page of one event of one rollout of a group.
func DeliveryID(groupUID, rollout string, sequence int64, page int32) string {
	return hash(fmt.Sprintf("delivery/%s/%s/%d/%d", groupUID, rollout, sequence, page))
}

// MessageKey identifies one page of the message of one rollout of a group.
func MessageKey(groupUID, rollout string, page int32) string {
	return hash(fmt.Sprintf("message/%s/%s/%d", groupUID, rollout, page))
}

// messageKey is the key of the message a page of ev updates: one per page
// of a rollout; one per event of an object without rollouts (a
// ScalingPolicy, a DelayedDownscale).
func messageKey(uid string, ev v1alpha1.NotificationEvent, page int32) string {
	if ev.Rollout == "" {
		return hash(fmt.Sprintf("message/%s/event/%d/%d", uid, ev.Sequence, page))
	}
	return MessageKey(uid, ev.Rollout, page)
}

// CallbackID identifies the callback of one outcome of one rollout.
func CallbackID(groupUID, rollout string, outcome v1alpha1.RolloutOutcome) string {
	return hash(fmt.Sprintf("callback/%s/%s/%s", groupUID, rollout, outcome))
}

func hash(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:16])
}

func ptrTime(t time.Time) *metav1.Time {
	mt := metav1.NewTime(t)
	return &mt
}
