package hooks

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podcall"
)

// maxAnswer bounds what is read of an answer: only its status matters.
const maxAnswer = 4 << 10

// Call is one hook call: a POST of Body (JSON) to URL.
type Call struct {
	// Key names the call in the results: a pod, a member.
	Key  string
	URL  string
	Body any
	// BearerToken, when set, is sent as "Authorization: Bearer <token>".
	BearerToken string
	// TLS is the hook's tls block, read; nil trusts the system's
	// authorities.
	TLS *httptls.Material
}

// Result is the outcome of a call, retries included.
type Result struct {
	// Attempts counts the requests sent.
	Attempts int
	// Status is the last answer's status; 0 when none came.
	Status int
	// Err is nil when an answer was 2xx.
	Err error
}

// Caller makes hook calls, retrying as the settings say, and counts each
// attempt in echelon_hook_calls_total.
type Caller struct {
	HTTP *http.Client
	// Sleep waits d or until ctx ends; time-based when nil (tests shorten it).
	Sleep func(ctx context.Context, d time.Duration) error
	// Concurrency bounds the calls of one batch in flight; 0 means 8.
	Concurrency int
}

// Do makes every call concurrently (a bounded number at a time) and returns
// each one's result by key. hook and reason label the metrics.
func (c *Caller) Do(ctx context.Context, hook, reason string, s Settings, calls []Call) map[string]Result {
	return podcall.Concurrently(c.Concurrency, calls, func(call Call) string { return call.Key },
		func(call Call) Result { return c.one(ctx, hook, reason, s, call) })
}

// one makes a call and its retries: a failure (non-2xx) or an error (no
// answer) is retried after the schedule's wait, until the retries are spent
// or ctx ends.
func (c *Caller) one(ctx context.Context, hook, reason string, s Settings, call Call) Result {
	body, err := json.Marshal(call.Body)
	if err != nil {
		return Result{Err: fmt.Errorf("encode the call's body: %w", err)}
	}
	waits := RetrySchedule(s.Retries)
	var res Result
	for attempt := 0; ; attempt++ {
		res.Attempts++
		start := time.Now()
		res.Status, res.Err = c.post(ctx, s.Timeout, call, body)
		metrics.HookCallDuration.WithLabelValues(hook, reason).Observe(time.Since(start).Seconds())
		metrics.HookCalls.WithLabelValues(hook, reason, resultLabel(res)).Inc()
		if res.Err == nil || attempt >= len(waits) {
			return res
		}
		if err := c.sleep(ctx, waits[attempt]); err != nil {
			return res
		}
	}
}

func resultLabel(r Result) string {
	switch {
	case r.Err == nil:
		return "success"
	case r.Status != 0:
		return "failure"
	}
	return "error"
}

func (c *Caller) sleep(ctx context.Context, d time.Duration) error {
	if c.Sleep != nil {
		return c.Sleep(ctx, d)
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

func (c *Caller) post(ctx context.Context, timeout time.Duration, call Call, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, call.URL, bytes.NewReader(body))
	if err != nil {
		return 0, fmt.Errorf("POST %s: %w", call.URL, err)
	}
	req.Header.Set("Content-Type", "application/json")
	if call.BearerToken != "" {
		req.Header.Set("Authorization", "Bearer "+call.BearerToken)
	}
	client, err := httptls.Default.Client(c.HTTP, call.TLS, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("POST %s: no answer within the timeout of %s", call.URL, timeout)
		}
		return 0, fmt.Errorf("POST %s: %w", call.URL, err)
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, fmt.Errorf("POST %s answered %d: %s", call.URL, resp.StatusCode, podcall.Excerpt(answer))
	}
	return resp.StatusCode, nil
}
