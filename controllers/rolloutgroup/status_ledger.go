package rolloutgroup

import (
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/internal/rollout/gate"
)

// statusLedger keeps, per group, the status this process last wrote and the one
// it last computed. The RolloutGroup controller is the only writer of
// RolloutGroup status (one leader at a time) but for status.disruption, so its
// own record is at least as fresh as the informer cache, which may not have
// seen the last write yet; the hold is taken from whichever saw it renewed
// last. It also lets progress-only changes wait:
// a rollout changes its counters on every pod event, and writing each would cost
// several API writes per pod rolled.
type statusLedger struct {
	mu      sync.Mutex
	entries map[types.NamespacedName]ledgerEntry
}

type ledgerEntry struct {
	uid types.UID
	// written is the status the API server holds, as far as this process knows.
	written v1alpha1.RolloutGroupStatus
	// current is the last status computed; it differs from written while a
	// progress-only change waits for its write.
	current   v1alpha1.RolloutGroupStatus
	lastWrite time.Time
}

func newStatusLedger() *statusLedger {
	return &statusLedger{entries: map[types.NamespacedName]ledgerEntry{}}
}

// Base returns the group to compute from (the cached object with the freshest
// status known) and the status the API server holds, to patch against.
func (l *statusLedger) Base(cached *v1alpha1.RolloutGroup) (*v1alpha1.RolloutGroup, v1alpha1.RolloutGroupStatus) {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := types.NamespacedName{Namespace: cached.Namespace, Name: cached.Name}
	e, ok := l.entries[key]
	if !ok || e.uid != cached.UID {
		delete(l.entries, key) // unknown, or a new group with the same name
		return cached, *cached.Status.DeepCopy()
	}
	rg := cached.DeepCopy()
	rg.Status = *e.current.DeepCopy()
	written := *e.written.DeepCopy()
	// status.disruption is not this process's alone: other decisions record
	// holds in it (budget.Acquire), which only the cache shows.
	rg.Status.Disruption = fresherHold(cached.Status.Disruption, e.written.Disruption)
	written.Disruption = rg.Status.Disruption.DeepCopy()
	return rg, written
}

// Knows reports whether this process holds a record of the group: false in a
// process that has just taken the group over (a new leader, a restart), whose
// predecessor may have died with changes waiting for their write.
func (l *statusLedger) Knows(rg *v1alpha1.RolloutGroup) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	e, ok := l.entries[types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}]
	return ok && e.uid == rg.UID
}

// Wrote records a successful status write.
func (l *statusLedger) Wrote(rg *v1alpha1.RolloutGroup, status v1alpha1.RolloutGroupStatus, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.entries[types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}] = ledgerEntry{
		uid: rg.UID, written: *status.DeepCopy(), current: *status.DeepCopy(), lastWrite: now,
	}
}

// Defer records a computed status that is not written yet and returns how long
// it may wait. written is the status the API server holds.
func (l *statusLedger) Defer(rg *v1alpha1.RolloutGroup, written, current v1alpha1.RolloutGroupStatus, now time.Time, interval time.Duration) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}
	e := l.entries[key]
	if e.uid != rg.UID {
		e = ledgerEntry{uid: rg.UID}
	}
	e.written, e.current = *written.DeepCopy(), *current.DeepCopy()
	l.entries[key] = e
	return max(0, e.lastWrite.Add(interval).Sub(now))
}

// Forget drops a deleted group.
func (l *statusLedger) Forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.entries, key)
}

// sameSecond reports whether two times are the same as the API stores them,
// to the second: a status read back from the API server (after an intent's
// write) holds the rollout's start without the nanoseconds this process
// computed it with, and that is no change to write at once (issue 29: one
// status write more per batch).
func sameSecond(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Truncate(time.Second).Equal(b.Truncate(time.Second))
}

// rollingOrWaiting reports whether a member's phase is one a rolling
// member goes through at every batch.
func rollingOrWaiting(p v1alpha1.MemberPhase) bool {
	return p == v1alpha1.MemberRolling || p == v1alpha1.MemberWaiting
}

