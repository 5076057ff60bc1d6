package rolloutgroup

import (
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// batchEventInterval is the least time between two PodsRolled Events of one
// member. A member refills its maxUnavailable one pod at a time as pods come
// back, so an Event per batch is an Event (an API write) per pod or nearly:
// the batches within the interval are told together, in one Event, at its
// end. The first batch of a member is told at once.
const batchEventInterval = 10 * time.Second

// maxEventPods bounds the pods one Event names (an Event's note holds 1 KiB);
// the others are counted.
const maxEventPods = 24

// rolledBatch is one batch a member lost: its pods and how they went.
type rolledBatch struct {
	member string
	// action is the Event's action: Delete, Evict or Release.
	action string
	// verb is "deleted", "evicted" or "released".
	verb string
	// partition is set for a release, from and to the partitions it wrote.
	partition bool
	from, to  int32
	revision  string
	pods      []*corev1.Pod
}

// told is one PodsRolled Event due: its action, note, and related object
// (the first pod it names: the Events API folds Events that agree on
// reason, action, regarding and related into one series, which would hide
// all but one of them).
type told struct {
	action  string
	note    string
	related *corev1.Pod
}

// batchLog holds, per group, the batches not told yet.
type batchLog struct {
	mu      sync.Mutex
	pending map[types.NamespacedName]*untold
}

// untold is a group's batches of one member and action since its last
// PodsRolled Event.
type untold struct {
	batches []rolledBatch
	// lastTold is when the member's last PodsRolled Event was recorded.
	lastTold time.Time
	member   string
}

func newBatchLog() *batchLog { return &batchLog{pending: map[types.NamespacedName]*untold{}} }

// rolled records batch of rg at now and returns the Events due: the batches
// of another member or action untold until now, and this one when the
// member's last Event is batchEventInterval old or there is none.
func (l *batchLog) rolled(rg *v1alpha1.RolloutGroup, b rolledBatch, now time.Time) []told {
	l.mu.Lock()
	defer l.mu.Unlock()
	var due []told
	u := l.pending[client.ObjectKeyFromObject(rg)]
	if u != nil && (u.member != b.member || (len(u.batches) > 0 && u.batches[0].action != b.action)) {
		if len(u.batches) > 0 {
			due = append(due, tell(u.batches))
		}
		u = nil
	}
	if u == nil {
		u = &untold{member: b.member}
		l.pending[client.ObjectKeyFromObject(rg)] = u
	}
	u.batches = append(u.batches, b)
	if u.lastTold.IsZero() || now.Sub(u.lastTold) >= batchEventInterval {
		due = append(due, tell(u.batches))
		u.batches, u.lastTold = nil, now
	}
	return due
}

// due returns rg's untold batches when they are due at now: their
// interval has passed, or the pass rolls another member than theirs
// (current) or none; and how long until they are due otherwise.
func (l *batchLog) due(rg *v1alpha1.RolloutGroup, current string, now time.Time) (*told, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	u := l.pending[client.ObjectKeyFromObject(rg)]
	if u == nil || len(u.batches) == 0 {
		return nil, 0
	}
	if wait := u.lastTold.Add(batchEventInterval).Sub(now); u.member == current && wait > 0 {
		return nil, wait
	}
	t := tell(u.batches)
	u.batches, u.lastTold = nil, now
	return &t, 0
}

// forget drops what is held for the group.
func (l *batchLog) forget(key types.NamespacedName) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.pending, key)
}

// tell is the one PodsRolled Event for batches (of one member and action,
// in order): a batch's own words, or for several, their pods together with
// the number of batches.
func tell(batches []rolledBatch) told {
	first, last := batches[0], batches[len(batches)-1]
	var names []string
	for _, b := range batches {
		for _, pod := range b.pods {
			names = append(names, fmt.Sprintf("%s (%s)", pod.Name, podRevisionLabel(pod)))
		}
	}
	n := len(names)
	if len(names) > maxEventPods {
		names = append(names[:maxEventPods], fmt.Sprintf("and %d more", n-maxEventPods))
	}
	how := ""
	switch {
	case last.partition && len(batches) > 1:
		how = fmt.Sprintf(" by lowering its partition from %d to %d in %d steps", first.from, last.to, len(batches))
	case last.partition:
		how = fmt.Sprintf(" by lowering its partition from %d to %d", last.from, last.to)
	case len(batches) > 1:
		how = fmt.Sprintf(" in %d batches", len(batches))
	}
	note := fmt.Sprintf("%s %s of StatefulSet %s%s, rolling to revision %s: %s",
		last.verb, rollout.Plural(n, "pod"), last.member, how, last.revision, strings.Join(names, ", "))
	return told{action: last.action, note: note, related: first.pods[0]}
}

// tellRolled records a batch plan's act took and records the PodsRolled
// Events due.
func (r *Reconciler) tellRolled(rg *v1alpha1.RolloutGroup, b rolledBatch, now time.Time) {
	for _, t := range r.batches.rolled(rg, b, now) {
		r.events.Eventf(rg, t.related, corev1.EventTypeNormal, "PodsRolled", t.action, "%s", t.note)
	}
}

// tellDueBatches records the PodsRolled Event of the batches untold that
// are due after plan's pass, and returns how soon to look again for those
// that are not: a member's last batches are told by the time it completes.
func (r *Reconciler) tellDueBatches(rg *v1alpha1.RolloutGroup, plan rollout.Plan, now time.Time) time.Duration {
	current := plan.Current
	if plan.Complete {
		current = ""
	}
	t, wait := r.batches.due(rg, current, now)
	if t != nil {
		r.events.Eventf(rg, t.related, corev1.EventTypeNormal, "PodsRolled", t.action, "%s", t.note)
	}
	return wait
}
