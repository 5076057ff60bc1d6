//go:build !linux

/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"fmt"
	"os"
	"syscall"
)

// Outside Linux there is no parent-death signal: components are still stopped by
// Stop, but survive a test binary that is killed.

func parentDeathSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

// parentDeathLauncher links path to target so that envtest finds the binaries
// where it does on Linux.
func parentDeathLauncher(path, target string) error {
	if err := os.Symlink(target, path); err != nil {
		return fmt.Errorf("link %s: %w", target, err)
	}
	return nil
}
