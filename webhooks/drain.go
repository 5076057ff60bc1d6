package webhooks

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// The API server keeps its connections to the webhook Service open between
// requests, and pools them per Service host, whatever pod kube-proxy sent
// each to: it goes on sending requests to a stopping replica over them long
// after the replica's endpoints are gone. A server that stops closes its
// idle connections, and a request the API server writes on one at that
// moment fails with EOF (HTTP/1.1 has no way to say "not processed"; the API
// server does not retry a POST): the node tier's drain beside a helm upgrade
// saw one such failure in about a dozen runs. So when the process begins to
// stop, the server first drains: it answers every request with "Connection:
// close", retiring each connection the API server still uses at a request's
// end, where the API server expects it, and stops once no request came for
// drainQuiet, or after drainMax at most. The connections left are idle, and
// the API server's pool hands out its newest connections (to the new
// replicas) first.
const (
	drainQuiet = 500 * time.Millisecond
	drainMax   = 3 * time.Second
)

// drainingServer is a webhook server that drains before it stops.
type drainingServer struct {
	webhook.Server
	draining atomic.Bool
	// last is when the last request arrived, in Unix nanoseconds.
	last atomic.Int64
	// quiet and most are drainQuiet and drainMax, shorter in tests.
	quiet, most time.Duration
}

func newDrainingServer(srv webhook.Server) *drainingServer {
	return &drainingServer{Server: srv, quiet: drainQuiet, most: drainMax}
}

// Register registers hook at path, answering with "Connection: close" once
// the server drains.
func (s *drainingServer) Register(path string, hook http.Handler) {
	s.Server.Register(path, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.last.Store(time.Now().UnixNano())
		if s.draining.Load() {
			w.Header().Set("Connection", "close")
		}
		hook.ServeHTTP(w, r)
	}))
}

// Start serves until ctx ends, then drains, then stops the server (which
// waits for the requests in flight, each to its own deadline).
func (s *drainingServer) Start(ctx context.Context) error {
	serve, stop := context.WithCancel(context.WithoutCancel(ctx))
	defer stop()
	go func() {
		select {
		case <-serve.Done():
			return
		case <-ctx.Done():
		}
		s.draining.Store(true)
		s.last.Store(time.Now().UnixNano())
		deadline := time.Now().Add(s.most)
		tick := time.NewTicker(s.quiet / 5)
		defer tick.Stop()
		for {
			select {
			case <-serve.Done():
				return
			case now := <-tick.C:
				if now.Sub(time.Unix(0, s.last.Load())) >= s.quiet || now.After(deadline) {
					stop()
					return
				}
			}
		}
	}()
	return s.Server.Start(serve)
}
