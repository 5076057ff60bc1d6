// Package analysis evaluates the Prometheus checks that gate a RolloutGroup's
// rollout: it expands their query templates, queries Prometheus, judges each
// result against the check's condition and keeps each check's count of
// consecutive successes, failures and errors. Everything but the querier is a
// pure function of its arguments and the clock passed in.
package analysis

import (
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// MaxExpandedQueryBytes bounds a query after expansion. A 4096-byte template
// of the shortest variable, {{.Group}}, with names of 253 characters expands
// to about 100 KiB; a query that long is a mistake, not a check.
const MaxExpandedQueryBytes = 64 << 10

// Vars are the variables a check's query template may use.
type Vars struct {
	// Member is the StatefulSet the gate is about.
	Member string
	// Namespace is the RolloutGroup's namespace.
	Namespace string
	// Group is the RolloutGroup's name.
	Group string
	// Revision is the member's update revision.
	Revision string
}

// variables maps the name inside {{ . }} to its value. This is the whole
// template language: Go's text/template let nested define and template calls
// double the output at each level, so one short query could take the leader's
// memory and time.
var variables = map[string]func(Vars) string{
	"Member":    func(v Vars) string { return v.Member },
	"Namespace": func(v Vars) string { return v.Namespace },
	"Group":     func(v Vars) string { return v.Group },
	"Revision":  func(v Vars) string { return v.Revision },
}

// ValidateQuery reports whether every {{ }} of query holds one of the
// variables, so that a check can be refused before its first query.
func ValidateQuery(query string) error {
	_, err := expand(query, nil)
	return err
}

// ValidateChecks validates the query templates of a group's checks; CEL on the
// CRD cannot parse them.
func ValidateChecks(a *v1alpha1.RolloutAnalysis) field.ErrorList {
	if a == nil {
		return nil
	}
	var errs field.ErrorList
	path := field.NewPath("spec", "analysis", "checks")
	for i, c := range a.Checks {
		if c.HTTP != nil {
			if err := ValidateQuery(c.HTTP.URL); err != nil {
				errs = append(errs, field.Invalid(path.Index(i).Child("http", "url"), c.HTTP.URL, fmt.Sprintf("check %s: %v", c.Name, err)))
			}
			continue
		}
		if err := ValidateQuery(c.Query); err != nil {
			errs = append(errs, field.Invalid(path.Index(i).Child("query"), c.Query, fmt.Sprintf("check %s: %v", c.Name, err)))
		}
	}
	return errs
}

// ExpandQuery replaces each {{ .Member }}, {{ .Namespace }}, {{ .Group }} and
// {{ .Revision }} of query (spaces inside the braces optional) by its value;
// anything else between {{ and }} is an error. The text around them is kept
// byte for byte, as text/template, which expanded them before, kept it. The
// result is at most MaxExpandedQueryBytes long.
func ExpandQuery(query string, vars Vars) (string, error) {
	return expand(query, &vars)
}

// expand checks query and, when vars is not nil, expands it. It reads the
// query once and refuses an output past the limit before writing it, so time
// and memory are linear in the query and the limit.
func expand(query string, vars *Vars) (string, error) {
	var out strings.Builder
	write := func(s string) error {
		if vars == nil {
			return nil
		}
		if out.Len()+len(s) > MaxExpandedQueryBytes {
			return fmt.Errorf("query template: the expanded query is over the limit of %d bytes", MaxExpandedQueryBytes)
		}
		out.WriteString(s)
		return nil
	}
	rest, at := query, 0
	for {
		open := strings.Index(rest, "{{")
		if open < 0 {
			if err := write(rest); err != nil {
				return "", err
			}
			return out.String(), nil
		}
		if err := write(rest[:open]); err != nil {
			return "", err
		}
		at += open
		rest = rest[open:]
		end := strings.Index(rest[2:], "}}")
		if end < 0 {
			return "", fmt.Errorf("query template: {{ at byte %d is not closed by }}", at)
		}
		action := rest[:end+4]
		value, ok := variables[variableName(action)]
		if !ok {
			return "", fmt.Errorf("query template: %s at byte %d is not a variable: use {{ .Member }}, {{ .Namespace }}, {{ .Group }} or {{ .Revision }}", quoteAction(action), at)
		}
		if vars != nil {
			if err := write(value(*vars)); err != nil {
				return "", err
			}
		}
		at += len(action)
		rest = rest[len(action):]
	}
}

// variableName is the name in an action "{{ .Name }}", or "" when the action
// is anything else. The blanks allowed are those text/template allowed.
func variableName(action string) string {
	inner := strings.Trim(action[2:len(action)-2], " \t\r\n")
	name, ok := strings.CutPrefix(inner, ".")
	if !ok {
		return ""
	}
	return name
}

// quoteAction shortens an action for an error message: the query may be 4 KiB.
func quoteAction(action string) string {
	const maxLen = 64
	if len(action) <= maxLen {
		return action
	}
	return action[:maxLen] + "...}}"
}
