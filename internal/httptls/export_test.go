package httptls

import "time"

// SetClock makes t read the time from now.
func (t *Transports) SetClock(now func() time.Time) { t.now = now }

// SetClock makes o read the time from now.
func (o *Objects) SetClock(now func() time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.now = now
}
