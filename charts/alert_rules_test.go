/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package charts

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestEvictionsRefusedLongFires runs the rendered EchelonEvictionsRefusedLong
// through promtool's rule unit tests, on the series a drain leaves: it fires
// for a drain refused for 50 minutes once refusals have lasted 30, resolves
// soon after they stop, and stays quiet for a drain that waits 20 minutes
// while the other zone's pods come back.
func TestEvictionsRefusedLongFires(t *testing.T) {
	t.Parallel()
	promtool := promtoolBinary(t)
	const name = "EchelonEvictionsRefusedLong"
	rule, rules := renderedAlert(t, name)

	// kubectl drain asks again every 5 s: 12 refusals a minute.
	const series = `echelon_evictions_total{decision="denied", reason="OtherZoneDisrupted", job="echelon-metrics", instance="10.0.0.1:8001"}`
	annotations := map[string]string{
		"summary":     rule.Annotations["summary"],
		"runbook_url": rule.Annotations["runbook_url"],
		// 60 refusals in the last 5 minutes.
		"description": strings.NewReplacer("{{ $labels.job }}", "echelon-metrics", "{{ $value | humanize }}", "60").Replace(rule.Annotations["description"]),
	}
	firing := []any{map[string]any{
		"exp_labels":      map[string]string{"job": "echelon-metrics", "severity": rule.Labels["severity"]},
		"exp_annotations": annotations,
	}}
	none := []any{}
	check := alertCheck(name)
	tests := ruleTests(
		map[string]any{ // refused for 50 minutes, then admitted
			"interval":        "1m",
			"input_series":    []any{map[string]string{"series": series, "values": "0+12x50 600x30"}},
			"alert_rule_test": []any{check("20m", none), check("45m", firing), check("60m", none)},
		},
		map[string]any{ // refused for 20 minutes: the other zone came back
			"interval":        "1m",
			"input_series":    []any{map[string]string{"series": series, "values": "0+12x20 240x60"}},
			"alert_rule_test": []any{check("25m", none), check("33m", none), check("60m", none)},
		},
	)
	promtoolTest(t, promtool, rules, tests)
}

// alertCheck returns the promtool check of alert name's alerts at a minute.
func alertCheck(name string) func(minute string, exp []any) map[string]any {
	return func(minute string, exp []any) map[string]any {
		return map[string]any{"eval_time": minute, "alertname": name, "exp_alerts": exp}
	}
}

// ruleTests is a promtool tests.yaml of cases, on rules.yaml, evaluated
// every minute.
func ruleTests(cases ...any) map[string]any {
	return map[string]any{"rule_files": []string{"rules.yaml"}, "evaluation_interval": "1m", "tests": cases}
}

// renderedAlert is the rendered alert name, with every rendered rule.
func renderedAlert(t *testing.T, name string) (alertRule, []alertRule) {
	t.Helper()
	rules := renderedAlerts(t, "--set", "prometheusRule.enabled=true")
	for _, r := range rules {
		if r.Alert == name {
			return r, rules
		}
	}
	t.Fatalf("%s is not rendered", name)
	return alertRule{}, nil
}

// promtoolTest runs promtool's rule unit tests (tests, a tests.yaml
// document reading rules.yaml) on rules.
func promtoolTest(t *testing.T, promtool string, rules []alertRule, tests map[string]any) {
	t.Helper()
	dir := t.TempDir()
	writeYAML(t, filepath.Join(dir, "rules.yaml"), map[string]any{
		"groups": []any{map[string]any{"name": "echelon", "rules": rules}},
	})
	writeYAML(t, filepath.Join(dir, "tests.yaml"), tests)
	cmd := exec.Command(promtool, "test", "rules", "tests.yaml")
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("promtool test rules: %v\n%s", err, out)
	}
}

func writeYAML(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, raw, 0o600); err != nil {
		t.Fatal(err)
	}
}

