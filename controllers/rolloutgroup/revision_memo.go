package rolloutgroup

import (
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
)

// revisionMemo remembers the update revision this process last wrote into each
// StatefulSet's status.currentRevision, so that passes running before the cache
// shows the write do not repeat it. Losing it (a restart) costs one repeated,
// harmless patch.
type revisionMemo struct {
	mu      sync.Mutex
	written map[types.UID]string
}

func newRevisionMemo() *revisionMemo {
	return &revisionMemo{written: map[types.UID]string{}}
}

// needsAdvance reports whether sts's currentRevision lags its updateRevision and
// this process has not already set it.
func (m *revisionMemo) needsAdvance(sts *appsv1.StatefulSet) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if sts.Status.CurrentRevision == sts.Status.UpdateRevision {
		delete(m.written, sts.UID) // the cache shows the write: nothing left to remember
		return false
	}
	return m.written[sts.UID] != sts.Status.UpdateRevision
}

func (m *revisionMemo) advanced(sts *appsv1.StatefulSet) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.written[sts.UID] = sts.Status.UpdateRevision
}
