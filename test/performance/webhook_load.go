/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"maps"
	"net"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// webhookTimeout is the timeoutSeconds the chart gives the no-downscale
// webhook: the API server gives up on a call after that long, and so does the
// bench.
const webhookTimeout = 10 * time.Second

// loadPlan is one stretch of open-loop load: requests fall due at a fixed
// rate whether or not earlier ones have been answered, as admission requests
// reach a webhook from many API clients at once.
type loadPlan struct {
	rate     float64       // offered requests per second
	duration time.Duration // how long requests fall due, unless stop ends it sooner
	// freshEvery sends every freshEvery-th request on a connection of its own,
	// with a TLS handshake of its own; 0 keeps every connection alive.
	freshEvery int
	// stop, when closed, ends the plan before its duration.
	stop <-chan struct{}
}

// due is when the i-th request of a plan at rate falls due, after its start.
func due(i int, rate float64) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / rate)
}

// sample is one request as a client saw it.
type sample struct {
	// at is when it was queued for a client, since the run began.
	at time.Duration
	// latency runs from queueing to the whole answer read: the wait for a
	// free client counts, as it does for an API server whose calls queue.
	latency time.Duration
	// fail is the kind of failure, "" when the answer was right.
	fail string
}

// loadRun is what one plan's run saw.
type loadRun struct {
	plan    loadPlan
	began   time.Time
	elapsed time.Duration // from the run's start to its last answer
	samples []sample      // in no particular order
	// dropped were due while every client was busy and a second's worth of
	// requests already waited: the bench could not offer them.
	dropped int
	// details hold the first message of each kind of failure.
	details map[string]string
	// protocols counts the HTTP versions of the answers.
	protocols map[string]int
}

// loadClient sends reviews to the webhook from a fixed number of clients
// over HTTPS, as many API server connections would.
type loadClient struct {
	url       string
	clients   int
	keepAlive *http.Client
	fresh     *http.Client
	// templates are taken in turn, request n the (n mod len)-th.
	templates []reviewTemplate
	// sent numbers requests across runs, so every UID is new.
	sent atomic.Uint64
}

func newLoadClient(url string, clients int, tlsConfig *tls.Config, templates []reviewTemplate) *loadClient {
	transport := func(keepAlive bool) *http.Client {
		return &http.Client{Timeout: webhookTimeout, Transport: &http.Transport{
			TLSClientConfig:     tlsConfig,
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			TLSHandshakeTimeout: 5 * time.Second,
			MaxIdleConns:        clients,
			MaxIdleConnsPerHost: clients,
			MaxConnsPerHost:     clients,
			IdleConnTimeout:     90 * time.Second,
			DisableKeepAlives:   !keepAlive,
		}}
	}
	return &loadClient{url: url, clients: clients, keepAlive: transport(true), fresh: transport(false), templates: templates}
}

// closeIdle drops the kept-alive connections, e.g. to an operator that has stopped.
func (lc *loadClient) closeIdle() {
	lc.keepAlive.CloseIdleConnections()
	lc.fresh.CloseIdleConnections()
}

// run offers plan's load and returns once every request sent is answered or
// has timed out. ctx ends the run at once.
func (lc *loadClient) run(ctx context.Context, plan loadPlan) loadRun {
	return runOpenLoop(ctx, plan, lc.clients, &lc.sent, lc.send)
}

// sendFunc sends the n-th request of a load, on a connection of its own when
// fresh, and judges the answer: the kind of failure and its detail, "" when
// right, and the answer's protocol.
type sendFunc func(ctx context.Context, n uint64, fresh bool) (kind, detail, proto string)

// runOpenLoop offers plan's load from clients workers, numbering requests
// with sent, and returns once every request sent is answered or has timed
// out. ctx ends the run at once.
func runOpenLoop(ctx context.Context, plan loadPlan, clients int, sent *atomic.Uint64, send sendFunc) loadRun {
	type job struct {
		n      uint64
		queued time.Time
		fresh  bool
	}
	jobs := make(chan job, max(clients, int(plan.rate)))
	type workerResult struct {
		samples   []sample
		details   map[string]string
		protocols map[string]int
	}
	results := make([]workerResult, clients)
	r := loadRun{plan: plan, began: time.Now(), details: map[string]string{}, protocols: map[string]int{}}
	var wg sync.WaitGroup
	for w := range clients {
		results[w] = workerResult{details: map[string]string{}, protocols: map[string]int{}}
		wg.Go(func() {
			out := &results[w]
			for j := range jobs {
				kind, detail, proto := send(ctx, j.n, j.fresh)
				out.samples = append(out.samples, sample{at: j.queued.Sub(r.began), latency: time.Since(j.queued), fail: kind})
				if kind != "" && out.details[kind] == "" {
					out.details[kind] = detail
				}
				if proto != "" {
					out.protocols[proto]++
				}
			}
		})
	}

	total := int(plan.rate * plan.duration.Seconds())
dispatch:
	for i := range total {
		if wait := time.Until(r.began.Add(due(i, plan.rate))); wait > 0 {
			time.Sleep(wait)
		}
		select {
		case <-ctx.Done():
			break dispatch
		case <-plan.stop:
			break dispatch
		default:
		}
		j := job{n: sent.Add(1), queued: time.Now(), fresh: plan.freshEvery > 0 && i%plan.freshEvery == plan.freshEvery-1}
		select {
		case jobs <- j:
		default:
			r.dropped++
		}
	}
	close(jobs)
	wg.Wait()
	r.elapsed = time.Since(r.began)
	for _, w := range results {
		r.samples = append(r.samples, w.samples...)
		for kind, detail := range w.details {
			if r.details[kind] == "" {
				r.details[kind] = detail
			}
		}
		for proto, n := range w.protocols {
			r.protocols[proto] += n
		}
	}
	return r
}

