/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package uninstall

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Exit codes of `echelon uninstall`.
const (
	exitOK     = 0
	exitFailed = 1
	exitUsage  = 2
)

const usage = `Usage: echelon uninstall --release-namespace NS --operator-pods SELECTOR [--namespaces A,B] [--lease NAME] [--certificate-secret NAME] [--timeout 2m]

Cleans up after the operator once it is gone; the Helm chart runs it as a
post-delete hook. It waits until no pod matches --operator-pods in
--release-namespace (a running operator would hold the partitions again), then:
  - hands back (removes) the partition of every StatefulSet labelled
    echelon.dev/partition-holder whose pods are all on its update revision,
    and keeps, saying why, the partition of one with a template change
    pending: handing it back would roll the zones that wait for the change
    at once;
  - removes the finalizer echelon.dev/partitions from every RolloutGroup;
  - deletes the leader election Lease and the self-signed certificates'
    Secret, when named.

Exit status: 0 when done, 1 when something failed (each failure is printed),
2 on a usage error.

Flags:
`

// Run runs `echelon uninstall` with args (those after "uninstall") against
// the cluster of cfg, and returns its exit status.
func Run(ctx context.Context, cfg func() (*rest.Config, error), scheme *runtime.Scheme, args []string, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("echelon uninstall", flag.ContinueOnError)
	fset.SetOutput(stderr)
	fset.Usage = func() {
		fmt.Fprint(stderr, usage)
		fset.PrintDefaults()
	}
	o := Options{Poll: time.Second}
	var namespaces, selector string
	fset.StringVar(&o.ReleaseNamespace, "release-namespace", "", "The namespace of the operator's pods, Lease and Secret (required).")
	fset.StringVar(&selector, "operator-pods", "", "The label selector of the operator's pods (required).")
	fset.StringVar(&namespaces, "namespaces", "", "The namespaces the operator watched, comma-separated; empty for every namespace.")
	fset.StringVar(&o.Lease, "lease", "", "The operator's leader election Lease to delete.")
	fset.StringVar(&o.CertificateSecret, "certificate-secret", "", "The Secret of the operator's self-signed webhook certificates to delete.")
	fset.DurationVar(&o.Timeout, "timeout", 2*time.Minute, "How long to wait for the operator's pods to be gone.")
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	var problems []string
	if fset.NArg() > 0 {
		problems = append(problems, fmt.Sprintf("unexpected arguments: %v", fset.Args()))
	}
	if o.ReleaseNamespace == "" {
		problems = append(problems, "--release-namespace is required")
	}
	sel, err := labels.Parse(selector)
	switch {
	case err != nil:
		problems = append(problems, fmt.Sprintf("--operator-pods: %v", err))
	case sel.Empty():
		problems = append(problems, "--operator-pods is required: the operator's pods must be gone before anything changes")
	}
	if o.Timeout <= 0 {
		problems = append(problems, "--timeout must be positive")
	}
	if len(problems) > 0 {
		fmt.Fprintf(stderr, "echelon uninstall: %s\n", strings.Join(problems, "; "))
		return exitUsage
	}
	o.OperatorPods = sel
	for _, ns := range strings.Split(namespaces, ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			o.Namespaces = append(o.Namespaces, ns)
		}
	}

	rc, err := cfg()
	if err != nil {
		fmt.Fprintf(stderr, "echelon uninstall: load kubeconfig: %v\n", err)
		return exitFailed
	}
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		fmt.Fprintf(stderr, "echelon uninstall: %v\n", err)
		return exitFailed
	}
	if err := Clean(ctx, c, o, stdout); err != nil {
		fmt.Fprintf(stderr, "echelon uninstall: %v\n", err)
		return exitFailed
	}
	return exitOK
}
