/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A supervised component that exits on its own is started again, at most
// restarts times, each start said in its log; then its exit is final.
func TestSupervisedProcessRestartsOnItsOwnExit(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "crashes.log")
	p, err := startSupervised("crashes", "/bin/sh", []string{"-c", "echo ran; exit 3"}, nil, logPath, 2)
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the process is still supervised after 30 s; want its third exit final")
	}
	done, err := p.exited()
	if !done || err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Errorf("exited() = %v, %v; want the last exit, status 3", done, err)
	}
	data, _ := os.ReadFile(logPath)
	if runs, restarts := strings.Count(string(data), "ran\n"), strings.Count(string(data), "starting it again"); runs != 3 || restarts != 2 {
		t.Errorf("the log shows %d runs and %d restarts, want 3 and 2:\n%s", runs, restarts, data)
	}
}

// stop ends a supervised component for good: the exit it causes is not
// restarted.
func TestSupervisedProcessStopsForGood(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "sleeps.log")
	p, err := startSupervised("sleeps", "/bin/sh", []string{"-c", "echo ran; exec sleep 60"}, nil, logPath, 2)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.stop(); err != nil {
		t.Fatalf("stop: %v", err)
	}
	// stop returns once the supervising goroutine has ended: no start can
	// follow.
	data, _ := os.ReadFile(logPath)
	if strings.Contains(string(data), "starting it again") {
		t.Errorf("a stopped process was started again:\n%s", data)
	}
	if done, _ := p.exited(); !done {
		t.Error("exited() = false after stop")
	}
}
