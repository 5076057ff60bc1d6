package rolloutgroup

import (
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
)

// deletionTTL bounds how long a deletion is expected without the cache showing
// it; past that the cache is trusted again.
const deletionTTL = 2 * time.Minute

// deletionExpectations is the pattern Kubernetes' own controllers (ReplicaSet,
// Job) call expectations: per group, the UIDs of the pods this process deleted,
// until the informer cache shows them terminating or gone (the watch event
// satisfies the expectation). Meanwhile the planner counts them as terminating,
// so a reconcile that runs before the cache catches up does not see them still
// Ready and delete more.
//
// Expectations live in one process's memory and are empty after a restart or a
// leader handover; they are safe when empty because every batch is also checked
// against a live read of the member's pods (live_read.go), which is
// what protects a new leader from a cache older than the old leader's last batch.
type deletionExpectations struct {
	mu      sync.Mutex
	deleted map[types.NamespacedName]map[types.UID]time.Time
}

func newDeletionExpectations() *deletionExpectations {
	return &deletionExpectations{deleted: map[types.NamespacedName]map[types.UID]time.Time{}}
}

// Expect records that the group deleted pod at now.
func (t *deletionExpectations) Expect(group types.NamespacedName, pod *corev1.Pod, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.deleted[group] == nil {
		t.deleted[group] = map[types.UID]time.Time{}
	}
	t.deleted[group][pod.UID] = now
}

// Pending returns the group's deleted pods that the cache still shows live, and
// forgets the others: those the cache shows terminating or no longer has. pods are every pod the cache holds for the group's members.
func (t *deletionExpectations) Pending(group types.NamespacedName, pods []*corev1.Pod, now time.Time) sets.Set[types.UID] {
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
func (t *deletionExpectations) ForgetGroup(group types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.deleted, group)
}
