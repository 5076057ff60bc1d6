package soak

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
)

// Result is how one script's rollout went.
type Result struct {
	Script Script
	// Expected is the outcome the rollout had to reach: the script's, or
	// Complete when its pause came only after the rollout had completed (a
	// handover before it can take minutes while the fresh standby warms).
	Expected Outcome
	// Got is the outcome reached; "" when the rollout reached none in time.
	Got Outcome
	// Problem says what went wrong: the outcome not reached, a step that
	// could not be carried out.
	Problem string
	// Skipped counts steps whose moment never came (the rollout ended first).
	Skipped  int
	Duration time.Duration
	// LongestGap is the longest time the rollout went without a pod rolled,
	// from its release to its outcome.
	LongestGap time.Duration
}

func (r Result) String() string {
	status := "ok"
	if r.Problem != "" {
		status = "PROBLEM: " + r.Problem
	}
	return fmt.Sprintf("%s: expected %s, got %s in %s (longest gap %s, %d skipped) %s", r.Script, r.Expected, orNone(r.Got), r.Duration.Round(100*time.Millisecond),
		r.LongestGap.Round(100*time.Millisecond), r.Skipped, status)
}

func orNone(o Outcome) string {
	if o == "" {
		return "nothing"
	}
	return string(o)
}

// run carries out one script on the group: set the spec it needs, release a
// new version, carry out its steps as their moments come, wait for the
// outcome it expects, then bring the group back to a settled state for the
// next script.
func (g *group) run(ctx context.Context, s Script, ch *chaos, timeout time.Duration) Result {
	res := Result{Script: s, Expected: s.Expect()}
	start := time.Now()
	rollsBefore := len(g.rolls())
	rolled := func() int { return len(g.rolls()) - rollsBefore }
	fail := func(format string, args ...any) Result {
		res.Problem = fmt.Sprintf(format, args...)
		if s.Has(Pause) {
			// One script's problem is not the next one's: a pause left on
			// the group would hold every later rollout.
			_ = g.patchSpec(ctx, `{"paused":false}`)
		}
		res.Duration = time.Since(start)
		res.LongestGap = g.longestGap(start, time.Now())
		return res
	}

	switch {
	case s.Has(GateFail):
		spec := fmt.Sprintf(`{"onFailure":"Rollback","analysis":{"prometheus":{"address":%q},"checks":[{"name":"errors","query":"soak_errors","gate":"AfterBatch","interval":"1s","condition":{"compare":{"operator":"<","threshold":"1"}}}]}}`, g.promAddr)
		if err := g.patchSpec(ctx, spec); err != nil {
			return fail("set the failing gate: %v", err)
		}
	case s.Has(CrashLoopRollback):
		if err := g.patchSpec(ctx, fmt.Sprintf(`{"onFailure":"Rollback","progressDeadline":%q}`, crashLoopDeadline)); err != nil {
			return fail("set onFailure Rollback: %v", err)
		}
	}
	previous := g.stable
	g.released++
	final := fmt.Sprintf("v%d", g.released)
	if err := g.patchTemplates(ctx, final, s.Has(CrashLoop) || s.Has(CrashLoopRollback)); err != nil {
		return fail("release %s: %v", final, err)
	}
	ended := func() bool { return g.reached(ctx, res.Expected, final, previous) == nil }
	for _, st := range s.Steps {
		switch st.Kind {
		case CrashLoop, CrashLoopRollback, GateFail:
			continue // came with the release
		case Revert:
			if s.Has(CrashLoop) {
				// The revert comes once the bad release holds the rollout.
				if err := poll(ctx, timeout, func() error {
					if bad, err := g.crashLooping(ctx); err != nil || !bad {
						return fmt.Errorf("no crash-looping pod yet (%v)", err)
					}
					return nil
				}); err != nil {
					return fail("the crash loop never held the rollout: %v", err)
				}
			}
		}
		if st.Kind != Revert || !s.Has(CrashLoop) {
			err := poll(ctx, timeout, func() error {
				if rolled() >= st.AfterRolls || ended() {
					return nil
				}
				return fmt.Errorf("%d of %d pods rolled", rolled(), st.AfterRolls)
			})
			if err != nil {
				return fail("waiting to %s: %v", st, err)
			}
			if rolled() < st.AfterRolls {
				res.Skipped++
				continue
			}
		}
		var err error
		switch st.Kind {
		case Flip:
			g.released++
			final = fmt.Sprintf("v%d", g.released)
			err = g.patchTemplates(ctx, final, false)
		case Revert:
			final = previous
			err = g.patchTemplates(ctx, final, false)
		case Scale:
			err = g.scale(ctx, g.zones[st.Zone], st.Delta)
		case Pause:
			if g.reached(ctx, Complete, final, previous) == nil {
				// Too late: the rollout completed while an earlier step
				// held the script up. Nothing is left to pause.
				res.Skipped++
				res.Expected = Complete
				continue
			}
			err = g.patchSpec(ctx, `{"paused":true}`)
		case Kill, Term, RestartAPIServer, Drain:
			ch.do(ctx, st)
		case Evict:
			g.ev.evictFromGroup(ctx, g, st)
		}
		if err != nil {
			return fail("%s: %v", st, err)
		}
	}
	if err := poll(ctx, timeout, func() error {
		err := g.reached(ctx, res.Expected, final, previous)
		if err != nil && res.Expected == Paused && g.reached(ctx, Complete, final, previous) == nil {
			// The pause landed after the last batch (a step before it
			// was held up, an evicted pod not back yet when the pause
			// checked): nothing was left to pause, and a group with
			// nothing to roll is Complete, paused or not.
			res.Expected = Complete
			res.Skipped++
			return g.patchSpec(ctx, `{"paused":false}`)
		}
		return err
	}); err != nil {
		res.Got = g.outcomeNow(ctx)
		return fail("expected %s: %v", res.Expected, err)
	}
	res.Got = res.Expected
	end := time.Now()
	if rg, err := g.get(ctx); err == nil {
		// The harness may notice the outcome late (a handover holds it up):
		// the group's status says when it came, to the second.
		var at *metav1.Time
		switch res.Got {
		case RolledBack:
			g.rolledBack = rg.Status.Analysis.Rollback.StartTime
			at = rg.Status.Analysis.Rollback.CompletionTime
		case Complete:
			at = rg.Status.RolloutCompletionTime
		}
		if at != nil && at.After(start) && at.Time.Before(end) {
			end = at.Add(time.Second)
		}
	}
	res.Duration = end.Sub(start)
	res.LongestGap = g.longestGap(start, end)
	if err := g.settle(ctx, res.Expected, final, timeout); err != nil {
		res.Problem = fmt.Sprintf("after the outcome: %v", err)
	}
	return res
}

