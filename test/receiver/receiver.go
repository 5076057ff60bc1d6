// Package receiver is a test HTTP receiver of Echelon's notifications and
// callbacks, on loopback: it records every request, answers as the test
// says (fail the next n, hang), and keeps what a real receiver would: the
// messages by delivery id (dropping a repeated id), and the latest message
// under each message key (update in place).
package receiver

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"time"

	"github.com/echelon-operator/echelon/internal/notify"
)

// Request is one request received.
type Request struct {
	DeliveryID, MessageKey, Event, Authorization string
	// Status is the status answered.
	Status int
	Body   []byte
}

// Receiver records what Echelon sends.
type Receiver struct {
	*httptest.Server
	mu       sync.Mutex
	requests []Request
	failNext int
	hang     time.Duration
}

// Start starts a receiver on loopback; Close stops it.
func Start() *Receiver {
	r := &Receiver{}
	r.Server = httptest.NewServer(http.HandlerFunc(r.serve))
	return r
}

func (r *Receiver) serve(w http.ResponseWriter, req *http.Request) {
	body, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	hang := r.hang
	status := http.StatusOK
	if r.failNext > 0 {
		r.failNext--
		status = http.StatusInternalServerError
	}
	r.requests = append(r.requests, Request{
		DeliveryID: req.Header.Get(notify.HeaderDeliveryID), MessageKey: req.Header.Get(notify.HeaderMessageKey),
		Event: req.Header.Get(notify.HeaderEvent), Authorization: req.Header.Get("Authorization"), Status: status, Body: body,
	})
	r.mu.Unlock()
	if hang > 0 {
		select {
		case <-time.After(hang):
		case <-req.Context().Done():
			return
		}
	}
	w.WriteHeader(status)
	if status != http.StatusOK {
		_, _ = io.WriteString(w, "receiver down")
	}
}

// FailNext answers the next n requests with 500.
func (r *Receiver) FailNext(n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failNext = n
}

// Hang holds each request d before answering (0 answers at once).
func (r *Receiver) Hang(d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.hang = d
}

// Requests are every request received, in order.
func (r *Receiver) Requests() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.requests...)
}

// Accepted are the requests answered 2xx, each delivery id once (a real
// receiver drops a repeated id), in order.
func (r *Receiver) Accepted() []Request {
	seen := map[string]bool{}
	var out []Request
	for _, q := range r.Requests() {
		if q.Status/100 == 2 && !seen[q.DeliveryID] {
			seen[q.DeliveryID] = true
			out = append(out, q)
		}
	}
	return out
}

// Repeated counts the requests answered 2xx whose delivery id had been
// answered 2xx before: what the receiver had to drop.
func (r *Receiver) Repeated() int {
	n := 0
	for _, q := range r.Requests() {
		if q.Status/100 == 2 {
			n++
		}
	}
	return n - len(r.Accepted())
}

// Notifications are the accepted JSON notifications, decoded.
func (r *Receiver) Notifications() []notify.Notification {
	return decoded(r, func(n notify.Notification) bool { return n.Schema == notify.NotificationSchema })
}

// Callbacks are the accepted callbacks, decoded.
func (r *Receiver) Callbacks() []notify.Callback {
	return decoded(r, func(c notify.Callback) bool { return c.Schema == notify.CallbackSchema })
}

// decoded are the accepted bodies that decode as a T that ofKind takes.
func decoded[T any](r *Receiver, ofKind func(T) bool) []T {
	var out []T
	for _, q := range r.Accepted() {
		var v T
		if json.Unmarshal(q.Body, &v) == nil && ofKind(v) {
			out = append(out, v)
		}
	}
	return out
}

// Latest is what a receiver that replaces by message key holds: the last
// accepted notification under each key.
func (r *Receiver) Latest() map[string]notify.Notification {
	out := map[string]notify.Notification{}
	for _, n := range r.Notifications() {
		out[n.MessageKey] = n
	}
	return out
}

// Events are the event names of the accepted notifications, page by page.
func (r *Receiver) Events() []string {
	var out []string
	for _, n := range r.Notifications() {
		out = append(out, n.Event)
	}
	return out
}
