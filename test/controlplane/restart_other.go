//go:build !linux

/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"context"
	"errors"
)

// RestartAPIServer finds kube-apiserver's command line in /proc, which only
// Linux has: elsewhere it reports that it cannot restart it.
func (cp *ControlPlane) RestartAPIServer(context.Context) error {
	return errors.New("restart kube-apiserver: supported on Linux only")
}
