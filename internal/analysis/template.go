// Package analysis evaluates the Prometheus checks that gate a RolloutGroup's
// rollout: it expands their query templates, queries Prometheus, judges each
// result against the check's condition and keeps each check's count of
// consecutive successes, failures and errors. Everything but the querier is a
// pure function of its arguments and the clock passed in.
package analysis

import (
	"bytes"
	"fmt"
	"text/template"
	"text/template/parse"
)

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

// ParseQuery parses a query template. A template naming a variable that Vars
// does not have is refused here, not when it is first expanded.
func ParseQuery(query string) (*template.Template, error) {
	tmpl, err := template.New("query").Option("missingkey=error").Parse(query)
	if err != nil {
		return nil, fmt.Errorf("parse query template: %w", err)
	}
	// A loop is refused: the variables are four strings, so it has no use, and
	// {{ range 2000000000 }} would hold the reconcile and its memory.
	for _, t := range tmpl.Templates() {
		if t.Tree != nil && hasRange(t.Tree.Root) {
			return nil, fmt.Errorf("query template: range is not supported; use the variables .Member, .Namespace, .Group and .Revision")
		}
	}
	// Expanding once with placeholder values finds references to unknown
	// fields, which text/template reports only at execution.
	if err := tmpl.Execute(&bytes.Buffer{}, Vars{Member: "m", Namespace: "n", Group: "g", Revision: "r"}); err != nil {
		return nil, fmt.Errorf("query template: %w", err)
	}
	return tmpl, nil
}

// ExpandQuery expands a query template with vars.
func ExpandQuery(query string, vars Vars) (string, error) {
	tmpl, err := ParseQuery(query)
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	if err := tmpl.Execute(&out, vars); err != nil {
		return "", fmt.Errorf("query template: %w", err)
	}
	return out.String(), nil
}

// hasRange reports whether a parse tree holds a range action.
func hasRange(n parse.Node) bool {
	switch n := n.(type) {
	case *parse.RangeNode:
		return true
	case *parse.ListNode:
		if n == nil {
			return false
		}
		for _, c := range n.Nodes {
			if hasRange(c) {
				return true
			}
		}
	case *parse.IfNode:
		return hasRange(n.List) || hasRange(n.ElseList)
	case *parse.WithNode:
		return hasRange(n.List) || hasRange(n.ElseList)
	}
	return false
}
