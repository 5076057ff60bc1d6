//go:build tools

// Package tools pins etcd by version.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
)
