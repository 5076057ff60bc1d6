package controllers

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// statusMemo remembers the status this process last wrote for each group, with
// the resourceVersion it was written over. A reconcile that starts before the
// cache has seen that write would otherwise compute from the older status and
// lose what the write recorded (pods rolled, last batch time).
type statusMemo struct {
	mu      sync.Mutex
	written map[types.NamespacedName]memoEntry
}

type memoEntry struct {
	// over is the resourceVersion of the object the patch was applied to.
	over  string
	group *v1alpha1.RolloutGroup
}

func newStatusMemo() *statusMemo {
	return &statusMemo{written: map[types.NamespacedName]memoEntry{}}
}

// Freshest returns the written object when the cache still shows the version the
// write replaced, else the cached object itself.
func (m *statusMemo) Freshest(cached *v1alpha1.RolloutGroup) *v1alpha1.RolloutGroup {
	m.mu.Lock()
	defer m.mu.Unlock()
	key := types.NamespacedName{Namespace: cached.Namespace, Name: cached.Name}
	e, ok := m.written[key]
	if !ok {
		return cached
	}
	if e.over == cached.ResourceVersion {
		return e.group.DeepCopy()
	}
	delete(m.written, key) // the cache has moved on: it is the truth again
	return cached
}

// Wrote records that group (as returned by the API server) replaced version over.
func (m *statusMemo) Wrote(over string, group *v1alpha1.RolloutGroup) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.written[types.NamespacedName{Namespace: group.Namespace, Name: group.Name}] = memoEntry{over: over, group: group.DeepCopy()}
}

// Forget drops a deleted group.
func (m *statusMemo) Forget(key types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.written, key)
}
