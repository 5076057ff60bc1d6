package render

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// writeAnalysis adds the group's analysis to the header: the gate it waits
// on and each check's state with its last value, the failure that holds it
// and the rollback. Nothing for a group without analysis and no failure.
func writeAnalysis(b *strings.Builder, field func(label, value string), rg *v1alpha1.RolloutGroup, now time.Time, s Style) {
	a := rg.Status.Analysis
	if a == nil {
		if rg.Spec.Analysis != nil {
			field("Gate", "none pending")
		}
		return
	}
	switch {
	case a.Gate != nil:
		field("Gate", gateLine(a.Gate, now))
	case a.Failure != nil && a.Failure.Gate != nil:
		field("Gate", s.Phase("Failed")+": "+gateLine(a.Failure.Gate, now))
	case rg.Spec.Analysis != nil:
		field("Gate", "none pending")
	}
	if len(a.Checks) > 0 {
		rows := [][]cell{{plain("  CHECK"), plain("PHASE"), plain("LAST VALUE"), plain("SUCCESSES"), plain("FAILURES"), plain("ERRORS"), plain("QUERIED")}}
		for _, c := range a.Checks {
			spec := checkSpec(rg, c.Name)
			value := c.LastValue
			if c.LastError != "" {
				value = "error: " + c.LastError
			}
			if value == "" {
				value = "-"
			}
			queried := "-"
			if c.LastTime != nil {
				queried = ago(now, c.LastTime.Time)
			}
			rows = append(rows, []cell{plain("  " + c.Name), {text: string(c.Phase), paint: s.Phase}, plain(value),
				plain(fmt.Sprintf("%d/%d", c.ConsecutiveSuccesses, spec.SuccessThreshold)),
				plain(fmt.Sprintf("%d/%d", c.ConsecutiveFailures, spec.FailureThreshold)),
				plain(fmt.Sprintf("%d/%d", c.ConsecutiveErrors, spec.ErrorThreshold)),
				plain(queried)})
		}
		for _, line := range table(rows) {
			b.WriteString(line)
			b.WriteString("\n")
		}
	}
	if f := a.Failure; f != nil {
		field("Failure", fmt.Sprintf("%s: %s (%s)", s.Phase(f.Reason), f.Message, ago(now, f.Time.Time)))
	}
	if rb := a.Rollback; rb != nil {
		var moves []string
		for _, m := range rb.Members {
			moves = append(moves, fmt.Sprintf("%s %s to %s", m.Name, shortRevision(m.Name, m.From), shortRevision(m.Name, m.To)))
		}
		state := "started " + ago(now, rb.StartTime.Time)
		if rb.CompletionTime != nil {
			state += ", complete " + ago(now, rb.CompletionTime.Time)
		}
		field("Rollback", strings.Join(moves, ", ")+"; "+state)
	}
}

// gateLine describes a pending gate: its kind and member, and where its
// clock stands.
func gateLine(g *v1alpha1.GateStatus, now time.Time) string {
	line := fmt.Sprintf("%s of %s (revision %s)", g.Kind, g.Member, shortRevision(g.Member, g.Revision))
	switch {
	case g.StartTime == nil:
		line += ", waiting for the batch's pods to be available before its checks start"
	default:
		line += ", checks started " + ago(now, g.StartTime.Time)
	}
	if g.SoakUntil != nil {
		line += ", soak ends " + ago(now, g.SoakUntil.Time)
	}
	return line
}

// checkSpec is the spec of the named check, with the thresholds' defaults
// when it is gone from the spec.
func checkSpec(rg *v1alpha1.RolloutGroup, name string) v1alpha1.AnalysisCheck {
	def := v1alpha1.AnalysisCheck{SuccessThreshold: 1, FailureThreshold: 1, ErrorThreshold: 3}
	if rg.Spec.Analysis == nil {
		return def
	}
	i := slices.IndexFunc(rg.Spec.Analysis.Checks, func(c v1alpha1.AnalysisCheck) bool { return c.Name == name })
	if i < 0 {
		return def
	}
	c := rg.Spec.Analysis.Checks[i]
	if c.SuccessThreshold == 0 {
		c.SuccessThreshold = def.SuccessThreshold
	}
	if c.FailureThreshold == 0 {
		c.FailureThreshold = def.FailureThreshold
	}
	if c.ErrorThreshold == 0 {
		c.ErrorThreshold = def.ErrorThreshold
	}
	return c
}
