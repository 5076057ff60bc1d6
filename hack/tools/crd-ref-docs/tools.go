//go:build tools

// Package tools pins crd-ref-docs by version.
package tools

import (
	_ "github.com/elastic/crd-ref-docs"
)
