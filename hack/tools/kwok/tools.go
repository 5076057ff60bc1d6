//go:build tools

// Package tools pins kwok by version.
package tools

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
