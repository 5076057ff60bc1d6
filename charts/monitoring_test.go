/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package charts

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/yaml"
)

const monitoringValues = "echelon/ci/monitoring-values.yaml"

// alertRule is one rule of the rendered PrometheusRule.
type alertRule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// renderedAlerts renders the chart with args and returns its alert rules.
func renderedAlerts(t *testing.T, args ...string) []alertRule {
	t.Helper()
	m := render(t, args...)
	var rules []alertRule
	for _, obj := range m.objs {
		if obj["kind"] != "PrometheusRule" {
			continue
		}
		var pr struct {
			Spec struct {
				Groups []struct {
					Name  string      `json:"name"`
					Rules []alertRule `json:"rules"`
				} `json:"groups"`
			} `json:"spec"`
		}
		raw, _ := json.Marshal(obj)
		if err := json.Unmarshal(raw, &pr); err != nil {
			t.Fatal(err)
		}
		for _, g := range pr.Spec.Groups {
			rules = append(rules, g.Rules...)
		}
	}
	return rules
}

// wantAlerts are the alerts the chart ships, by name, in the order rendered:
// those issue "Install and operate" asks for, those of analysis gates, those
// of ScalingPolicies and DelayedDownscales, those of the admission webhooks,
// and the drain refused for long of the eviction webhook.
var wantAlerts = []string{
	"EchelonRolloutGroupStalled", "EchelonRolloutGroupBlocked", "EchelonRolloutGroupPausedLong",
	"EchelonRolloutGroupWaitingForPromote", "EchelonRolloutGroupAnalysisFailed", "EchelonRolloutGroupAnalysisErrors",
	"EchelonHookCallsFailing", "EchelonNotificationsFailing", "EchelonReconcileErrors", "EchelonOperatorAbsent", "EchelonScalingPolicyBlocked", "EchelonDelayedDownscaleBlocked",
	"EchelonVolumeResizeBlocked",
	"EchelonWebhookErrors", "EchelonWebhookCertificateExpiring", "EchelonEvictionsRefusedLong", "EchelonNoLeader",
}

// webhookAlerts exist only with the webhooks.
var webhookAlerts = []string{"EchelonWebhookErrors", "EchelonWebhookCertificateExpiring", "EchelonEvictionsRefusedLong"}

