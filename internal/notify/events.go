// Package notify decides what a RolloutGroup's receivers and completion
// callback are told, with no client: the events of a rollout derived from
// the group's status as it was last seen and as it is now, the messages
// (paginated pod lists, JSON or Slack bodies), their ids, and the retry
// schedule. The notifier controller reads the group, asks this package,
// sends, and records the outcome in status.notifications, so that a restart
// neither loses nor repeats a notification.
package notify

import (
	"fmt"
	"time"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// MaxEvents bounds status.notifications.events: the oldest event is dropped
// (and counted as such for receivers that had not had it) past this many.
const MaxEvents = 64

// maxMessage bounds the message copied into an event.
const maxMessage = 1024

// RolloutKey is the key of the rollout a status records: its rollout id (or
// "-") and its start time; "" when the group has never rolled out. A new
// spec.rolloutId makes a new key, so a retry with a new id is a new rollout
// for the receivers and the callback.
func RolloutKey(st v1alpha1.RolloutGroupStatus) string {
	if st.RolloutStartTime == nil {
		return ""
	}
	id := st.RolloutID
	if id == "" {
		id = "-"
	}
	return fmt.Sprintf("%s@%d", id, st.RolloutStartTime.Unix())
}

// rolloutOpen reports whether the status records a rollout that has started
// and not completed (a Failed group that holds is still open).
func rolloutOpen(st v1alpha1.RolloutGroupStatus) bool {
	return st.RolloutStartTime != nil && (st.RolloutCompletionTime == nil || st.RolloutCompletionTime.Before(st.RolloutStartTime))
}

// Derive returns prev with the events of the rollout since prev.Observed
// appended (only when record is true: with no receiver there is nobody to
// keep them for), its observed state moved to st, and the callback to make
// when the rollout reached an outcome. A rollout seen for the first time
// when it is already over (notifications configured after it) gives no
// events and no callback: it is history, not news.
func Derive(prev v1alpha1.NotificationStatus, st v1alpha1.RolloutGroupStatus, groupUID string, record bool, now time.Time) v1alpha1.NotificationStatus {
	next := *prev.DeepCopy()
	key := RolloutKey(st)
	if key == "" {
		return next
	}
	obs := v1alpha1.NotificationObserved{}
	if prev.Observed != nil {
		obs = *prev.Observed.DeepCopy()
	}
	open := rolloutOpen(st)
	if key != prev.Rollout {
		if !open && prev.Rollout == "" && prev.Observed == nil {
			// History: take it as the baseline.
			next.Rollout, next.RolloutID = key, st.RolloutID
			next.Observed = observe(st, outcomeOf(st))
			return next
		}
		next.Rollout, next.RolloutID = key, st.RolloutID
		obs = v1alpha1.NotificationObserved{FailureTime: obs.FailureTime, RollbackStartTime: obs.RollbackStartTime}
		if open {
			addEvent(&next, record, v1alpha1.NotificationStarted, st, "", now)
		}
	}
	// The member last reached is kept while none is rolled (between
	// batches, while a gate soaks): the same member again is no news.
	if m := st.CurrentStatefulSet; m != "" && m != obs.Member && open {
		addEvent(&next, record, v1alpha1.NotificationMemberReached, st, m, now)
		obs.Member = m
	}
	if s := st.Step; s != nil && (s.WaitingFor == v1alpha1.StepWaitDuration || s.WaitingFor == v1alpha1.StepWaitPromote) && (obs.Step == nil || *obs.Step != s.Index) {
		addEvent(&next, record, v1alpha1.NotificationStepReached, st, st.CurrentStatefulSet, now)
		idx := s.Index
		obs.Step = &idx
	}
	if a := st.Analysis; a != nil && a.Failure != nil && !sameTime(obs.FailureTime, &a.Failure.Time) {
		addEvent(&next, record, v1alpha1.NotificationGateFailed, st, failedMember(a.Failure), now)
		obs.FailureTime = a.Failure.Time.DeepCopy()
	}
	if a := st.Analysis; a != nil && a.Rollback != nil && !sameTime(obs.RollbackStartTime, &a.Rollback.StartTime) {
		addEvent(&next, record, v1alpha1.NotificationRollingBack, st, "", now)
		obs.RollbackStartTime = a.Rollback.StartTime.DeepCopy()
	}
	if st.Phase != obs.Phase {
		switch st.Phase {
		case v1alpha1.PhasePaused:
			addEvent(&next, record, v1alpha1.NotificationPaused, st, "", now)
		case v1alpha1.PhaseStalled:
			addEvent(&next, record, v1alpha1.NotificationStalled, st, "", now)
		case v1alpha1.PhaseFailed:
			addEvent(&next, record, v1alpha1.NotificationFailed, st, "", now)
		}
	}
	obs.Phase = st.Phase
	// Complete and RolledBack end a rollout for good; Failed holds, and a
	// retry may still take the rollout to another outcome.
	if out := outcomeOf(st); out != "" && out != obs.Outcome && (obs.Outcome == "" || obs.Outcome == v1alpha1.OutcomeFailed) {
		if out == v1alpha1.OutcomeComplete {
			addEvent(&next, record, v1alpha1.NotificationComplete, st, "", now)
		}
		obs.Outcome = out
		EnqueueCallback(&next, v1alpha1.CallbackStatus{
			Rollout: key, RolloutID: st.RolloutID, Outcome: out, Time: metav1.NewTime(now),
			DeliveryID: CallbackID(groupUID, key, out),
		})
	}
	next.Observed = &obs
	return next
}

// outcomeOf is how the rollout recorded in st ended, "" while it goes on.
// A Failed group that holds (onFailure Pause) has the outcome Failed; a
// retry may still take it to Complete, which is then its outcome.
func outcomeOf(st v1alpha1.RolloutGroupStatus) v1alpha1.RolloutOutcome {
	rb := (*v1alpha1.RollbackStatus)(nil)
	if st.Analysis != nil {
		rb = st.Analysis.Rollback
	}
	switch {
	case rb != nil && rb.CompletionTime != nil:
		return v1alpha1.OutcomeRolledBack
	case st.Phase == v1alpha1.PhaseFailed && rb == nil:
		return v1alpha1.OutcomeFailed
	case !rolloutOpen(st) && rb == nil:
		return v1alpha1.OutcomeComplete
	}
	return ""
}

func observe(st v1alpha1.RolloutGroupStatus, out v1alpha1.RolloutOutcome) *v1alpha1.NotificationObserved {
	obs := &v1alpha1.NotificationObserved{Phase: st.Phase, Member: st.CurrentStatefulSet, Outcome: out}
	if s := st.Step; s != nil && (s.WaitingFor == v1alpha1.StepWaitDuration || s.WaitingFor == v1alpha1.StepWaitPromote) {
		idx := s.Index
		obs.Step = &idx
	}
	if a := st.Analysis; a != nil {
		if a.Failure != nil {
			obs.FailureTime = a.Failure.Time.DeepCopy()
		}
		if a.Rollback != nil {
			obs.RollbackStartTime = a.Rollback.StartTime.DeepCopy()
		}
	}
	return obs
}

func sameTime(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(b)
}

func failedMember(f *v1alpha1.AnalysisFailure) string {
	if f.Gate == nil {
		return ""
	}
	return f.Gate.Member
}

// addEvent appends one event of a rollout to ns when record is set (and
// counts it either way).
func addEvent(ns *v1alpha1.NotificationStatus, record bool, typ v1alpha1.NotificationEventType, st v1alpha1.RolloutGroupStatus, member string, now time.Time) {
	ev := v1alpha1.NotificationEvent{
		Type: typ, Time: metav1.NewTime(now), Phase: st.Phase, Member: member, Updated: st.Updated,
		Message: st.Message,
	}
	for _, m := range st.StatefulSets {
		if m.Name == member {
			ev.Replicas = m.Replicas
		}
	}
	appendEvent(ns, record, ev)
}

// appendEvent numbers ev, stamps it with the rollout of ns and appends it
// when record is set (counting it either way), dropping the oldest past
// MaxEvents; a receiver that had not had a dropped event counts it dropped.
func appendEvent(ns *v1alpha1.NotificationStatus, record bool, ev v1alpha1.NotificationEvent) {
	ns.Sequence++
	if !record {
		return
	}
	ev.Sequence, ev.Rollout, ev.RolloutID = ns.Sequence, ns.Rollout, ns.RolloutID
	ev.Message = truncate(ev.Message, maxMessage)
	ns.Events = append(ns.Events, ev)
	for len(ns.Events) > MaxEvents {
		gone := ns.Events[0]
		ns.Events = ns.Events[1:]
		for i := range ns.Receivers {
			if r := &ns.Receivers[i]; r.Delivered < gone.Sequence {
				r.Delivered, r.PagesDelivered, r.Attempts, r.NextAttemptTime = gone.Sequence, 0, 0, nil
				r.Dropped++
			}
		}
	}
}

// truncate cuts s to at most n bytes, on a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}
