/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"context"
	"errors"
	"os"
	"sync"
)

// Shared is one control plane for all the tests of a test binary, started by
// the first test that asks for it, each test then working in its own
// namespace. TestMain stops it:
//
//	var apiServer = controlplane.Shared{Options: controlplane.Options{APIServerOnly: true}}
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		_ = apiServer.Stop()
//		os.Exit(code)
//	}
type Shared struct {
	Options Options

	once sync.Once
	cp   *ControlPlane
	err  error
}

// Get returns the control plane, starting it on the first call. Missing
// binaries skip the test when SkipEnv=1; any other failure fails it, and every
// later test with the same error.
func (s *Shared) Get(t TB) *ControlPlane {
	t.Helper()
	s.once.Do(func() { s.cp, s.err = Start(context.Background(), s.Options) })
	if s.err != nil {
		if errors.Is(s.err, ErrAssetsMissing) && os.Getenv(SkipEnv) == "1" {
			t.Skipf("skipping: %v", s.err)
		}
		t.Fatalf("%v", s.err)
	}
	return s.cp
}

// Stop stops the control plane if one was started.
func (s *Shared) Stop() error {
	if s.cp == nil {
		return nil
	}
	return s.cp.Stop()
}