func TestPrometheusRule(t *testing.T) {
	t.Parallel()
	if n := render(t).count("PrometheusRule"); n != 0 {
		t.Errorf("%d PrometheusRules by default, want none (the CRD may be missing)", n)
	}
	rules := renderedAlerts(t, "--set", "prometheusRule.enabled=true")
	var names []string
	anchors := runbookAnchors(t)
	for _, r := range rules {
		names = append(names, r.Alert)
		if !slices.Contains([]string{"critical", "warning", "info"}, r.Labels["severity"]) {
			t.Errorf("%s: severity %q, want critical, warning or info", r.Alert, r.Labels["severity"])
		}
		if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
			t.Errorf("%s: annotations %v lack a summary or a description", r.Alert, r.Annotations)
		}
		base, anchor, ok := strings.Cut(r.Annotations["runbook_url"], "#")
		if !ok || base != "https://github.com/echelon-operator/echelon/blob/main/docs/runbooks.md" {
			t.Errorf("%s: runbook_url %q, want a section of docs/runbooks.md", r.Alert, r.Annotations["runbook_url"])
		} else if !anchors[anchor] {
			t.Errorf("%s: runbook_url names section #%s, which docs/runbooks.md does not have", r.Alert, anchor)
		}
		if r.For == "" {
			t.Errorf("%s: no `for`: a single bad scrape would page", r.Alert)
		}
		if err := checkPromQL(r.Expr); err != nil {
			t.Errorf("%s: expr %q: %v", r.Alert, r.Expr, err)
		}
		if !strings.Contains(r.Expr, `job="echelon-metrics"`) {
			t.Errorf("%s: expr %q does not select the release's job (its metrics Service, echelon-metrics)", r.Alert, r.Expr)
		}
	}
	if !slices.Equal(names, wantAlerts) {
		t.Errorf("alerts %v, want %v", names, wantAlerts)
	}
	// The alerts' default job selector assumes the metrics Service's name.
	service(t, render(t), "echelon-metrics")

	t.Run("values", func(t *testing.T) {
		t.Parallel()
		rules := renderedAlerts(t, "--values", monitoringValues, "--set", "prometheusRule.selector=job=\"custom\"")
		byName := map[string]alertRule{}
		for _, r := range rules {
			byName[r.Alert] = r
			if r.Labels["team"] != "platform" {
				t.Errorf("%s: labels %v lack additionalLabels team=platform", r.Alert, r.Labels)
			}
			if !strings.Contains(r.Expr, `job="custom"`) || strings.Contains(r.Expr, "echelon-metrics") {
				t.Errorf("%s: expr %q does not use prometheusRule.selector", r.Alert, r.Expr)
			}
		}
		if _, ok := byName["EchelonRolloutGroupPausedLong"]; ok {
			t.Error("EchelonRolloutGroupPausedLong rendered although disabled")
		}
		if s := byName["EchelonRolloutGroupStalled"]; s.For != "10m" || s.Labels["severity"] != "critical" {
			t.Errorf("EchelonRolloutGroupStalled for=%q severity=%q, want the values' 10m and critical", s.For, s.Labels["severity"])
		}
	})
	t.Run("no webhooks, no webhook alerts", func(t *testing.T) {
		t.Parallel()
		for _, r := range renderedAlerts(t, "--set", "prometheusRule.enabled=true", "--set", "webhooks.enabled=false") {
			if slices.Contains(webhookAlerts, r.Alert) {
				t.Errorf("%s rendered without webhooks", r.Alert)
			}
			if r.Alert == "EchelonOperatorAbsent" && strings.Contains(r.Annotations["description"], "webhook") {
				t.Errorf("EchelonOperatorAbsent speaks of webhooks that are not installed: %s", r.Annotations["description"])
			}
		}
	})
	t.Run("values of a chart without the analysis alerts", func(t *testing.T) {
		t.Parallel()
		// helm upgrade --reuse-values renders with the previous chart's
		// values, which lack the analysis alerts' keys: no alert, no error.
		rules := renderedAlerts(t, "--set", "prometheusRule.enabled=true",
			"--set", "prometheusRule.alerts.rolloutGroupAnalysisFailed=null", "--set", "prometheusRule.alerts.rolloutGroupAnalysisErrors=null")
		for _, r := range rules {
			if r.Alert == "EchelonRolloutGroupAnalysisFailed" || r.Alert == "EchelonRolloutGroupAnalysisErrors" {
				t.Errorf("%s rendered without its values", r.Alert)
			}
		}
		if len(rules) != len(wantAlerts)-2 {
			t.Errorf("%d alerts without the analysis alerts' values, want %d", len(rules), len(wantAlerts)-2)
		}
	})
	t.Run("values of a chart without the eviction alert", func(t *testing.T) {
		t.Parallel()
		// helm upgrade --reuse-values from a chart before the eviction
		// webhook: no such key, no alert, no error.
		rules := renderedAlerts(t, "--set", "prometheusRule.enabled=true", "--set", "prometheusRule.alerts.evictionsRefusedLong=null")
		for _, r := range rules {
			if r.Alert == "EchelonEvictionsRefusedLong" {
				t.Error("EchelonEvictionsRefusedLong rendered without its values")
			}
		}
		if len(rules) != len(wantAlerts)-1 {
			t.Errorf("%d alerts without the eviction alert's values, want %d", len(rules), len(wantAlerts)-1)
		}
	})
	t.Run("no leader election, no leader alert", func(t *testing.T) {
		t.Parallel()
		for _, r := range renderedAlerts(t, "--set", "prometheusRule.enabled=true", "--set", "replicas=1", "--set", "leaderElection.enabled=false") {
			if r.Alert == "EchelonNoLeader" {
				t.Error("EchelonNoLeader rendered without leader election: it would always fire")
			}
		}
	})
}

