/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package command is `echelon migrate`: it reads manifests or a namespace,
// runs the migrate package's translation and writes what it gives.
package command

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/internal/migrate"
)

// Exit codes of `echelon migrate`.
const (
	exitOK = 0
	// exitFailed: nothing written (an unreadable input, an unreachable cluster).
	exitFailed = 1
	// exitUsage: a bad flag or argument.
	exitUsage = 2
	// exitUntranslated: written, but the report has errors: some keys were not
	// translated and stay on their objects.
	exitUntranslated = 3
)

const usage = `Usage: echelon migrate [-f FILE|DIR|-]... [--namespace NS] [--output-dir DIR] [--paused-groups] [--apply]

Translates the Grafana rollout-operator's labels, annotations and
ZoneAwarePodDisruptionBudgets into Echelon's RolloutGroups, ScalingPolicies,
DelayedDownscales and ZoneDisruptionBudgets. It changes nothing: it writes the
resources, a script of merge patches that removes the translated keys, and a
report of what it could not translate and why.

With -f it reads YAML or JSON streams (helm template, jsonnet output, kubectl
get -o yaml) from files, directories (every .yaml, .yml and .json under them)
or standard input (-); --namespace is then the namespace of objects without
one. Without -f it reads the namespace --namespace of the cluster of the
current kubeconfig context (get and list only), and with --apply
server-side applies the resources once a dry run of every one passes,
printing what each one changes. It never applies the patches.

Without --output-dir the resources go to standard output and the report to
standard error; with it, DIR/resources.yaml, DIR/patches.sh and
DIR/report.txt are written.

Exit status: 0 when everything was translated, 3 when the report has errors
(the rest is written), 1 when nothing could be read, 2 on a usage error.

Flags:
`

// stringList is a repeatable flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// Run runs `echelon migrate` with args (those after "migrate") and returns
// its exit status.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fset := flag.NewFlagSet("echelon migrate", flag.ContinueOnError)
	fset.SetOutput(stderr)
	var files stringList
	fset.Var(&files, "f", "A file, a directory or - (standard input) to read; repeatable.")
	fset.Var(&files, "filename", "The same as -f.")
	namespace := fset.String("namespace", "", "Without -f: the namespace to read from the cluster. With -f: the namespace of objects that have none.")
	kubeconfig := fset.String("kubeconfig", "", "Without -f: the kubeconfig to use (default: $KUBECONFIG, then ~/.kube/config).")
	outputDir := fset.String("output-dir", "", "Write resources.yaml, patches.sh and report.txt into this directory instead of standard output and standard error.")
	paused := fset.Bool("paused-groups", false, "Write every RolloutGroup with spec.paused: true, to check them before they roll.")
	doApply := fset.Bool("apply", false, "Without -f: server-side apply the resources (field manager echelon-migrate) after a dry run of all of them passes, printing what each changes. The patches are never applied.")
	fset.Usage = func() {
		fmt.Fprint(stderr, usage)
		fset.PrintDefaults()
	}
	if err := fset.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitUsage
	}
	if fset.NArg() > 0 {
		fmt.Fprintf(stderr, "echelon migrate: unexpected arguments: %v (files are given with -f)\n", fset.Args())
		return exitUsage
	}
	if *doApply && len(files) > 0 {
		fmt.Fprintln(stderr, "echelon migrate: --apply reads the namespace from the cluster: use it without -f")
		return exitUsage
	}
	if len(files) == 0 && *namespace == "" {
		fmt.Fprintln(stderr, "echelon migrate: give manifests with -f, or a namespace of the cluster with --namespace")
		return exitUsage
	}

	var in migrate.Input
	var c client.Client
	var err error
	if len(files) > 0 {
		err = readFiles(&in, files, *namespace, stdin)
	} else {
		c, err = newClient(*kubeconfig)
		if err == nil {
			err = readCluster(ctx, c, &in, *namespace, stderr)
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "echelon migrate: %v\n", err)
		return exitFailed
	}
	res := migrate.Translate(in, migrate.Options{PausedGroups: *paused})
	if *doApply {
		err = applyResult(ctx, c, &res, *outputDir, stdout, stderr)
	} else {
		err = write(&res, *outputDir, stdout, stderr)
	}
	if err != nil {
		fmt.Fprintf(stderr, "echelon migrate: %v\n", err)
		return exitFailed
	}
	if res.HasErrors() {
		return exitUntranslated
	}
	return exitOK
}

// applyResult applies the resources, then writes the patches and the
// report as without --apply (the resources to the output directory only).
func applyResult(ctx context.Context, c client.Client, res *migrate.Result, dir string, stdout, stderr io.Writer) error {
	objs, err := res.Objects()
	if err != nil {
		return err
	}
	if err := apply(ctx, c, objs, stdout); err != nil {
		return err
	}
	if dir == "" {
		return res.WriteReport(stderr)
	}
	return write(res, dir, io.Discard, stderr)
}

// readFiles decodes every file named, and every manifest under every
// directory named, in name order.
func readFiles(in *migrate.Input, names []string, namespace string, stdin io.Reader) error {
	for _, name := range names {
		if name == "-" {
			if err := in.Decode(stdin, namespace); err != nil {
				return fmt.Errorf("standard input: %w", err)
			}
			continue
		}
		var paths []string
		err := filepath.WalkDir(name, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			// A file named on the command line is read whatever its name.
			if path == name || slices.Contains([]string{".yaml", ".yml", ".json"}, filepath.Ext(path)) {
				paths = append(paths, path)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, path := range paths {
			if err := decodeFile(in, path, namespace); err != nil {
				return err
			}
		}
	}
	return nil
}

func decodeFile(in *migrate.Input, path, namespace string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := in.Decode(f, namespace); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// write writes the resources, the patches and the report.
func write(res *migrate.Result, dir string, stdout, stderr io.Writer) error {
	if dir == "" {
		if err := res.WriteResources(stdout); err != nil {
			return err
		}
		return res.WriteReport(stderr)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for name, writeTo := range map[string]func(io.Writer) error{
		"resources.yaml": res.WriteResources,
		"patches.sh":     res.WritePatches,
		"report.txt":     res.WriteReport,
	} {
		if err := writeFile(filepath.Join(dir, name), writeTo); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "echelon migrate: wrote %s/resources.yaml, patches.sh and report.txt\n", dir)
	return res.WriteReport(stderr)
}

func writeFile(path string, writeTo func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := writeTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
