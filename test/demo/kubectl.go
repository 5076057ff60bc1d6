/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/echelon-operator/echelon/test/controlplane"
)

// indent is how far the demo indents what commands print, under the step lines.
const indent = "      "

// kubectl runs the real kubectl as the administrator, so that the user sees the
// printer columns exactly as on a cluster.
type kubectl struct {
	path       string
	kubeconfig string
	cacheDir   string // keeps discovery caches out of the user's ~/.kube
}

func newKubectl(cp *controlplane.ControlPlane) *kubectl {
	return &kubectl{
		path:       cp.Assets().Kubectl,
		kubeconfig: cp.Kubeconfig(),
		cacheDir:   filepath.Join(cp.Dir(), "kubectl-cache"),
	}
}

// run returns what kubectl prints, stdout and stderr together.
func (k *kubectl) run(ctx context.Context, args ...string) (string, error) {
	full := append([]string{"--kubeconfig=" + k.kubeconfig, "--cache-dir=" + k.cacheDir}, args...)
	cmd := exec.CommandContext(ctx, k.path, full...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return out.String(), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return out.String(), nil
}

// show prints the command as a user would type it, then its output, indented.
func (k *kubectl) show(ctx context.Context, w io.Writer, args ...string) {
	fmt.Fprintf(w, "%s$ kubectl %s\n", indent, strings.Join(args, " "))
	out, err := k.run(ctx, args...)
	if err != nil {
		fmt.Fprintf(w, "%s(%v)\n", indent, err)
		return
	}
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		fmt.Fprintf(w, "%s%s\n", indent, l)
	}
}

// showEvents prints the Events of an object. A rollout's Events are one
// sequence: RolloutStarted, one PodsRolled per batch naming its pods, a
// MemberComplete per StatefulSet, RolloutComplete.
func (k *kubectl) showEvents(ctx context.Context, w io.Writer, ns, object string) {
	k.show(ctx, w, "events", "-n", ns, "--for", object)
}