// runbookAnchors returns the anchors GitHub gives the headings of
// docs/runbooks.md: lower case, spaces to hyphens, punctuation dropped.
func runbookAnchors(t *testing.T) map[string]bool {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(repoRoot, "docs", "runbooks.md"))
	if err != nil {
		t.Fatal(err)
	}
	drop := regexp.MustCompile(`[^a-z0-9 _-]`)
	anchors := map[string]bool{}
	for line := range strings.Lines(string(raw)) {
		if h, ok := strings.CutPrefix(line, "#"); ok {
			h = strings.TrimSpace(strings.TrimLeft(h, "#"))
			anchors[strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(h), ""), " ", "-")] = true
		}
	}
	return anchors
}

// dashboard is the part of the Grafana dashboard JSON the tests read.
type dashboard struct {
	UID        string `json:"uid"`
	Title      string `json:"title"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

func renderedDashboard(t *testing.T, args ...string) (*corev1.ConfigMap, dashboard) {
	t.Helper()
	m := render(t, args...)
	cms := all[corev1.ConfigMap](m, "ConfigMap")
	if len(cms) != 1 {
		t.Fatalf("%d ConfigMaps with the dashboard enabled, want 1", len(cms))
	}
	var d dashboard
	if err := json.Unmarshal([]byte(cms[0].Data["echelon.json"]), &d); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	return cms[0], d
}

// queries returns every PromQL expression of the dashboard: panel targets and
// the queries of its variables (label_values(<expr>, <label>) gives <expr>).
func (d dashboard) queries() []string {
	var out []string
	for _, p := range d.Panels {
		for _, tg := range p.Targets {
			out = append(out, tg.Expr)
		}
	}
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*[a-zA-Z_]+\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(string)
		if obj, ok := v.Query.(map[string]any); ok {
			q, _ = obj["query"].(string)
		}
		if m := labelValues.FindStringSubmatch(q); m != nil {
			out = append(out, m[1])
		}
	}
	return out
}

func TestDashboard(t *testing.T) {
	t.Parallel()
	if n := render(t).count("ConfigMap"); n != 0 {
		t.Errorf("%d ConfigMaps by default, want none", n)
	}
	cm, d := renderedDashboard(t, "--values", monitoringValues)
	if cm.Labels["grafana_dashboard"] != "1" || cm.Annotations["grafana_folder"] != "Kubernetes" {
		t.Errorf("dashboard ConfigMap labels %v annotations %v: want the sidecar label and the values' annotations", cm.Labels, cm.Annotations)
	}
	if cm.Namespace != releaseNamespace {
		t.Errorf("dashboard ConfigMap in %q, want the release namespace", cm.Namespace)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("dashboard uid %q title %q: want both, so that re-imports replace it", d.UID, d.Title)
	}
	var titles []string
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		titles = append(titles, p.Title)
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if err := checkPromQL(tg.Expr); err != nil {
				t.Errorf("panel %q: %q: %v", p.Title, tg.Expr, err)
			}
		}
	}
	// What the issue asks the dashboard to show.
	for _, want := range []string{"Phase", "Rollout progress", "Rollout duration", "Reconcile errors", "Pods rolled", "Leader",
		"Webhook requests", "Webhook latency (p99)", "Pod call failures",
		"Analysis check results", "Analysis query latency (p99)", "Rollbacks",
		"Evictions", "Disruption decisions", "Disruption hold conflicts", "Eviction webhook latency (p50, p99)",
		"Hook calls", "Hook call latency (p99)"} {
		if !slices.Contains(titles, want) {
			t.Errorf("dashboard panels %v lack %q", titles, want)
		}
	}
	if got := len(d.queries()); got < len(titles) {
		t.Errorf("%d queries for %d panels", got, len(titles))
	}
	other, _ := renderedDashboard(t, "--set", "dashboard.enabled=true", "--set", "dashboard.namespace=monitoring")
	if other.Namespace != "monitoring" {
		t.Errorf("dashboard.namespace=monitoring put the ConfigMap in %q", other.Namespace)
	}
}

// monitoringQueries returns every PromQL expression the chart ships: the
// alerts and the dashboard, each with where it comes from.
func monitoringQueries(t *testing.T) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, r := range renderedAlerts(t, append([]string{"--set", "prometheusRule.enabled=true", "--set", "grafanaCompat=true"}, grafanaConfigs...)...) {
		out["alert "+r.Alert] = r.Expr
	}
	_, d := renderedDashboard(t, "--set", "dashboard.enabled=true")
	for i, q := range d.queries() {
		out[fmt.Sprintf("dashboard query %d", i)] = q
	}
	return out
}

// syntheticMetrics are series Prometheus makes itself for every target; no
// exporter exports them.
var syntheticMetrics = []string{"up"}

// exportedOnlyAfter are counters the alerts and the dashboard read that have
// no series until their first count, caused by nothing the install test's
// scenarios do, with what it takes. They must still be declared in
// internal/metrics, so that a misspelt name fails.
var exportedOnlyAfter = map[string]string{
	"echelon_grafana_compat_zpdbs_readable":                "a reconcile in --grafana-compat mode, which the install test does not turn on",
	"echelon_evictions_total":                              "an eviction judged by the eviction webhook",
	"echelon_disruption_decisions_total":                   "a disruption decided through the group's one budget",
	"echelon_disruption_hold_conflicts_total":              "two decisions racing for one hold, which no scenario can cause on purpose",
	"echelon_notifications_total":                          "a notification or callback sent (spec.notifications, spec.callback), which the install scenarios do not configure",
	"echelon_notification_request_duration_seconds_bucket": "a notification or callback sent (spec.notifications, spec.callback), which the install scenarios do not configure",
	// The e2e volume resize specs (e2e/resize_test.go) make these.
	"echelon_volume_resize_claims":        "a volume resize (spec.volumeClaimSizes), which no install scenario asks for",
	"echelon_volume_resize_actions_total": "a volume resize (spec.volumeClaimSizes), which no install scenario asks for",
	"echelon_volume_resize_phase":         "a volume resize (spec.volumeClaimSizes), which no install scenario asks for",
	// The e2e hook specs (e2e/hooks_test.go) make these calls.
	"echelon_hook_calls_total":                  "a call of a hook (spec.hooks), which no install scenario configures",
	"echelon_hook_call_duration_seconds_bucket": "a call of a hook (spec.hooks), which no install scenario configures",
}

// assertQueriesUseExportedMetrics checks that every metric named by the alerts
// and the dashboard is in scrape, the /metrics text of a running operator, or
// is declared and waits for an event the scenarios do not cause.
func assertQueriesUseExportedMetrics(t *testing.T, scrape string) {
	t.Helper()
	exported := exportedSeries(scrape)
	declared := declaredMetrics(t)
	checked := map[string]bool{}
	for where, q := range monitoringQueries(t) {
		for _, name := range metricNames(q) {
			checked[name] = true
			if exported[name] || slices.Contains(syntheticMetrics, name) {
				continue
			}
			if after, ok := exportedOnlyAfter[name]; ok && declared[name] {
				t.Logf("%s names %s, which has no series until %s", where, name, after)
				continue
			}
			t.Errorf("%s names %s, which the operator does not export: %s", where, name, q)
		}
	}
	t.Logf("the alerts and the dashboard name %d metrics: %v", len(checked), slices.Sorted(maps.Keys(checked)))
}

// declaredMetrics returns the names internal/metrics gives its collectors,
// with the series a histogram adds.
func declaredMetrics(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "internal", "metrics", "*.go"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Go files in internal/metrics: %v", err)
	}
	name := regexp.MustCompile(`Name:\s*"([a-zA-Z_:][a-zA-Z0-9_:]*)"`)
	out := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range name.FindAllStringSubmatch(string(raw), -1) {
			for _, suffix := range []string{"", "_bucket", "_sum", "_count"} {
				out[m[1]+suffix] = true
			}
		}
	}
	return out
}

func TestExportedOnlyAfterAreDeclared(t *testing.T) {
	t.Parallel()
	declared := declaredMetrics(t)
	for name := range exportedOnlyAfter {
		if !declared[name] {
			t.Errorf("exportedOnlyAfter lists %s, which internal/metrics does not declare", name)
		}
	}
	for where, q := range monitoringQueries(t) {
		for _, name := range metricNames(q) {
			if strings.HasPrefix(name, "echelon_") && !declared[name] {
				t.Errorf("%s names %s, which internal/metrics does not declare: %s", where, name, q)
			}
		}
	}
}

// exportedSeries returns the sample names of a Prometheus text exposition:
// histogram families appear as their _bucket, _sum and _count series.
func exportedSeries(scrape string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.Lines(scrape) {
		if line = strings.TrimSpace(line); line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}

var (
	promString     = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|` + "`[^`]*`")
	promMatchers   = regexp.MustCompile(`\{[^{}]*\}`)
	promRange      = regexp.MustCompile(`\[[^\[\]]*\]`)
	promNumber     = regexp.MustCompile(`\b[0-9][0-9.]*([eE][-+]?[0-9]+)?[a-zA-Z]*`)
	promGrouping   = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\([^()]*\)`)
	promIdentifier = regexp.MustCompile(`\$?[a-zA-Z_:][a-zA-Z0-9_:]*\s*\(?`)
	promKeywords   = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "and", "or", "unless", "bool", "offset", "inf", "nan"}
)

// metricNames returns the metric names a PromQL expression selects: what
// remains once strings, label matchers, ranges, grouping clauses, function
// calls, numbers, durations, keywords and Grafana variables are taken out.
func metricNames(expr string) []string {
	s := promString.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRange.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	s = promNumber.ReplaceAllString(s, " ")
	var names []string
	for _, tok := range promIdentifier.FindAllString(s, -1) {
		tok = strings.TrimSpace(tok)
		if strings.HasPrefix(tok, "$") || strings.HasSuffix(tok, "(") || slices.Contains(promKeywords, strings.ToLower(tok)) {
			continue
		}
		if !slices.Contains(names, tok) {
			names = append(names, tok)
		}
	}
	return names
}

// checkPromQL catches what breaks an expression without a PromQL parser at
// hand: unbalanced brackets and quotes, and no metric at all.
func checkPromQL(expr string) error {
	s := promString.ReplaceAllString(expr, "")
	if strings.ContainsAny(s, `"'`+"`") {
		return fmt.Errorf("unbalanced quotes")
	}
	var stack []rune
	pairs := map[rune]rune{')': '(', ']': '[', '}': '{'}
	for _, r := range s {
		switch r {
		case '(', '[', '{':
			stack = append(stack, r)
		case ')', ']', '}':
			if len(stack) == 0 || stack[len(stack)-1] != pairs[r] {
				return fmt.Errorf("unbalanced %q", r)
			}
			stack = stack[:len(stack)-1]
		}
	}
	if len(stack) > 0 {
		return fmt.Errorf("unclosed %q", stack[len(stack)-1])
	}
	if len(metricNames(expr)) == 0 {
		return fmt.Errorf("selects no metric")
	}
	return nil
}

func TestMetricNames(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up`, []string{"up"}},
		{`absent(up{job="echelon-metrics"} == 1)`, []string{"up"}},
		{`max by (namespace, rolloutgroup) (echelon_rolloutgroup_phase{phase="Stalled", job="x"}) == 1`, []string{"echelon_rolloutgroup_phase"}},
		{`sum by (job) (rate(a_total{controller="rolloutgroup"}[10m])) / sum by (job) (rate(b_total[10m])) > 0.05`, []string{"a_total", "b_total"}},
		{`histogram_quantile(0.9, sum by (le) (increase(d_bucket{namespace=~"$namespace"}[1d])))`, []string{"d_bucket"}},
		{`time() - max by (ns) (ts_seconds) and on (ns) (max(phase{p=~"A|B"}) == 1)`, []string{"ts_seconds", "phase"}},
		{`rate(x[$__rate_interval]) * 60 offset 5m`, []string{"x"}},
		{`sum(rate(y[5m])) without (pod) / ignoring (le) group_left (a) z`, []string{"y", "z"}},
		{`count by (phase) (m{l="{not a matcher}"} == 1)`, []string{"m"}},
	} {
		if got := metricNames(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("metricNames(%q) = %v, want %v", tc.expr, got, tc.want)
		}
	}
	for _, bad := range []string{`sum(rate(x[5m])`, `x{a="b"`, `rate(x[5m)]`, `time()`} {
		if checkPromQL(bad) == nil {
			t.Errorf("checkPromQL(%q) found nothing wrong", bad)
		}
	}
}