// urgentStatusChange reports whether next differs from written in anything a user
// or the controller itself must see at once: phase, the member being rolled,
// conditions (but the reason of a rollout's current step), member phases and
// revisions, the rollout's start and end, and the last batch time when
// batchInterval depends on it. Counters, messages, progress times and the step
// of a rollout can wait for the next progress write.
func urgentStatusChange(spec v1alpha1.RolloutGroupSpec, written, next v1alpha1.RolloutGroupStatus) bool {
	if written.Phase == next.Phase && written.ObservedGeneration == next.ObservedGeneration &&
		waitsForStatefulSetControllers(written) && waitsForStatefulSetControllers(next) {
		// A template change reaches the members' StatefulSet controllers one
		// after the other (helm applies them in turn): the group waits, and the
		// member it names moves on as each controller catches up, within
		// milliseconds. The wait itself was written at once; which member it
		// names then waits for the next write (issue 29: a status write per
		// member more per rollout).
		return false
	}
	if written.Phase != next.Phase || written.CurrentStatefulSet != next.CurrentStatefulSet ||
		written.ObservedGeneration != next.ObservedGeneration ||
		!sameSecond(written.RolloutStartTime, next.RolloutStartTime) ||
		!sameSecond(written.RolloutCompletionTime, next.RolloutCompletionTime) {
		return true
	}
	if spec.BatchInterval != nil && spec.BatchInterval.Duration > 0 &&
		!equality.Semantic.DeepEqual(written.LastBatchTime, next.LastBatchTime) {
		return true
	}
	if len(written.Conditions) != len(next.Conditions) || len(written.StatefulSets) != len(next.StatefulSets) {
		return true
	}
	if !equality.Semantic.DeepEqual(written.Hooks, next.Hooks) || gate.Changed(written.Analysis, next.Analysis) || stepChanged(written.Step, next.Step) ||
		rotationChanged(written, next) || leaksChanged(written, next) {
		return true
	}
	// Within a rollout the reason flips between what each pass does (deleting a
	// batch, waiting for its pods, waiting for another member) at every batch;
	// writing each flip would cost a status write per batch, so those wait for
	// the next progress write. Any other reason change is written at once, and
	// so is a wait for the disruption budget: it names another decision's
	// hold, which a user must see while it stops the rollout.
	bothProgressing := written.Phase == v1alpha1.PhaseProgressing && next.Phase == v1alpha1.PhaseProgressing
	for i := range next.Conditions {
		w, n := written.Conditions[i], next.Conditions[i]
		if w.Type != n.Type || w.Status != n.Status ||
			(w.Reason != n.Reason && (!bothProgressing || n.Reason == v1alpha1.ReasonWaitingForDisruption)) {
			return true
		}
	}
	for i := range next.StatefulSets {
		w, n := written.StatefulSets[i], next.StatefulSets[i]
		// Within a rollout a member flips between Rolling and Waiting at
		// every batch: a partitioned member waits for its StatefulSet
		// controller to observe each partition Echelon lowers, an OnDelete
		// member for the last pods it deleted. Written at once, each flip
		// would cost a status write (issue 29: writes per pod); the member's
		// next phase (Complete, or another member Rolling) is written at once.
		if w.Name != n.Name || (w.Phase != n.Phase && !(bothProgressing && rollingOrWaiting(w.Phase) && rollingOrWaiting(n.Phase))) || w.Replicas != n.Replicas ||
			w.MaxUnavailable != n.MaxUnavailable || w.MaxUnavailableFrom != n.MaxUnavailableFrom ||
			w.UpdateRevision != n.UpdateRevision || w.CurrentRevision != n.CurrentRevision ||
			w.StableRevision != n.StableRevision || w.GatePassedRevision != n.GatePassedRevision {
			return true
		}
	}
	return false
}

// waitsForStatefulSetControllers reports whether st says the group waits for
// a member's StatefulSet controller to observe its spec.
func waitsForStatefulSetControllers(st v1alpha1.RolloutGroupStatus) bool {
	c := meta.FindStatusCondition(st.Conditions, v1alpha1.ConditionReady)
	return c != nil && c.Reason == v1alpha1.ReasonWaitingForStatefulSet
}

// recoverDeferred is the status a process that has just taken a group over
// computes from: st, as the API server holds it, with what the previous
// process may have kept in memory and lost recovered from the members' pods.
// Only progress-only changes wait (at most statusProgressInterval), and of
// those only the pods rolled and the batch time are not derived again from
// the objects at every pass: a pod the previous process deleted is still
// terminating (its deletion time is exact), or has been replaced by a pod of
// the update revision created since the rollout began. podsRolled becomes at
// least the count of those pods, lastBatchTime and lastProgressTime at least
// the last deletion time seen. Writing every batch at once instead would cost
// a status write per batch, above the budget of two API writes per pod
// rolled (make bench).
func recoverDeferred(st v1alpha1.RolloutGroupStatus, members []rollout.Member) v1alpha1.RolloutGroupStatus {
	if !lookup.RolloutOpen(st) {
		return st
	}
	start := st.RolloutStartTime.Time
	var rolled int32
	var lastDeletion time.Time
	for _, m := range members {
		if m.StatefulSet == nil {
			continue
		}
		update := m.StatefulSet.Status.UpdateRevision
		for _, p := range m.Pods {
			onUpdate := p.Labels[appsv1.ControllerRevisionHashLabelKey] == update
			switch {
			case p.DeletionTimestamp != nil && !onUpdate:
				deleted := p.DeletionTimestamp.Time
				if p.DeletionGracePeriodSeconds != nil {
					deleted = deleted.Add(-time.Duration(*p.DeletionGracePeriodSeconds) * time.Second)
				}
				if !deleted.Before(start) {
					rolled++
					lastDeletion = later(lastDeletion, deleted)
				}
			case p.DeletionTimestamp == nil && onUpdate && !p.CreationTimestamp.Time.Before(start):
				rolled++
			}
		}
	}
	st.PodsRolled = max(st.PodsRolled, rolled)
	if !lastDeletion.IsZero() {
		st.LastBatchTime = laterTime(st.LastBatchTime, lastDeletion)
		st.LastProgressTime = laterTime(st.LastProgressTime, lastDeletion)
	}
	return st
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

func laterTime(t *metav1.Time, than time.Time) *metav1.Time {
	if t != nil && !than.After(t.Time) {
		return t
	}
	return &metav1.Time{Time: than}
}
