/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// latencySeries is the latency part of the scenario at one check interval.
type latencySeries struct {
	Group           string          `json:"group"`
	IntervalSeconds float64         `json:"intervalSeconds"`
	Samples         []latencySample `json:"samples"`
}

// latencySample is one turn of a gate's metric to bad. Every duration runs
// from the moment the bench set the exporter's gauge bad, in seconds.
type latencySample struct {
	// OffsetSeconds is how long after seeing the gate's checks pass the bench
	// waited before it set the metric bad: uniform in [0, interval), so that
	// the turn falls anywhere in the check's cycle.
	OffsetSeconds float64 `json:"offsetSeconds"`
	// ScrapedSeconds: the exporter's first scrape after the change, which
	// gives Prometheus the bad value.
	ScrapedSeconds float64 `json:"scrapedSeconds"`
	// FailingQuerySeconds: the operator's query that failed the gate (the
	// last of the group before the deletion), as it reached the proxy.
	FailingQuerySeconds float64 `json:"failingQuerySeconds"`
	// DeleteRequestSeconds: the operator's first pod DELETE after the change,
	// as it reached the API server's proxy.
	DeleteRequestSeconds float64 `json:"deleteRequestSeconds"`
	// DeletionSeconds: the bench's pod watch seeing the first pod of the group
	// being deleted: the rollback's first deletion.
	DeletionSeconds float64 `json:"deletionSeconds"`
	// RolledBackSeconds: the group Failed with its rollback complete, every
	// pod back on the old revision and Ready.
	RolledBackSeconds float64 `json:"rolledBackSeconds"`
	// Pod is the pod of that first deletion.
	Pod string `json:"pod"`
}

// measureLatency times, repeats times, a gate's metric turning bad until the
// first pod deletion of the rollback. Each turn starts a rollout of a new
// image on every member of g (which also ends the failure of the turn
// before); zone-a rolls and its AfterMember gate opens, passes its check and
// soaks; the bench waits a random part of the interval and sets zone-a's
// error metric bad; the next query fails the gate, and onFailure Rollback
// restores the templates and deletes zone-a's updated pods. The metric is set
// healthy again once the group has rolled back.
func (r *analysisRun) measureLatency(ctx context.Context, g analysisGroup, interval time.Duration) (latencySeries, error) {
	s := latencySeries{Group: g.name, IntervalSeconds: interval.Seconds()}
	member := g.members[0]
	labels := metricLabels(g.name, member)
	for turn := range r.o.repeats {
		image := fmt.Sprintf("example.com/bench:%s-%d", g.name, turn+2)
		for _, m := range g.members {
			if err := setImage(ctx, r.c, r.ns, m, image); err != nil {
				return s, err
			}
		}
		if err := r.wait(ctx, fmt.Sprintf("the gate of %s to pass its check and soak", member), gateSoaking(r.w, r.ns, g, member, image)); err != nil {
			return s, err
		}
		offset := rand.N(interval)
		select {
		case <-time.After(offset):
		case <-ctx.Done():
			return s, context.Cause(ctx)
		}

		scrapes := r.exporter.Scrapes()
		if err := r.exporter.Set(errorMetric, labels, 1); err != nil {
			return s, err
		}
		turned := time.Now()
		scraped, err := r.waitScrape(ctx, scrapes)
		if err != nil {
			return s, err
		}
		var first podDeletion
		if err := r.wait(ctx, "the first pod deletion of the rollback", func(context.Context) (bool, error) {
			var ok bool
			first, ok = r.deleted.firstAfter(turned, g.members)
			return ok, nil
		}); err != nil {
			return s, err
		}
		failing, ok := r.proxy.lastBefore(g.name, first.at)
		if !ok || failing.arrived.Before(turned) {
			return s, fmt.Errorf("turn %d: no query of %s between the metric turning bad and the first deletion", turn+1, g.name)
		}
		if !ownedByOneOf(first.pod, []string{member}) {
			return s, fmt.Errorf("turn %d: the first deletion after the metric turned bad is of pod %s, not of %s, the member rolled", turn+1, first.pod, member)
		}
		// The watch can show the deletion before the API server's answer
		// reaches the operator's proxy, which records a request once answered.
		var deleteReq request
		if err := withTimeout(ctx, r.cfg.timeout, func(ctx context.Context) error {
			return r.ops[0].counter.waitUntil(ctx, "the operator's pod deletion", func(reqs []request) bool {
				deleteReq, ok = firstSince(reqs, turned, successfulPodDeletion)
				return ok
			})
		}); err != nil {
			return s, err
		}
		if err := r.wait(ctx, "the group rolled back and Failed", rolledBack(r.w, r.ns, g)); err != nil {
			return s, err
		}
		done := time.Now()
		s.Samples = append(s.Samples, latencySample{
			OffsetSeconds:        offset.Seconds(),
			ScrapedSeconds:       scraped.Sub(turned).Seconds(),
			FailingQuerySeconds:  failing.arrived.Sub(turned).Seconds(),
			DeleteRequestSeconds: deleteReq.arrived.Sub(turned).Seconds(),
			DeletionSeconds:      first.at.Sub(turned).Seconds(),
			RolledBackSeconds:    done.Sub(turned).Seconds(),
			Pod:                  first.pod,
		})
		r.say("interval %s, turn %d: scraped after %s, failing query after %s, first rollback deletion (%s) after %s, rolled back after %s",
			interval, turn+1, since3(scraped, turned), since3(failing.arrived, turned), first.pod, since3(first.at, turned), since3(done, turned))

		scrapes = r.exporter.Scrapes()
		if err := r.exporter.Set(errorMetric, labels, 0); err != nil {
			return s, err
		}
		if _, err := r.waitScrape(ctx, scrapes); err != nil {
			return s, err
		}
	}
	return s, nil
}

// waitScrape waits for a scrape of the exporter after its count of scrapes
// was after, and returns when the bench saw it begin (within scrapePoll).
// A scrape reads the gauges after it is counted, so it reads what was set
// before the count was taken.
func (r *analysisRun) waitScrape(ctx context.Context, after int64) (time.Time, error) {
	tick := time.NewTicker(scrapePoll)
	defer tick.Stop()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.timeout)
	defer cancel()
	for {
		if r.exporter.Scrapes() > after {
			return time.Now(), nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("wait for Prometheus to scrape the exporter: %w", context.Cause(ctx))
		}
	}
}

// rolledBack holds when g is Failed after a complete rollback, with every pod
// of every member back on the old image and Ready.
func rolledBack(c client.Reader, ns string, g analysisGroup) func(context.Context) (bool, error) {
	back := allReady(c, ns, oldImage, g.members...)
	return func(ctx context.Context) (bool, error) {
		rg := &v1alpha1.RolloutGroup{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: g.name}, rg); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		a := rg.Status.Analysis
		if rg.Status.Phase != v1alpha1.PhaseFailed || a == nil || a.Rollback == nil || a.Rollback.CompletionTime == nil {
			return false, nil
		}
		return back(ctx)
	}
}

// since3 is t - from, rounded to the millisecond.
func since3(t, from time.Time) time.Duration { return t.Sub(from).Round(time.Millisecond) }