func TestAggregatedRoles(t *testing.T) {
	t.Parallel()
	m := render(t)
	roles := map[string]map[string]bool{} // aggregate-to target -> permissions
	for _, cr := range all[rbacv1.ClusterRole](m, "ClusterRole") {
		for k, v := range cr.Labels {
			if target, ok := strings.CutPrefix(k, aggregateLabelPrefix); ok && v == "true" {
				if roles[target] == nil {
					roles[target] = map[string]bool{}
				}
				for _, p := range permissions(cr.Rules) {
					roles[target][p] = true
				}
			}
		}
	}
	for plural, hasScale := range crdPlurals(t) {
		if hasScale {
			for target, verbs := range map[string][]string{"view": {"get"}, "edit": {"get", "update", "patch"}, "admin": {"get", "update", "patch"}} {
				for _, v := range verbs {
					if p := fmt.Sprintf(`"echelon.dev" %s/scale %s *`, plural, v); !roles[target][p] {
						t.Errorf("the built-in %s role would not get %s", target, p)
					}
				}
			}
			if p := fmt.Sprintf(`"echelon.dev" %s/scale update *`, plural); roles["view"][p] {
				t.Errorf("view gets %s", p)
			}
		}
		read := []string{"get", "list", "watch"}
		write := []string{"create", "update", "patch", "delete", "deletecollection"}
		for target, verbs := range map[string][]string{"view": read, "edit": append(read, write...), "admin": append(read, write...)} {
			for _, v := range verbs {
				if p := fmt.Sprintf(`"echelon.dev" %s %s *`, plural, v); !roles[target][p] {
					t.Errorf("the built-in %s role would not get %s", target, p)
				}
			}
		}
		for _, w := range write {
			if p := fmt.Sprintf(`"echelon.dev" %s %s *`, plural, w); roles["view"][p] {
				t.Errorf("view gets %s", p)
			}
		}
		for target, perms := range roles {
			for p := range perms {
				if strings.Contains(p, plural+"/status") && !strings.Contains(p, " get ") && !strings.Contains(p, " list ") && !strings.Contains(p, " watch ") {
					t.Errorf("%s gets %s: status is the operator's to write", target, p)
				}
			}
		}
	}
	if off := render(t, "--set", "rbac.aggregateToDefaultRoles=false"); len(all[rbacv1.ClusterRole](off, "ClusterRole")) != len(operatorClusterRoles(off)) {
		t.Error("rbac.aggregateToDefaultRoles=false still renders aggregated ClusterRoles")
	}
}

// crdPlurals returns the plural resource names of the generated CRDs, and
// whether each has a scale subresource.
func crdPlurals(t *testing.T) map[string]bool {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot, "config", "crd", "bases", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no CRDs in config/crd/bases: %v", err)
	}
	out := map[string]bool{}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var crd struct {
			Spec struct {
				Names struct {
					Plural string `json:"plural"`
				} `json:"names"`
				Versions []struct {
					Subresources struct {
						Scale *struct{} `json:"scale"`
					} `json:"subresources"`
				} `json:"versions"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatal(err)
		}
		scale := false
		for _, v := range crd.Spec.Versions {
			scale = scale || v.Subresources.Scale != nil
		}
		out[crd.Spec.Names.Plural] = scale
	}
	return out
}
