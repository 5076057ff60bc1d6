/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// What every echelon image is. The Dockerfile at the repository root builds the
// same: test/image checks that the two agree.
const (
	defaultRepository = "ghcr.io/echelon-operator/echelon"
	sourceURL         = "https://github.com/echelon-operator/echelon"
	license           = "Apache-2.0"
	// binaryPath is the only file of the image besides /tmp.
	binaryPath = "echelon"
	// nonRootUser is the conventional "nonroot" user and group of distroless
	// images; the chart runs the pod with the same numeric IDs.
	nonRootUser = "65532:65532"
)

var defaultPlatforms = []string{"linux/amd64", "linux/arm64"}

type buildConfig struct {
	source, layout, archive string
	platforms               []v1.Platform
	version, revision       string
	repository              string
	epoch                   string
	goBin                   string

	created time.Time
}

func parsePlatforms(s string) ([]v1.Platform, error) {
	var out []v1.Platform
	for _, p := range strings.Split(s, ",") {
		os, arch, ok := strings.Cut(strings.TrimSpace(p), "/")
		if !ok || os == "" || arch == "" || strings.Contains(arch, "/") {
			return nil, fmt.Errorf("--platforms: %q is not os/arch", p)
		}
		out = append(out, v1.Platform{OS: os, Architecture: arch})
	}
	return out, nil
}

// resolveDefaults fills the version from the chart, the revision and the time
// from git, so that `make image` needs no arguments and tags the image with the
// version the chart deploys.
func (c *buildConfig) resolveDefaults() error {
	abs, err := filepath.Abs(c.source)
	if err != nil {
		return err
	}
	c.source = abs
	if _, err := os.Stat(filepath.Join(c.source, "main.go")); err != nil {
		return fmt.Errorf("--source=%s is not the echelon repository: %w", c.source, err)
	}
	if c.version == "" {
		if c.version, err = chartAppVersion(filepath.Join(c.source, "charts", "echelon", "Chart.yaml")); err != nil {
			return err
		}
	}
	if c.revision == "" {
		c.revision = git(c.source, "rev-parse", "HEAD")
		if c.revision == "" {
			c.revision = "unknown"
		}
	}
	if c.epoch == "" {
		c.epoch = git(c.source, "log", "-1", "--format=%ct")
		if c.epoch == "" {
			c.epoch = "0"
		}
	}
	sec, err := strconv.ParseInt(c.epoch, 10, 64)
	if err != nil || sec < 0 {
		return fmt.Errorf("source date epoch %q: want Unix seconds", c.epoch)
	}
	c.created = time.Unix(sec, 0).UTC()
	return nil
}

// chartAppVersion reads appVersion from Chart.yaml without a YAML library: the
// line is `appVersion: "x.y.z"` (quotes optional).
func chartAppVersion(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read the default version: %w", err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if v, ok := strings.CutPrefix(s.Text(), "appVersion:"); ok {
			v = strings.Trim(strings.TrimSpace(v), `"'`)
			if v == "" {
				break
			}
			return v, nil
		}
	}
	return "", fmt.Errorf("%s has no appVersion", path)
}

func git(dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

// labels go into each image's config and, as annotations, on the manifests and
// the index, where registries show them.
func (c *buildConfig) labels() map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "echelon",
		"org.opencontainers.image.description": "Echelon rolls out groups of StatefulSets, one StatefulSet at a time.",
		"org.opencontainers.image.source":      sourceURL,
		"org.opencontainers.image.url":         sourceURL,
		"org.opencontainers.image.version":     c.version,
		"org.opencontainers.image.revision":    c.revision,
		"org.opencontainers.image.licenses":    license,
		"org.opencontainers.image.created":     c.created.Format(time.RFC3339),
	}
}
