// Package podcall calls the delayed-downscale endpoint of pods over HTTP: POST
// to prepare, reading {"timestamp": <unix seconds>}, and DELETE to cancel. The
// calls of one batch run concurrently, a bounded number at a time, each under
// its own timeout.
package podcall

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/echelon-operator/echelon/internal/httptls"
)

// maxBody bounds what is read of an answer: the protocol's is a few bytes.
const maxBody = 64 << 10

// Target is one pod to call.
type Target struct {
	Pod string
	URL string
	// TLS is the endpoint's tls block, read; nil calls with HTTP's own
	// transport.
	TLS *httptls.Material
}

// Result is a pod's answer to a call.
type Result struct {
	// PreparedAt is the timestamp a POST answered.
	PreparedAt time.Time
	// Err describes a failed call: transport error, timeout, status, body.
	Err error
	// Status is the HTTP status the pod answered; 0 when no answer came (a
	// transport error, a timeout, a cancelled call). Set by Notify only.
	Status int
}

// Client calls pods.
type Client struct {
	HTTP *http.Client
	// Wrap, when set, wraps the transport of a target with a tls block, as
	// HTTP's own transport is wrapped (the webhook's metrics).
	Wrap func(http.RoundTripper) http.RoundTripper
	// Concurrency bounds the calls in flight; 0 means 8.
	Concurrency int
}

// Prepare POSTs to every target and returns each pod's answer.
func (c *Client) Prepare(ctx context.Context, targets []Target, timeout time.Duration) map[string]Result {
	return c.each(ctx, targets, func(ctx context.Context, t Target) Result {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		status, body, err := c.do(ctx, http.MethodPost, t)
		if err != nil {
			return Result{Err: err}
		}
		if status/100 != 2 {
			return Result{Err: fmt.Errorf("POST answered %d: %s", status, excerpt(body))}
		}
		var answer struct {
			Timestamp *int64 `json:"timestamp"`
		}
		if err := json.Unmarshal(body, &answer); err != nil {
			return Result{Err: fmt.Errorf("POST answered %d with a body that is not JSON {\"timestamp\": <unix seconds>}: %s", status, excerpt(body))}
		}
		if answer.Timestamp == nil {
			return Result{Err: fmt.Errorf("POST answered %d without a timestamp: %s", status, excerpt(body))}
		}
		return Result{PreparedAt: time.Unix(*answer.Timestamp, 0)}
	})
}

// Notify POSTs to every target; any 2xx answer is success, whatever its body.
// This is the prepare-downscale webhook's call: its endpoints (such as an
// ingester's prepare-shutdown) answer 204 with no timestamp. Each Result
// carries the status, so a caller can tell a pod that refused from one whose
// answer never came and that may have acted on the call all the same.
func (c *Client) Notify(ctx context.Context, targets []Target, timeout time.Duration) map[string]Result {
	return c.each(ctx, targets, func(ctx context.Context, t Target) Result {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		status, body, err := c.do(ctx, http.MethodPost, t)
		switch {
		case err != nil:
			return Result{Err: err}
		case status/100 != 2:
			return Result{Status: status, Err: fmt.Errorf("POST answered %d: %s", status, excerpt(body))}
		default:
			return Result{Status: status}
		}
	})
}

// Cancel DELETEs on every target. A 409 Conflict counts as success, as the
// Grafana rollout-operator counts it: the pod refuses to change its state now
// (it is locked), which leaves nothing for Echelon to undo or retry.
func (c *Client) Cancel(ctx context.Context, targets []Target, timeout time.Duration) map[string]Result {
	return c.each(ctx, targets, func(ctx context.Context, t Target) Result {
		ctx, cancel := context.WithTimeout(ctx, timeout)
		defer cancel()
		status, body, err := c.do(ctx, http.MethodDelete, t)
		switch {
		case err != nil:
			return Result{Err: err}
		case status/100 == 2 || status == http.StatusConflict:
			return Result{}
		default:
			return Result{Err: fmt.Errorf("DELETE answered %d: %s", status, excerpt(body))}
		}
	})
}

func (c *Client) each(ctx context.Context, targets []Target, call func(context.Context, Target) Result) map[string]Result {
	return Concurrently(c.Concurrency, targets, func(t Target) string { return t.Pod },
		func(t Target) Result { return call(ctx, t) })
}

// Concurrently calls call on every item, at most limit at a time (8 when
// limit is not positive), and returns the results by key(item). Pod calls
// and hook calls share it.
func Concurrently[T, R any](limit int, items []T, key func(T) string, call func(T) R) map[string]R {
	if limit <= 0 {
		limit = 8
	}
	sem := make(chan struct{}, limit)
	var mu sync.Mutex
	var wg sync.WaitGroup
	out := make(map[string]R, len(items))
	for _, item := range items {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			r := call(item)
			mu.Lock()
			out[key(item)] = r
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

func (c *Client) do(ctx context.Context, method string, t Target) (int, []byte, error) {
	url := t.URL
	req, err := http.NewRequestWithContext(ctx, method, url, nil)
	if err != nil {
		return 0, nil, err
	}
	client, err := httptls.Default.Client(c.HTTP, t.TLS, c.Wrap)
	if err != nil {
		return 0, nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, nil, fmt.Errorf("%s %s: no answer within the timeout", method, url)
		}
		return 0, nil, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return 0, nil, fmt.Errorf("%s %s: reading the answer: %w", method, url, err)
	}
	return resp.StatusCode, body, nil
}

// excerpt is the start of a body, for a message.
func excerpt(body []byte) string { return Excerpt(body) }

// Excerpt is the start of an answer's body, quoted, for a message.
func Excerpt(body []byte) string {
	s := strings.TrimSpace(string(body))
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	if s == "" {
		return "(empty body)"
	}
	return fmt.Sprintf("%q", s)
}
