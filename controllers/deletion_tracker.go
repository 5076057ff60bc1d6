package controllers

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// deletionTTL bounds how long a deletion is remembered without the cache showing
// it; past that the cache is trusted again.
const deletionTTL = 2 * time.Minute

// deletionTracker remembers, per group, the pods this process deleted until the
// informer cache shows them terminating or gone. Without it, a reconcile that runs
// before the cache catches up would see the deleted pods still Ready and delete
// more, breaching maxUnavailable.
type deletionTracker struct {
	mu      sync.Mutex
	deleted map[types.NamespacedName]map[types.UID]time.Time
}

func newDeletionTracker() *deletionTracker {
	return &deletionTracker{deleted: map[types.NamespacedName]map[types.UID]time.Time{}}
}

// Record remembers that the group deleted pod at now.
func (t *deletionTracker) Record(group types.NamespacedName, pod *corev1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deleted[group] == nil {
		t.deleted[group] = map[types.UID]time.Time{}
	}
	t.deleted[group][pod.UID] = now
}

// Pending returns the group's deleted pods that the cache still shows live, and
// forgets the others. pods are every pod the cache holds for the group's members.
func (t *deletionTracker) Pending(group types.NamespacedName, pods []*corev1.Pod, now time.Time) sets.Set[types.UID] {
	t.mu.Lock()
	defer t.mu.Unlock()
	pending := sets.New[types.UID]()
	tracked := t.deleted[group]
	if len(tracked) == 0 {
		return pending
	}
	for _, pod := range pods {
		if at, ok := tracked[pod.UID]; ok && pod.DeletionTimestamp == nil && now.Sub(at) <= deletionTTL {
			pending.Insert(pod.UID)
		}
	}
	for uid := range tracked {
		if !pending.Has(uid) {
			delete(tracked, uid)
		}
	}
	if len(tracked) == 0 {
		delete(t.deleted, group)
	}
	return pending
}

// ForgetGroup drops everything remembered for a deleted group.
func (t *deletionTracker) ForgetGroup(group types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.deleted, group)
}
