/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

const (
	// AssetsEnv names a directory that holds every binary of the control plane
	// side by side (kube-apiserver, kube-controller-manager, kube-scheduler,
	// kubectl, etcd, kwok, helm). It replaces the versioned directories under bin/
	// built by `make test-assets`, e.g. for binaries built elsewhere.
	AssetsEnv = "ECHELON_TEST_ASSETS"

	// SkipEnv, set to 1, lets tests skip instead of fail when the binaries are
	// missing. It exists for quick local runs of other tests; CI never sets it,
	// so a missing build step cannot turn into silently skipped tests.
	SkipEnv = "ECHELON_SKIP_CONTROLPLANE"

	// modulePath identifies the repository root while walking up from the
	// working directory.
	modulePath = "github.com/echelon-operator/echelon"
)

// ErrAssetsMissing is wrapped by the errors of FindAssets and Start when a
// binary has not been built.
var ErrAssetsMissing = errors.New("test control plane binaries are missing: run `make test-assets`")

// Assets holds the absolute paths of the control plane binaries.
type Assets struct {
	KubeAPIServer         string
	KubeControllerManager string
	KubeScheduler         string
	Kubectl               string
	Etcd                  string
	Kwok                  string
	Helm                  string
}

// component is one pinned tool module under hack/tools and the binaries built
// from it, mirroring hack/test-assets.sh.
type component struct {
	tool     string // directory under hack/tools, and the prefix of the bin/ directory
	module   string // module whose required version names the bin/ directory
	binaries []string
}

var components = []component{
	{tool: "kubernetes", module: "k8s.io/kubernetes", binaries: []string{"kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl"}},
	{tool: "etcd", module: "go.etcd.io/etcd/server/v3", binaries: []string{"etcd"}},
	{tool: "kwok", module: "sigs.k8s.io/kwok", binaries: []string{"kwok"}},
	{tool: "helm", module: "helm.sh/helm/v4", binaries: []string{"helm"}},
}

// FindAssets locates the binaries built by `make test-assets`: in the directory
// named by ECHELON_TEST_ASSETS if set, otherwise in bin/<tool>-<version>/ of the
// repository, with each version read from hack/tools/<tool>/go.mod exactly as the
// build script does, so a version bump is never served a stale binary. Every
// missing binary is named in the returned error, which wraps ErrAssetsMissing.
func FindAssets() (*Assets, error) {
	paths := map[string]string{}
	if dir := os.Getenv(AssetsEnv); dir != "" {
		for _, c := range components {
			for _, b := range c.binaries {
				paths[b] = filepath.Join(dir, b)
			}
		}
	} else {
		root, err := RepoRoot()
		if err != nil {
			return nil, err
		}
		for _, c := range components {
			version, err := requiredVersion(filepath.Join(root, "hack", "tools", c.tool, "go.mod"), c.module)
			if err != nil {
				return nil, err
			}
			for _, b := range c.binaries {
				paths[b] = filepath.Join(root, "bin", c.tool+"-"+version, b)
			}
		}
	}

	var missing []string
	for _, c := range components {
		for _, b := range c.binaries {
			if info, err := os.Stat(paths[b]); err != nil || info.IsDir() || info.Mode()&0o111 == 0 {
				missing = append(missing, paths[b])
			}
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w; not found: %s", ErrAssetsMissing, strings.Join(missing, ", "))
	}
	return &Assets{
		KubeAPIServer:         paths["kube-apiserver"],
		KubeControllerManager: paths["kube-controller-manager"],
		KubeScheduler:         paths["kube-scheduler"],
		Kubectl:               paths["kubectl"],
		Etcd:                  paths["etcd"],
		Kwok:                  paths["kwok"],
		Helm:                  paths["helm"],
	}, nil
}

// PinnedVersion returns the version of module that hack/tools/<tool>/go.mod
// requires, the version `make test-assets` builds into bin/<...>-<version>.
func PinnedVersion(tool, module string) (string, error) {
	root, err := RepoRoot()
	if err != nil {
		return "", err
	}
	return requiredVersion(filepath.Join(root, "hack", "tools", tool, "go.mod"), module)
}

// RepoRoot returns the root of the Echelon repository, found by walking up from
// the working directory (a test's working directory is its package directory).
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find repository root: %w", err)
	}
	for {
		data, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && firstModuleLine(string(data)) == modulePath {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("find repository root: no go.mod of module %s above the working directory", modulePath)
		}
		dir = parent
	}
}

func firstModuleLine(gomod string) string {
	for line := range strings.Lines(gomod) {
		if fields := strings.Fields(line); len(fields) == 2 && fields[0] == "module" {
			return fields[1]
		}
	}
	return ""
}

// requiredVersion returns the version of module required by the go.mod at path.
// It reads the file line by line, like the build script, rather than resolving
// the module graph: only the pinned requirement matters here.
func requiredVersion(path, module string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("read pinned version of %s: %w", module, err)
	}
	defer f.Close()
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) >= 3 && fields[0] == "require" && fields[1] == module {
			return fields[2], nil
		}
		if len(fields) >= 2 && fields[0] == module && strings.HasPrefix(fields[1], "v") {
			return fields[1], nil
		}
	}
	if err := scanner.Err(); err != nil {
		return "", fmt.Errorf("read pinned version of %s: %w", module, err)
	}
	return "", fmt.Errorf("%s does not require %s", path, module)
}
