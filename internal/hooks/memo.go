package hooks

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// memoTTL is how long a successful call is remembered: long enough for any
// batch or downscale to remove its pods, short enough to stay small.
const memoTTL = time.Hour

// Memo remembers the pods whose beforePodRemoval call succeeded, by UID, so
// that a removal cut short (a stale view, a failed patch) does not repeat
// its calls. Empty after a restart, which only repeats calls: delivery is at
// least once.
type Memo struct {
	mu   sync.Mutex
	pods map[types.UID]time.Time
}

// NewMemo returns an empty memo.
func NewMemo() *Memo { return &Memo{pods: map[types.UID]time.Time{}} }

// Done reports whether pod uid's call succeeded.
func (m *Memo) Done(uid types.UID) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.pods[uid]
	return ok
}

// Mark records that pod uid's call succeeded at now, and forgets calls older
// than an hour.
func (m *Memo) Mark(uid types.UID, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for u, at := range m.pods {
		if now.Sub(at) > memoTTL {
			delete(m.pods, u)
		}
	}
	m.pods[uid] = now
}