// reached checks that the group shows outcome: Complete with every pod on
// final; Failed with its rollback complete and every pod on previous; Paused.
func (g *group) reached(ctx context.Context, outcome Outcome, final, previous string) error {
	switch outcome {
	case Complete:
		if err := g.phaseIs(ctx, v1alpha1.PhaseComplete); err != nil {
			return err
		}
		return g.podsOn(ctx, final)
	case RolledBack:
		rg, err := g.get(ctx)
		if err != nil {
			return err
		}
		a := rg.Status.Analysis
		if rg.Status.Phase != v1alpha1.PhaseFailed || a == nil || a.Rollback == nil || a.Rollback.CompletionTime == nil {
			return fmt.Errorf("phase %s, not Failed with its rollback complete: %s", rg.Status.Phase, rg.Status.Message)
		}
		if a.Rollback.StartTime.Equal(&g.rolledBack) {
			return fmt.Errorf("the rollback of the previous rollout (started %s) is still on record", a.Rollback.StartTime)
		}
		return g.podsOn(ctx, previous)
	case Paused:
		return g.phaseIs(ctx, v1alpha1.PhasePaused)
	}
	return fmt.Errorf("unknown outcome %q", outcome)
}

// outcomeNow names the outcome the group shows now, "" for none.
func (g *group) outcomeNow(ctx context.Context) Outcome {
	rg, err := g.get(ctx)
	if err != nil {
		return ""
	}
	switch rg.Status.Phase {
	case v1alpha1.PhaseComplete:
		return Complete
	case v1alpha1.PhasePaused:
		return Paused
	case v1alpha1.PhaseFailed:
		return RolledBack
	}
	return ""
}

// settle brings the group back to Complete on a plain spec: a paused group
// resumes and completes; a rolled back one gets its plain spec back (its
// next release clears the failure). The group's stable version is then
// what its pods run.
func (g *group) settle(ctx context.Context, outcome Outcome, final string, timeout time.Duration) error {
	switch outcome {
	case Paused:
		if err := g.patchSpec(ctx, `{"paused":false}`); err != nil {
			return err
		}
		if err := poll(ctx, timeout, func() error { return g.reached(ctx, Complete, final, "") }); err != nil {
			return fmt.Errorf("resumed: %w", err)
		}
	case RolledBack:
		if err := g.patchSpec(ctx, `{"onFailure":"Pause","analysis":null,"progressDeadline":"15m"}`); err != nil {
			return err
		}
		return nil // the pods run the stable version still
	}
	g.stable = final
	return nil
}

// rolls are the pods of the group the monitor saw rolled, less those the
// soak evicted: the rollouts' progress.
func (g *group) rolls() []framework.Deletion {
	return slices.DeleteFunc(g.mon.Rolls(), func(d framework.Deletion) bool { return g.ev.isEvicted(d.UID) })
}

// longestGap is the longest time between from and to with no pod of the
// group rolled.
func (g *group) longestGap(from, to time.Time) time.Duration {
	last, longest := from, time.Duration(0)
	for _, d := range g.rolls() {
		if d.At.Before(from) || d.At.After(to) {
			continue
		}
		longest = max(longest, d.At.Sub(last))
		last = d.At
	}
	return max(longest, to.Sub(last))
}
