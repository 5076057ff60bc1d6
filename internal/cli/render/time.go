package render

import (
	"time"

	"k8s.io/apimachinery/pkg/util/duration"
)

// ago is how long before now t was, as kubectl prints ages ("12s ago"), or
// how long after now it is ("in 3h").
func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	if d := now.Sub(t); d >= 0 {
		return duration.HumanDuration(d) + " ago"
	}
	return "in " + duration.HumanDuration(t.Sub(now))
}

// stamp is a time in UTC, to the second, for lines that must stay true when
// read later (a log, a ticket).
func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }
