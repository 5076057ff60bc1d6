// Package webhookstest helps test Echelon's webhooks: a server that answers
// as the pods of a StatefulSet, the way the prepare-downscale webhook calls
// them with --pod-address=ip. Unit, integration and end-to-end tests share it.
package webhookstest

import (
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"
)

// PodServer answers HTTP as the pods <set>-<ordinal>, each on its own
// loopback IP and all on one port, so that a URL built from a pod's IP and
// the policy's port reaches the answer meant for that pod. Every pod answers
// 204 unless Answer says otherwise. It records the calls it receives.
type PodServer struct {
	// Port all the pods listen on.
	Port int32

	mu      sync.Mutex
	calls   []string
	answers map[string]http.HandlerFunc
	pods    map[string]string // IP -> pod
}

// NewPodServer serves the pods <set>-<ordinal> for the given ordinals, pod
// with ordinal o on 127.0.<net>.<10+o%200>, until the test ends. Tests that
// run at the same time use different nets.
func NewPodServer(t testing.TB, net8 int, set string, ordinals ...int) *PodServer {
	t.Helper()
	s := &PodServer{answers: map[string]http.HandlerFunc{}, pods: map[string]string{}}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 5 * time.Second}
	var listeners []net.Listener
	for i, ord := range ordinals {
		ip := fmt.Sprintf("127.0.%d.%d", net8, 10+ord%200)
		addr := net.JoinHostPort(ip, strconv.Itoa(int(s.Port)))
		l, err := net.Listen("tcp", addr)
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			t.Fatalf("listen on %s: %v", addr, err)
		}
		if i == 0 {
			s.Port = int32(l.Addr().(*net.TCPAddr).Port)
		}
		s.pods[ip] = fmt.Sprintf("%s-%d", set, ord)
		listeners = append(listeners, l)
	}
	for _, l := range listeners {
		go func() { _ = srv.Serve(l) }()
	}
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

// IPs maps each pod to its IP.
func (s *PodServer) IPs() map[string]string {
	out := map[string]string{}
	for ip, pod := range s.pods {
		out[pod] = ip
	}
	return out
}

// Answer makes pod answer calls of method with f.
func (s *PodServer) Answer(method, pod string, f http.HandlerFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.answers[method+" "+pod] = f
}

// Calls are the calls received, as "POST <pod>" and "DELETE <pod>", sorted
// (a webhook makes them concurrently).
func (s *PodServer) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Sorted(slices.Values(s.calls))
}

// DistinctCalls is Calls with each call once. The API server calls a webhook
// again when the connection of a call is lost (it retries a reset or closed
// keep-alive connection), and the webhook then asks the pods again: the
// prepare protocol is idempotent, so tests against a real API server judge
// which calls were made, not how often.
func (s *PodServer) DistinctCalls() []string {
	return slices.Compact(s.Calls())
}

// Reset forgets the calls received.
func (s *PodServer) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = nil
}

func (s *PodServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	host, _, _ := net.SplitHostPort(r.Host)
	pod := s.pods[host]
	s.mu.Lock()
	s.calls = append(s.calls, r.Method+" "+pod)
	answer := s.answers[r.Method+" "+pod]
	s.mu.Unlock()
	if answer != nil {
		answer(w, r)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// Hang never answers: the call ends when the caller gives up.
func Hang(_ http.ResponseWriter, r *http.Request) { <-r.Context().Done() }

// Status answers code with body.
func Status(code int, body string) http.HandlerFunc {
	return func(w http.ResponseWriter, _ *http.Request) { http.Error(w, body, code) }
}
