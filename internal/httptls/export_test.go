package httptls

import "time"

// SetClock makes t read the time from now.
func (t *Transports) SetClock(now func() time.Time) { t.now = now }