// send posts the n-th review and judges the answer: the kind of failure and
// its detail, "" when right, and the answer's protocol.
func (lc *loadClient) send(ctx context.Context, n uint64, fresh bool) (kind, detail, proto string) {
	t := lc.templates[n%uint64(len(lc.templates))]
	uid := requestUID(n)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, lc.url, bytes.NewReader(t.body(uid)))
	if err != nil {
		return failTransport, err.Error(), ""
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	c := lc.keepAlive
	if fresh {
		c = lc.fresh
	}
	resp, err := c.Do(req)
	if err != nil {
		return failTransport, err.Error(), ""
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	if err != nil {
		return failTransport, err.Error(), resp.Proto
	}
	kind, detail = checkAnswer(t, uid, resp.StatusCode, body)
	return kind, detail, resp.Proto
}

// latencySummary condenses the samples of a stretch of load. Durations are
// in seconds.
type latencySummary struct {
	Seconds           float64        `json:"seconds"`
	OfferedPerSecond  float64        `json:"offeredPerSecond"`
	AchievedPerSecond float64        `json:"achievedPerSecond"` // right answers per second
	Requests          int            `json:"requests"`          // sent
	Dropped           int            `json:"dropped"`           // due but never sent
	Errors            int            `json:"errors"`            // sent and not answered right
	ErrorsByKind      map[string]int `json:"errorsByKind,omitempty"`
	P50Seconds        float64        `json:"p50Seconds"`
	P90Seconds        float64        `json:"p90Seconds"`
	P99Seconds        float64        `json:"p99Seconds"`
	MaxSeconds        float64        `json:"maxSeconds"`
}

// summarize condenses samples taken over elapsed at an offered rate. The
// latencies of failed requests count too: a caller waited for them.
func summarize(samples []sample, offered float64, elapsed time.Duration, dropped int) latencySummary {
	s := latencySummary{Seconds: elapsed.Seconds(), OfferedPerSecond: offered, Requests: len(samples), Dropped: dropped}
	if len(samples) == 0 {
		return s
	}
	latencies := make([]time.Duration, len(samples))
	for i, x := range samples {
		latencies[i] = x.latency
		if x.fail != "" {
			s.Errors++
			if s.ErrorsByKind == nil {
				s.ErrorsByKind = map[string]int{}
			}
			s.ErrorsByKind[x.fail]++
		}
	}
	if elapsed > 0 {
		s.AchievedPerSecond = float64(len(samples)-s.Errors) / elapsed.Seconds()
	}
	slices.Sort(latencies)
	s.P50Seconds = percentile(latencies, 0.50).Seconds()
	s.P90Seconds = percentile(latencies, 0.90).Seconds()
	s.P99Seconds = percentile(latencies, 0.99).Seconds()
	s.MaxSeconds = latencies[len(latencies)-1].Seconds()
	return s
}

// achievedShare is how much of the offered rate a step must achieve to hold:
// less means requests queued beyond the step, or never went out.
const achievedShare = 0.95

// holds tells whether a step at its offered rate kept p99 within limit, with
// no error, nothing dropped and the rate achieved.
func (s latencySummary) holds(limit time.Duration) bool {
	return s.Requests > 0 && s.P99Seconds <= limit.Seconds() && s.Errors == 0 && s.Dropped == 0 &&
		s.AchievedPerSecond >= achievedShare*s.OfferedPerSecond
}

// highestHeld is the highest offered rate of the steps that hold; false
// when none does. A lower step that does not hold (a neighbour's burst of
// CPU on a shared machine) does not hide a higher one that does; the table
// shows every step's verdict.
func highestHeld(steps []latencySummary, limit time.Duration) (float64, bool) {
	held, ok := 0.0, false
	for _, s := range steps {
		if s.holds(limit) && s.OfferedPerSecond > held {
			held, ok = s.OfferedPerSecond, true
		}
	}
	return held, ok
}

// within returns the samples queued in [from, to).
func within(samples []sample, from, to time.Duration) []sample {
	var out []sample
	for _, s := range samples {
		if s.at >= from && s.at < to {
			out = append(out, s)
		}
	}
	return out
}

// secondSummary is one second of load.
type secondSummary struct {
	// Second is where the second starts, in whole seconds from an origin.
	Second     int     `json:"second"`
	Requests   int     `json:"requests"`
	Errors     int     `json:"errors"`
	P99Seconds float64 `json:"p99Seconds"`
	MaxSeconds float64 `json:"maxSeconds"`
}

// bySecond buckets samples by the second they were queued in, counted from
// origin (earlier seconds are negative), and summarizes each bucket.
func bySecond(samples []sample, origin time.Duration) []secondSummary {
	buckets := map[int][]sample{}
	for _, s := range samples {
		offset := s.at - origin
		second := int(offset / time.Second)
		if offset < 0 && offset%time.Second != 0 {
			second-- // floor, not truncation toward zero
		}
		buckets[second] = append(buckets[second], s)
	}
	var out []secondSummary
	for _, second := range slices.Sorted(maps.Keys(buckets)) {
		sum := summarize(buckets[second], 0, time.Second, 0)
		out = append(out, secondSummary{Second: second, Requests: sum.Requests, Errors: sum.Errors, P99Seconds: sum.P99Seconds, MaxSeconds: sum.MaxSeconds})
	}
	return out
}

// protocolsOf lists the protocols of runs, most used first.
func protocolsOf(runs ...loadRun) []string {
	total := map[string]int{}
	for _, r := range runs {
		for p, n := range r.protocols {
			total[p] += n
		}
	}
	return slices.SortedFunc(maps.Keys(total), func(a, b string) int { return total[b] - total[a] })
}
