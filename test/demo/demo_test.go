/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/test/controlplane"
)

// demoTimeout bounds a whole run: a warm start takes about a minute.
const demoTimeout = 8 * time.Minute

var (
	completeRow = regexp.MustCompile(`^\s+\+\d+\.\ds\s+ingester\s+Complete\s+30/30\s`)
	logDirLine  = regexp.MustCompile(`Component logs: (\S+)/logs`)
	// logLine matches the line starts of klog, logfmt and JSON logs, which must
	// stay in the log files.
	logLine = regexp.MustCompile(`^[IWEF]\d{4} |level=|"level":|^\{"`)
)

// TestDemoRollsOutAndExits runs the demo as `make demo` does, with
// --exit-when-complete, and checks what the user sees: the group Complete
// again after the template change, a clean terminal, and nothing left running.
func TestDemoRollsOutAndExits(t *testing.T) {
	if _, err := controlplane.FindAssets(); err != nil {
		if errors.Is(err, controlplane.ErrAssetsMissing) && os.Getenv(controlplane.SkipEnv) == "1" {
			t.Skipf("skipping: %v (%s=1)", err, controlplane.SkipEnv)
		}
		t.Fatal(err)
	}
	binary := filepath.Join(t.TempDir(), "demo")
	if out, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build ./test/demo: %v\n%s", err, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), demoTimeout)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, binary, "--exit-when-complete")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// Every process the demo starts inherits this marker, by which the test
	// finds any of them still running afterwards.
	marker := fmt.Sprintf("ECHELON_DEMO_TEST_RUN=%d-%d", os.Getpid(), time.Now().UnixNano())
	cmd.Env = append(os.Environ(), marker)
	began := time.Now()
	err := cmd.Run()
	t.Logf("demo ran for %s; its output:\n%s", time.Since(began).Round(time.Second), stdout.String())
	if err != nil {
		t.Fatalf("demo: %v\nstderr:\n%s", err, stderr.String())
	}
	if stderr.Len() > 0 {
		t.Errorf("demo wrote to stderr, which should stay clean:\n%s", stderr.String())
	}

	lines := strings.Split(stdout.String(), "\n")
	changed := -1
	for i, l := range lines {
		if strings.Contains(l, "Changing the image of the three StatefulSets") {
			changed = i
		}
		if logLine.MatchString(l) {
			t.Errorf("log line on the terminal: %q", l)
		}
	}
	if changed < 0 {
		t.Fatal("the demo never announced the template change")
	}
	completeAfterChange := false
	for _, l := range lines[changed:] {
		completeAfterChange = completeAfterChange || completeRow.MatchString(l)
	}
	if !completeAfterChange {
		t.Error("no `kubectl get rolloutgroups` row with phase Complete and 30/30 updated after the template change")
	}

	m := logDirLine.FindStringSubmatch(stdout.String())
	if m == nil {
		t.Fatal("the demo did not print where the component logs are")
	}
	assertNothingLeftRunning(t, marker, m[1])
}

// assertNothingLeftRunning checks that no process carrying the marker in its
// environment runs any more, and that the control plane's run directory is gone.
func assertNothingLeftRunning(t *testing.T, marker, runDir string) {
	t.Helper()
	environs, _ := filepath.Glob("/proc/[0-9]*/environ")
	for _, f := range environs {
		env, err := os.ReadFile(f)
		if err != nil || !slices.Contains(strings.Split(string(env), "\x00"), marker) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join(filepath.Dir(f), "cmdline"))
		t.Errorf("process %s still runs after the demo exited: %s", filepath.Base(filepath.Dir(f)), bytes.ReplaceAll(cmdline, []byte{0}, []byte(" ")))
	}
	if _, err := os.Stat(runDir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("run directory %s left behind (%v)", runDir, err)
	}
}
