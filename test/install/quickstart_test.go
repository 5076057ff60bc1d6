/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package install

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/controlplane"
	"github.com/echelon-operator/echelon/test/installed"
)

const (
	quickStartDoc     = "docs/install.md"
	quickStartSection = "## Quick start"
	// commandTimeout bounds one code block; the longest waits a few seconds here.
	commandTimeout = 10 * time.Minute
)

// TestQuickStart runs the shell blocks of the quick start in docs/install.md
// as a newcomer would paste them, one after the other, from the repository
// root, with kubectl and helm (the pinned ones) on the PATH and a kubeconfig
// for the test control plane. Between blocks it does what the cluster would:
// once the chart's Deployment exists, it starts the operator from it.
func TestQuickStart(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the quick start against a real control plane; skipped with -short")
	}
	root, err := controlplane.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	blocks := shellBlocks(t, filepath.Join(root, quickStartDoc), quickStartSection)
	if len(blocks) < 3 {
		t.Fatalf("%s %q has %d sh blocks; want the install, the workload and the rollout", quickStartDoc, quickStartSection, len(blocks))
	}
	cp := controlplane.StartForTest(t, controlplane.Options{Scheme: installed.Scheme()})
	c := cp.Client()

	// What the user has: kubectl and helm on the PATH, a kubeconfig, a home.
	bin := t.TempDir()
	for name, path := range map[string]string{"kubectl": cp.Assets().Kubectl, "helm": cp.Assets().Helm} {
		if err := os.Symlink(path, filepath.Join(bin, name)); err != nil {
			t.Fatal(err)
		}
	}
	home := t.TempDir()
	env := []string{
		"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home,
		"KUBECONFIG=" + cp.Kubeconfig(),
		"HELM_CACHE_HOME=" + filepath.Join(home, "cache"),
		"HELM_CONFIG_HOME=" + filepath.Join(home, "config"),
		"HELM_DATA_HOME=" + filepath.Join(home, "data"),
	}

	var op *installed.Operator
	for i, block := range blocks {
		ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
		cmd := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", block)
		cmd.Dir = root
		cmd.Env = env
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		cancel()
		t.Logf("block %d:\n%s\n--- output ---\n%s", i+1, block, out.String())
		if err != nil {
			logs := ""
			if op != nil {
				logs = op.LogTail(40)
			}
			t.Fatalf("block %d of the quick start failed: %v\n%s", i+1, err, logs)
		}
		// The kubelet's part: run the operator the chart installed.
		if op == nil {
			var deploy appsv1.Deployment
			if err := c.Get(context.Background(), client.ObjectKey{Namespace: operatorNamespace, Name: operatorName}, &deploy); err == nil {
				op = installed.Run(t, cp, operatorNamespace, operatorName)
			}
		}
	}
	if op == nil {
		t.Fatalf("the quick start never installed Deployment %s/%s", operatorNamespace, operatorName)
	}
}

// shellBlocks returns the ```sh code blocks of one section of a Markdown file,
// up to the next heading of the same level.
func shellBlocks(t *testing.T, file, section string) []string {
	t.Helper()
	raw, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	level := strings.SplitN(section, " ", 2)[0] + " "
	var blocks []string
	var cur *strings.Builder
	in := false
	for line := range strings.Lines(string(raw)) {
		trimmed := strings.TrimRight(line, "\n")
		switch {
		case cur != nil && trimmed == "```":
			blocks = append(blocks, cur.String())
			cur = nil
		case cur != nil:
			cur.WriteString(line)
		case trimmed == section:
			in = true
		case in && strings.HasPrefix(trimmed, level):
			in = false
		case in && trimmed == "```sh":
			cur = &strings.Builder{}
		}
	}
	if !in && len(blocks) == 0 {
		t.Fatalf("%s has no section %q", file, section)
	}
	return blocks
}
