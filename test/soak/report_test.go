package soak

import (
	"strings"
	"testing"
	"time"
)

func TestSumMetric(t *testing.T) {
	text := `# HELP rest_client_requests_total Number of HTTP requests.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:6443",method="GET"} 812
rest_client_requests_total{code="429",host="127.0.0.1:6443",method="GET"} 17
rest_client_requests_total{code="429",host="127.0.0.1:6443",method="PATCH"} 3
controller_runtime_reconcile_errors_total{controller="rolloutgroup"} 2
controller_runtime_reconcile_errors_total{controller="scalingpolicy"} 1
`
	if got := sumMetric(text, "rest_client_requests_total", `code="429"`); got != 20 {
		t.Errorf("429s = %v, want 20", got)
	}
	if got := sumMetric(text, "controller_runtime_reconcile_errors_total", ""); got != 3 {
		t.Errorf("reconcile errors = %v, want 3", got)
	}
	if got := sumMetric(text, "missing_total", ""); got != 0 {
		t.Errorf("missing metric = %v, want 0", got)
	}
}

// The table counts outcomes as expected and as reached, and a soak with a
// breach or a rollout not as expected fails, naming the seed.
func TestReport(t *testing.T) {
	ok := Result{Script: Script{Index: 0, Steps: []Step{{Kind: Pause, AfterRolls: 2}}}, Expected: Paused, Got: Paused, LongestGap: 3 * time.Second}
	bad := Result{Script: Script{Index: 1}, Expected: Complete, Problem: "expected Complete: phase Progressing", LongestGap: time.Second}
	rep := &Report{Seed: 9, Groups: 1, Results: []Result{ok}}
	if rep.Failed() {
		t.Fatalf("a soak whose rollouts all ended as expected failed")
	}
	var b strings.Builder
	rep.Print(&b)
	var lines []string
	for _, line := range strings.Split(b.String(), "\n") {
		lines = append(lines, strings.Join(strings.Fields(line), " "))
	}
	table := strings.Join(lines, "\n")
	for _, want := range []string{"seed 9, 1 rollouts", "\nPaused 1 1\n", "\nbreaches (must be 0) 0\n", "\nlongest without a pod rolled 3s\n"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	for name, r := range map[string]*Report{
		"not as expected": {Seed: 9, Results: []Result{ok, bad}},
		"breach":          {Seed: 9, Results: []Result{ok}, Breaches: []string{"two members short"}},
		"chaos failed":    {Seed: 9, Results: []Result{ok}, ChaosErrors: []string{"sigkill-handover: no leader"}},
	} {
		if !r.Failed() {
			t.Errorf("%s: the soak did not fail", name)
		}
		b.Reset()
		r.Print(&b)
		if !strings.Contains(b.String(), "--seed=9") {
			t.Errorf("%s: the table does not say how to reproduce:\n%s", name, b.String())
		}
	}
}
