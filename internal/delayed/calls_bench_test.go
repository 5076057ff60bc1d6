package delayed_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/internal/delayed"
)

// The Grafana rollout-operator reconciles every 5 s and calls every pod of
// the StatefulSet each time (POST to the pods to remove, DELETE to the rest),
// with no memory of earlier answers.
const (
	grafanaReconcileInterval = 5 * time.Second
	simReplicas              = 30
	simDesired               = 15
	simDelay                 = 4 * time.Hour
	// simEventInterval stands for events that wake the controller besides its
	// own requeues (a StatefulSet status update, a resync): far more often
	// than the real watches' predicates let through, so that the figure is
	// an upper bound.
	simEventInterval = 30 * time.Second
)

// simPods answer the protocol as the pods of a StatefulSet on a simulated
// clock: a POST prepares a pod not yet prepared and answers since when, a
// DELETE cancels.
type simPods struct {
	prepared map[string]time.Time
	// failUntil makes a pod answer 500 until then.
	failUntil      map[string]time.Time
	posts, deletes int
}

func (s *simPods) post(name string, now time.Time) delayed.Record {
	s.posts++
	if now.Before(s.failUntil[name]) {
		return delayed.Record{Name: name, Err: "POST answered 500"}
	}
	at, ok := s.prepared[name]
	if !ok {
		at = time.Unix(now.Unix(), 0)
		s.prepared[name] = at
	}
	return delayed.Record{Name: name, PreparedAt: at}
}

func (s *simPods) cancel(name string) {
	s.deletes++
	delete(s.prepared, name)
}

// simResult is what one simulated downscale cost.
type simResult struct {
	posts, deletes, reconciles int
	// took is from the downscale's start to the last cancel.
	took time.Duration
}

func (r simResult) perHour(n int) float64 { return float64(n) / r.took.Hours() }

// simulate drives Calls and Decide as the DelayedDownscale controller does,
// on a simulated clock, through a downscale from simReplicas to simDesired:
// a reconcile when the downscale starts, on each requeue the plan asks for,
// on every simEventInterval, and when the ScalingPolicy shrinks the
// StatefulSet to the eligible replicas. The status the controller would write
// (the records and the earliest eligibility) is what the next pass reads. It
// ends once the downscale is done and the pods are told so.
func simulate(failUntil map[string]time.Time) simResult {
	start := time.Date(2026, time.July, 1, 0, 0, 0, 0, time.UTC)
	now := start
	desired := int32(simDesired)
	in := delayed.Input{Delay: simDelay, Desired: &desired, Current: simReplicas, NamePrefix: "ing", Pods: map[string]delayed.Pod{}}
	for ord := range simReplicas {
		name := fmt.Sprintf("ing-%d", ord)
		in.Pods[name] = delayed.Pod{Name: name, Ordinal: ord}
	}
	pods := &simPods{prepared: map[string]time.Time{}, failUntil: failUntil}
	var res simResult
	// requeueAt is the controller's queue: one waiting entry per object, kept
	// at the earliest time asked for.
	var requeueAt time.Time
	nextEvent := start.Add(simEventInterval)

	reconcile := func() delayed.Plan {
		res.reconciles++
		in.Now = now
		calls := delayed.Calls(in)
		answers := map[string]delayed.Record{}
		for _, name := range calls.Prepare {
			answers[name] = pods.post(name, now)
		}
		for _, name := range calls.Cancel {
			pods.cancel(name)
		}
		plan := delayed.Decide(in, answers)
		in.Previous, in.EarliestEligible = plan.Records, plan.EarliestEligible
		if plan.RequeueAfter > 0 {
			if at := now.Add(plan.RequeueAfter); requeueAt.IsZero() || at.Before(requeueAt) {
				requeueAt = at
			}
		}
		return plan
	}

	plan := reconcile()
	for plan.Pending || len(in.Previous) > 0 {
		if plan.Eligible != nil && *plan.Eligible < in.Current {
			// The ScalingPolicy shrinks the StatefulSet; its pods above go.
			for ord := *plan.Eligible; ord < in.Current; ord++ {
				delete(in.Pods, fmt.Sprintf("ing-%d", ord))
			}
			in.Current = *plan.Eligible
		} else if !requeueAt.IsZero() && !requeueAt.After(nextEvent) {
			now, requeueAt = requeueAt, time.Time{}
		} else {
			now, nextEvent = nextEvent, nextEvent.Add(simEventInterval)
		}
		plan = reconcile()
	}
	res.posts, res.deletes, res.took = pods.posts, pods.deletes, now.Sub(start)
	return res
}

// BenchmarkDelayedDownscaleCalls reports the pod calls per simulated hour of
// a 30-replica StatefulSet scaled to 15 under a 4 h delay, against the
// Grafana operator's call to every pod every 5 s.
func BenchmarkDelayedDownscaleCalls(b *testing.B) {
	grafanaPerHour := float64(simReplicas) * float64(time.Hour/grafanaReconcileInterval)
	scenarios := []struct {
		name      string
		failUntil map[string]time.Time
	}{
		{name: "pods answer well", failUntil: nil},
		// The highest pod answers 500 for the first hour: the downscale is
		// held, and the removed pods are called again every RetryAfterError.
		{name: "one pod failing for the first hour", failUntil: map[string]time.Time{
			fmt.Sprintf("ing-%d", simReplicas-1): time.Date(2026, time.July, 1, 1, 0, 0, 0, time.UTC),
		}},
	}
	for _, sc := range scenarios {
		b.Run(sc.name, func(b *testing.B) {
			var res simResult
			for b.Loop() {
				res = simulate(sc.failUntil)
			}
			calls := res.posts + res.deletes
			b.ReportMetric(res.perHour(calls), "calls/h")
			b.ReportMetric(res.perHour(res.posts), "POST/h")
			b.ReportMetric(res.perHour(res.deletes), "DELETE/h")
			b.ReportMetric(res.perHour(res.reconciles), "reconciles/h")
			b.Logf("%s: %d replicas to %d with a %s delay took %s (simulated): %d reconciles, %d POSTs, %d DELETEs = %.1f pod calls per hour",
				sc.name, simReplicas, simDesired, simDelay, res.took, res.reconciles, res.posts, res.deletes, res.perHour(calls))
			b.Logf("Grafana rollout-operator: one call to each of %d pods every %s (POST to the %d to remove, DELETE to the %d that stay) = %.0f pod calls per hour (%.0f over the same %s), %.0fx as many",
				simReplicas, grafanaReconcileInterval, simReplicas-simDesired, simDesired, grafanaPerHour, grafanaPerHour*res.took.Hours(), res.took, grafanaPerHour/res.perHour(calls))
		})
	}
}
