package gate

import (
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// testNow is the clock of every test pass.
var testNow = time.Date(2026, time.May, 4, 10, 0, 0, 0, time.UTC)

func at(d time.Duration) time.Time { return testNow.Add(d) }

func eventReasons(ap *Pass) []string {
	var out []string
	for _, e := range ap.events {
		out = append(out, e.Reason)
	}
	return out
}

// passFrom is the next reconcile's pass, from the state the last one left.
func passFrom(rg *v1alpha1.RolloutGroup, last *Pass, now time.Time) *Pass {
	next := rg.DeepCopy()
	next.Status.Analysis = last.Status()
	for i := range next.Status.StatefulSets {
		next.Status.StatefulSets[i].GatePassedRevision = last.gatePassed[next.Status.StatefulSets[i].Name]
	}
	return New(next, now)
}

func checkNames(checks []v1alpha1.CheckStatus) []string {
	var out []string
	for _, c := range checks {
		out = append(out, c.Name)
	}
	return out
}
