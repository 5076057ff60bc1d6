/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Command image builds the echelon container image without a container engine:
// it cross-compiles the operator (static, CGO off) for each platform, puts the
// binary alone in a layer on an empty base, and writes a multi-architecture OCI
// image layout, optionally archived into one tar file.
//
// The build is reproducible: the same source, version, revision, Go toolchain
// and --source-date-epoch give the same digest, because every timestamp is the
// epoch, file modes and owners are fixed, the Go build uses -trimpath and no VCS
// stamping, and the layout is written in a fixed order.
//
//	go -C hack/image run . --source=. --layout=bin/image --archive=bin/echelon-image.oci.tar
package main

import (
	"flag"
	"fmt"
	"os"
	"strings"
)

func main() {
	var cfg buildConfig
	var platforms string
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&cfg.source, "source", ".", "Root of the echelon repository (holds go.mod, main.go and charts/echelon).")
	fs.StringVar(&cfg.layout, "layout", "", "Directory to write the OCI image layout to; replaced if it exists. Required.")
	fs.StringVar(&cfg.archive, "archive", "", "Also write the layout as one tar file here (an OCI archive).")
	fs.StringVar(&platforms, "platforms", strings.Join(defaultPlatforms, ","), "Comma-separated os/arch pairs to build.")
	fs.StringVar(&cfg.version, "version", "", "Version of the image and of `echelon --version`; default: appVersion of charts/echelon/Chart.yaml.")
	fs.StringVar(&cfg.revision, "revision", "", "Source revision for the label and `echelon --version`; default: the git commit of --source, else \"unknown\".")
	fs.StringVar(&cfg.repository, "repository", defaultRepository, "Repository the image is named after (io.containerd.image.name annotation).")
	fs.StringVar(&cfg.epoch, "source-date-epoch", os.Getenv("SOURCE_DATE_EPOCH"), "Unix time of every timestamp in the image; default: $SOURCE_DATE_EPOCH, else the commit time of --source, else 0.")
	fs.StringVar(&cfg.goBin, "go", "go", "The go command that compiles the operator.")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() > 0 {
		fail(fmt.Errorf("unexpected arguments %v", fs.Args()))
	}
	if cfg.layout == "" {
		fail(fmt.Errorf("--layout is required"))
	}
	var err error
	if cfg.platforms, err = parsePlatforms(platforms); err != nil {
		fail(err)
	}
	if err := cfg.resolveDefaults(); err != nil {
		fail(err)
	}
	digest, err := build(cfg)
	if err != nil {
		fail(err)
	}
	fmt.Printf("%s:%s@%s\n", cfg.repository, cfg.version, digest)
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "image: %v\n", err)
	os.Exit(1)
}
