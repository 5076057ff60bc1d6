package soak

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// Report is what a soak saw.
type Report struct {
	Seed    uint64
	Groups  int
	Started time.Time
	Ended   time.Time
	Results []Result
	// Breaches are the guarantees' breaches the pod monitors recorded.
	Breaches []string
	// Handovers and APIServerRestarts count the ones carried out.
	Handovers         int
	APIServerRestarts int
	// OperatorRestarts counts the instances that exited on their own and
	// were replaced.
	OperatorRestarts int
	// Throttled counts the operators' API requests answered 429, and
	// ReconcileErrors their passes that failed and were retried with backoff,
	// as the operators' metrics say (an instance killed by SIGKILL loses what
	// it counted after its last scrape, at most two seconds).
	Throttled       int
	ReconcileErrors int
	// Evictions counts what the Evict and Drain steps did.
	Evictions EvictionCounts
	// ChaosErrors are handovers or restarts that could not be carried out.
	ChaosErrors []string
	// OperatorLogs are the operators' last log lines, for a failed soak.
	OperatorLogs string
}

// Problems lists every rollout that did not end as its script expects.
func (r *Report) Problems() []Result {
	var out []Result
	for _, res := range r.Results {
		if res.Problem != "" {
			out = append(out, res)
		}
	}
	return out
}

// Failed reports whether the soak found anything wrong.
func (r *Report) Failed() bool {
	return len(r.Breaches) > 0 || len(r.Problems()) > 0 || len(r.ChaosErrors) > 0
}

// Print writes the table.
func (r *Report) Print(w io.Writer) {
	got, want := map[Outcome]int{}, map[Outcome]int{}
	steps, skipped := map[Kind]int{}, 0
	var longest Result
	for _, res := range r.Results {
		want[res.Expected]++
		if res.Problem == "" {
			got[res.Got]++
		}
		for _, st := range res.Script.Steps {
			steps[st.Kind]++
		}
		skipped += res.Skipped
		if res.LongestGap > longest.LongestGap {
			longest = res
		}
	}
	fmt.Fprintf(w, "soak: seed %d, %d rollouts on %d groups in %s\n", r.Seed, len(r.Results), r.Groups, r.Ended.Sub(r.Started).Round(time.Second))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "outcome\texpected\tended so\t")
	for _, o := range Outcomes {
		fmt.Fprintf(tw, "%s\t%d\t%d\t\n", o, want[o], got[o])
	}
	fmt.Fprintf(tw, "not as expected\t\t%d\t\n", len(r.Problems()))
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "step\tdrawn\t")
	for _, k := range Kinds {
		fmt.Fprintf(tw, "%s\t%d\t\n", k, steps[k])
	}
	fmt.Fprintf(tw, "skipped (rollout ended first)\t%d\t\n", skipped)
	_ = tw.Flush()
	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "breaches (must be 0)\t%d\t\n", len(r.Breaches))
	fmt.Fprintf(tw, "operator handovers\t%d\t\n", r.Handovers)
	fmt.Fprintf(tw, "API server restarts\t%d\t\n", r.APIServerRestarts)
	fmt.Fprintf(tw, "operators exited, replaced\t%d\t\n", r.OperatorRestarts)
	fmt.Fprintf(tw, "requests answered 429\t%d\t\n", r.Throttled)
	fmt.Fprintf(tw, "reconcile errors retried\t%d\t\n", r.ReconcileErrors)
	e := r.Evictions
	fmt.Fprintf(tw, "evictions admitted\t%d\t\n", e.Admitted)
	fmt.Fprintf(tw, "evictions refused (429, retried)\t%d\t\n", e.Refused)
	fmt.Fprintf(tw, "eviction requests failed otherwise\t%d\t\n", e.Errors)
	kinds := slices.Sorted(maps.Keys(e.ErrorKinds))
	slices.SortStableFunc(kinds, func(a, b string) int { return e.ErrorKinds[b] - e.ErrorKinds[a] })
	for _, k := range kinds[:min(len(kinds), 3)] {
		fmt.Fprintf(tw, "  %s\t%d\t\n", k, e.ErrorKinds[k])
	}
	fmt.Fprintf(tw, "evict steps still refused after %s\t%d\t\n", evictFor, e.EvictsGivenUp)
	fmt.Fprintf(tw, "node drains (unfinished after %s)\t%d (%d)\t\n", drainFor, e.Drains, e.DrainsUnfinished)
	fmt.Fprintf(tw, "longest drain\t%s\t\n", e.LongestDrain.Round(100*time.Millisecond))
	fmt.Fprintf(tw, "longest without a pod rolled\t%s\t\n", longest.LongestGap.Round(100*time.Millisecond))
	_ = tw.Flush()
	if longest.LongestGap > 0 {
		fmt.Fprintf(w, "  (in %s)\n", longest.Script)
	}
	for _, b := range r.Breaches {
		fmt.Fprintf(w, "BREACH %s\n", b)
	}
	problems := r.Problems()
	slices.SortFunc(problems, func(a, b Result) int { return a.Script.Index - b.Script.Index })
	for _, p := range problems {
		fmt.Fprintf(w, "NOT AS EXPECTED %s\n", p)
	}
	for _, e := range r.ChaosErrors {
		fmt.Fprintf(w, "CHAOS FAILED %s\n", e)
	}
	if r.Failed() {
		fmt.Fprintf(w, "reproduce the scripts with --seed=%d (the cluster's timing is not reproduced)\n%s", r.Seed, indent(r.OperatorLogs))
	}
}

func indent(s string) string {
	if s == "" {
		return ""
	}
	return "  " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n  ") + "\n"
}
