/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Command echelon runs the Echelon operator: it rolls out and scales groups of
// StatefulSets declared by RolloutGroup resources.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"runtime"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/echelon-operator/echelon/internal/migrate/command"
	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/internal/options"
	"github.com/echelon-operator/echelon/internal/uninstall"
)

// version and revision are set at link time by the image build (hack/image and
// the Dockerfile: -X main.version=... -X main.revision=...), so that a running
// operator can say which release it is.
var (
	version  = "dev"
	revision = "unknown"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "migrate" {
		os.Exit(command.Run(ctrl.SetupSignalHandler(), os.Args[2:], os.Stdin, os.Stdout, os.Stderr))
	}
	if len(os.Args) > 1 && os.Args[1] == "uninstall" {
		os.Exit(uninstall.Run(ctrl.SetupSignalHandler(), ctrl.GetConfig, operator.NewScheme(), os.Args[2:], os.Stdout, os.Stderr))
	}
	opts := options.Default()
	fs := flag.CommandLine
	fs.Init(os.Args[0], flag.ContinueOnError)
	opts.BindFlags(fs) // --kubeconfig is registered by controller-runtime
	printVersion := fs.Bool("version", false, "Print the version of echelon and exit.")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2) // flag already printed the error and the usage
	}
	if *printVersion {
		fmt.Printf("echelon %s (revision %s, %s, %s/%s)\n", version, revision, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		os.Exit(0)
	}
	if fs.NArg() > 0 {
		fail(2, fmt.Errorf("unexpected arguments: %v", fs.Args()))
	}
	if err := opts.Validate(); err != nil {
		fail(2, err)
	}
	ctrl.SetLogger(opts.NewLogger())

	cfg, err := ctrl.GetConfig()
	if err != nil {
		fail(1, fmt.Errorf("load kubeconfig: %w", err))
	}
	if err := operator.Run(ctrl.SetupSignalHandler(), cfg, opts); err != nil {
		fail(1, err)
	}
}

// fail prints a user-facing error on one line per problem and exits.
func fail(code int, err error) {
	fmt.Fprintf(os.Stderr, "echelon: %v\n", err)
	os.Exit(code)
}
