package webhooks

import (
	"sync"
	"time"
)

// eventLimiter lets one Event per key through per interval. Each replica
// keeps its own: the Events are for people, and a few more of them when
// replicas share the requests cost nothing.
type eventLimiter struct {
	interval time.Duration
	mu       sync.Mutex
	last     map[string]time.Time
}

func newEventLimiter(interval time.Duration) *eventLimiter {
	return &eventLimiter{interval: interval, last: map[string]time.Time{}}
}

// allow reports whether an Event keyed key may be recorded at now, and notes
// it when so. A nil limiter or an empty key allows every Event. Keys whose
// interval has passed are forgotten, so the limiter holds only the keys of
// the last interval.
func (l *eventLimiter) allow(key string, now time.Time) bool {
	if l == nil || key == "" {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, at := range l.last {
		if now.Sub(at) >= l.interval {
			delete(l.last, k)
		}
	}
	if _, ok := l.last[key]; ok {
		return false
	}
	l.last[key] = now
	return true
}
