/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package command

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func run(t *testing.T, stdin string, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr strings.Builder
	code := Run(context.Background(), args, strings.NewReader(stdin), &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestRun(t *testing.T) {
	const sts = "apiVersion: apps/v1\nkind: StatefulSet\nmetadata: {name: ingester-zone-a, labels: {rollout-group: ingester}}\nspec: {updateStrategy: {type: OnDelete}}\n"

	t.Run("stdin to stdout, namespace from the flag", func(t *testing.T) {
		code, out, errOut := run(t, sts, "-f", "-", "--namespace", "mimir")
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		if !strings.Contains(out, "kind: RolloutGroup") || !strings.Contains(out, "namespace: mimir") {
			t.Errorf("want a RolloutGroup in mimir, got:\n%s", out)
		}
		if !strings.HasPrefix(errOut, "# 1 RolloutGroups") {
			t.Errorf("want the report on stderr, got %q", errOut)
		}
	})

	t.Run("a directory into an output directory, with an untranslated key", func(t *testing.T) {
		in := t.TempDir()
		sub := filepath.Join(in, "templates")
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		bad := strings.Replace(sts, "labels:", "annotations: {grafana.com/rollout-something-new: x}, labels:", 1)
		for name, body := range map[string]string{"a.yaml": bad, "notes.txt": "not yaml: [", "templates/b.yml": strings.ReplaceAll(sts, "zone-a", "zone-b")} {
			if err := os.WriteFile(filepath.Join(in, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		out := filepath.Join(t.TempDir(), "out")
		code, stdout, errOut := run(t, "", "-f", in, "--output-dir", out)
		if code != exitUntranslated {
			t.Fatalf("want exit %d for the unknown annotation, got %d: %s", exitUntranslated, code, errOut)
		}
		if stdout != "" {
			t.Errorf("want nothing on stdout with --output-dir, got %q", stdout)
		}
		resources, _ := os.ReadFile(filepath.Join(out, "resources.yaml"))
		patches, _ := os.ReadFile(filepath.Join(out, "patches.sh"))
		report, _ := os.ReadFile(filepath.Join(out, "report.txt"))
		if !strings.Contains(string(resources), "- name: ingester-zone-a\n  - name: ingester-zone-b\n") {
			t.Errorf("want both members from both files, got:\n%s", resources)
		}
		if !strings.Contains(string(patches), `"rollout-group":null`) || strings.Contains(string(patches), "rollout-something-new") {
			t.Errorf("want rollout-group removed and the unknown key kept, got:\n%s", patches)
		}
		if !strings.Contains(string(report), "error: StatefulSet /ingester-zone-a grafana.com/rollout-something-new: unknown") {
			t.Errorf("want the unknown key reported, got:\n%s", report)
		}
	})

	for _, tc := range []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no input", nil, exitUsage, "give manifests with -f"},
		{"a stray argument", []string{"-f", "-", "x.yaml"}, exitUsage, "unexpected arguments"},
		{"--apply with files", []string{"-f", "-", "--apply"}, exitUsage, "--apply reads the namespace from the cluster"},
		{"a missing file", []string{"-f", "/nonexistent/x.yaml"}, exitFailed, "no such file"},
		{"broken YAML", []string{"-f", "-"}, exitFailed, "standard input: document 1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, errOut := run(t, "metadata: [", tc.args...)
			if code != tc.code || !strings.Contains(errOut, tc.want) {
				t.Errorf("want exit %d and %q, got %d: %s", tc.code, tc.want, code, errOut)
			}
		})
	}
}

func TestLineDiff(t *testing.T) {
	got := lineDiff("spec:\n  maxUnavailable: 1\n  paused: true\n", "spec:\n  maxUnavailable: 2\n  paused: true\n")
	want := "  spec:\n-   maxUnavailable: 1\n+   maxUnavailable: 2\n    paused: true\n"
	if got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
