//go:build tools

// Package tools pins helm by version.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
