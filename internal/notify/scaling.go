package notify

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// Events of ScalingPolicies and DelayedDownscales come from their status as
// the notifier last saw it (status.notifications.observed) and as it is
// now, as a RolloutGroup's do: their controllers know nothing of
// notifications. The first status seen is the baseline: what happened
// before receivers were configured is history, not news. These objects have
// no rollouts: their events carry no rollout key, and each is a message of
// its own.

// scaleState is what the events of a ScalingPolicy or DelayedDownscale are
// derived from.
type scaleState struct {
	phase, reason string
	replicas      int32
	desired       *int32
}

func (s scaleState) observed() *v1alpha1.NotificationObserved {
	r := s.replicas
	obs := &v1alpha1.NotificationObserved{State: s.phase, Reason: s.reason, Replicas: &r}
	if s.desired != nil {
		d := *s.desired
		obs.DesiredReplicas = &d
	}
	return obs
}

// baseline reports whether prev has seen nothing yet, and if so records cur
// as what was seen: no events.
func baseline(next *v1alpha1.NotificationStatus, cur scaleState) bool {
	if next.Observed != nil && next.Observed.Replicas != nil {
		return false
	}
	next.Observed = cur.observed()
	return true
}

func readyReason(conds []metav1.Condition, typ string) string {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return c.Reason
	}
	return ""
}

// DeriveScaling returns prev with the events of a ScalingPolicy since
// prev.Observed appended (when record is set): Scaled when the target's
// replicas changed (from, to, and the leader followed, if any); ScaleHeld
// when a due scale starts to wait, or waits for another reason; ScaleFailed
// when the policy becomes Blocked, or is Blocked for another reason. target
// and leader name the StatefulSets of its spec.
func DeriveScaling(prev v1alpha1.NotificationStatus, st v1alpha1.ScalingPolicyStatus, target, leader string, record bool, now time.Time) v1alpha1.NotificationStatus {
	next := *prev.DeepCopy()
	if st.Phase == "" {
		return next // not written yet
	}
	cur := scaleState{phase: string(st.Phase), reason: readyReason(st.Conditions, v1alpha1.ScalingConditionReady), replicas: st.Replicas, desired: st.DesiredReplicas}
	if baseline(&next, cur) {
		return next
	}
	obs := next.Observed
	ev := func(typ v1alpha1.NotificationEventType) v1alpha1.NotificationEvent {
		return v1alpha1.NotificationEvent{Type: typ, Time: metav1.NewTime(now), State: cur.phase, Member: target, Message: st.Message}
	}
	if from := *obs.Replicas; st.Replicas != from {
		e := ev(v1alpha1.NotificationScaled)
		e.FromReplicas, e.ToReplicas, e.Leader = ptr(from), ptr(st.Replicas), leader
		appendEvent(&next, record, e)
	}
	if changed := cur.phase != obs.State || cur.reason != obs.Reason; changed {
		switch st.Phase {
		case v1alpha1.ScalingPhaseWaiting:
			e := ev(v1alpha1.NotificationScaleHeld)
			e.FromReplicas, e.ToReplicas, e.Leader = ptr(st.Replicas), copyPtr(st.DesiredReplicas), leader
			appendEvent(&next, record, e)
		case v1alpha1.ScalingPhaseBlocked:
			appendEvent(&next, record, ev(v1alpha1.NotificationScaleFailed))
		}
	}
	next.Observed = cur.observed()
	return next
}

// DeriveDelayed returns prev with the events of a DelayedDownscale since
// prev.Observed appended (when record is set), in this order:
// DownscaleCancelled when the desired replicas rose while a downscale was
// pending; DownscaleDone when the target's replicas went down;
// DownscaleRequested when a downscale begins or reaches further (its pods
// listed); DownscaleDelayed when the prepared pods start to wait for the
// delay; DownscaleFailed when the downscale becomes Blocked, or is Blocked
// for another reason. target names the StatefulSet of its spec.
func DeriveDelayed(prev v1alpha1.NotificationStatus, st v1alpha1.DelayedDownscaleStatus, target string, record bool, now time.Time) v1alpha1.NotificationStatus {
	next := *prev.DeepCopy()
	if st.Phase == "" {
		return next
	}
	cur := scaleState{phase: string(st.Phase), reason: readyReason(st.Conditions, v1alpha1.DelayedConditionReady), replicas: st.Replicas, desired: st.DesiredReplicas}
	if baseline(&next, cur) {
		return next
	}
	obs := next.Observed
	ev := func(typ v1alpha1.NotificationEventType, from int32, to *int32) v1alpha1.NotificationEvent {
		return v1alpha1.NotificationEvent{Type: typ, Time: metav1.NewTime(now), State: cur.phase, Member: target, Message: st.Message,
			FromReplicas: ptr(from), ToReplicas: copyPtr(to)}
	}
	wasPending, pending := downscalePending(*obs.Replicas, obs.DesiredReplicas), downscalePending(st.Replicas, st.DesiredReplicas)
	if wasPending && (st.DesiredReplicas == nil || *st.DesiredReplicas > *obs.DesiredReplicas) {
		appendEvent(&next, record, ev(v1alpha1.NotificationDownscaleCancelled, *obs.Replicas, st.DesiredReplicas))
	}
	if st.Replicas < *obs.Replicas {
		appendEvent(&next, record, ev(v1alpha1.NotificationDownscaleDone, *obs.Replicas, ptr(st.Replicas)))
	}
	if pending && (!wasPending || *st.DesiredReplicas < *obs.DesiredReplicas) {
		e := ev(v1alpha1.NotificationDownscaleRequested, st.Replicas, st.DesiredReplicas)
		// The pods removed: ordinals desired to replicas-1.
		e.Replicas, e.FirstOrdinal = st.Replicas, *st.DesiredReplicas
		appendEvent(&next, record, e)
	}
	if st.Phase == v1alpha1.DelayedPhaseWaiting && obs.State != string(st.Phase) {
		appendEvent(&next, record, ev(v1alpha1.NotificationDownscaleDelayed, st.Replicas, st.DesiredReplicas))
	}
	if st.Phase == v1alpha1.DelayedPhaseBlocked && (obs.State != cur.phase || obs.Reason != cur.reason) {
		appendEvent(&next, record, ev(v1alpha1.NotificationDownscaleFailed, st.Replicas, st.DesiredReplicas))
	}
	next.Observed = cur.observed()
	return next
}

func downscalePending(replicas int32, desired *int32) bool {
	return desired != nil && *desired < replicas
}

func ptr(v int32) *int32 { return &v }

func copyPtr(p *int32) *int32 {
	if p == nil {
		return nil
	}
	return ptr(*p)
}
