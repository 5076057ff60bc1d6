//go:build tools

// Package tools pins golangci-lint, and the Kube API Linter built into it as a
// module plugin, by version.
package tools

import (
	_ "github.com/golangci/golangci-lint/v2/cmd/golangci-lint"
	_ "sigs.k8s.io/kube-api-linter/cmd/golangci-lint-kube-api-linter"
)