// promtoolBinary finds promtool beside the Prometheus the e2e tests use: the
// directory of $ECHELON_PROMETHEUS, else bin/prometheus-<version>/ with the
// version hack/prometheus.sh pins. A missing promtool fails the test.
func promtoolBinary(t *testing.T) string {
	t.Helper()
	var path string
	if p := os.Getenv("ECHELON_PROMETHEUS"); p != "" {
		path = filepath.Join(filepath.Dir(p), "promtool")
	} else {
		f, err := os.Open(filepath.Join(repoRoot, "hack", "prometheus.sh"))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		version := regexp.MustCompile(`^PROMETHEUS_VERSION="?([^"\s]+)"?\s*$`)
		for s := bufio.NewScanner(f); s.Scan(); {
			if m := version.FindStringSubmatch(s.Text()); m != nil {
				path = filepath.Join(repoRoot, "bin", "prometheus-"+m[1], "promtool")
				break
			}
		}
		if path == "" {
			t.Fatal("hack/prometheus.sh pins no PROMETHEUS_VERSION")
		}
	}
	if !isExecutable(path) {
		t.Fatalf("no promtool at %s: run `make prometheus`, or point ECHELON_PROMETHEUS at a prometheus with promtool beside it", path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

// TestNotificationsFailingFires runs the rendered EchelonNotificationsFailing
// through promtool: it fires for a receiver whose every attempt fails for
// half an hour, stays quiet for one that fails now and then but delivers,
// and fires for a message given up after its last retry.
func TestNotificationsFailingFires(t *testing.T) {
	t.Parallel()
	promtool := promtoolBinary(t)
	const name = "EchelonNotificationsFailing"
	rule, rules := renderedAlert(t, name)
	series := func(result string) string {
		return `echelon_notifications_total{namespace="mimir", rolloutgroup="ingester", receiver="slack", event="Started", result="` + result + `", job="echelon-metrics"}`
	}
	labels := map[string]string{"namespace": "mimir", "rolloutgroup": "ingester", "receiver": "slack", "severity": rule.Labels["severity"]}
	replace := strings.NewReplacer("{{ $labels.namespace }}", "mimir", "{{ $labels.rolloutgroup }}", "ingester", "{{ $labels.receiver }}", "slack")
	firing := []any{map[string]any{"exp_labels": labels, "exp_annotations": map[string]string{
		"summary": replace.Replace(rule.Annotations["summary"]), "description": replace.Replace(rule.Annotations["description"]),
		"runbook_url": rule.Annotations["runbook_url"],
	}}}
	none := []any{}
	check := alertCheck(name)
	tests := ruleTests(
		map[string]any{ // every attempt fails for 40 minutes (one a minute once backed off)
			"interval": "1m",
			"input_series": []any{
				map[string]string{"series": series("failed"), "values": "0+1x40"},
				map[string]string{"series": series("delivered"), "values": "5x40"},
			},
			"alert_rule_test": []any{check("10m", none), check("35m", firing)},
		},
		map[string]any{ // a failure every 5 minutes, deliveries in between
			"interval": "1m",
			"input_series": []any{
				map[string]string{"series": series("failed"), "values": "0 0 0 0 0 1 1 1 1 1 2 2 2 2 2 3 3 3 3 3 4 4 4 4 4 5 5 5 5 5 6 6 6 6 6 7 7 7 7 7"},
				map[string]string{"series": series("delivered"), "values": "0+2x40"},
			},
			"alert_rule_test": []any{check("20m", none), check("39m", none)},
		},
		map[string]any{ // a message given up
			"interval": "1m",
			"input_series": []any{
				map[string]string{"series": series("dropped"), "values": "0x5 1x40"},
				map[string]string{"series": series("delivered"), "values": "0+2x45"},
			},
			"alert_rule_test": []any{check("3m", none), check("20m", firing)},
		},
	)
	promtoolTest(t, promtool, rules, tests)
}
