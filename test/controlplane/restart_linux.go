/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// RestartAPIServer stops kube-apiserver with SIGTERM, as a control plane
// upgrade does, and starts it again with the same command line: the same
// port, certificates and etcd, so every client reconnects to the same
// address. It returns once the new process answers /readyz. Only the process
// that started the control plane can restart it.
//
// envtest runs kube-apiserver and offers no restart that keeps its
// certificates (its Stop discards the client CA every user's certificate is
// signed by), so the process is found by its command line and started again
// here; Stop then stops the new one with the others.
func (cp *ControlPlane) RestartAPIServer(ctx context.Context) error {
	if cp.attached {
		return errors.New("restart kube-apiserver: only the process that started the control plane can")
	}
	u, err := url.Parse(cp.admin.Config.Host)
	if err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	pid, argv, err := findProcess("kube-apiserver", "--secure-port="+u.Port())
	if err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		return fmt.Errorf("restart kube-apiserver: stop pid %d: %w", pid, err)
	}
	deadline := time.Now().Add(stopGracePeriod)
	for processAlive(pid) {
		if time.Now().After(deadline) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(50 * time.Millisecond)
	}
	cp.mu.Lock()
	cp.apiServerRestarts++
	name := fmt.Sprintf("kube-apiserver-%d", cp.apiServerRestarts)
	cp.mu.Unlock()
	p, err := startProcess(name, argv[0], argv[1:], nil, cp.logPath(name))
	if err != nil {
		return fmt.Errorf("restart kube-apiserver: %w", err)
	}
	cp.procs = append(cp.procs, p)
	cs, err := kubernetes.NewForConfig(cp.Config())
	if err != nil {
		return err
	}
	return cp.waitFor(ctx, func(ctx context.Context) (bool, error) {
		if done, err := p.exited(); done {
			return false, fmt.Errorf("restarted kube-apiserver: %w", err)
		}
		body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	})
}

// processAlive reports whether pid is a live process (not gone, not a zombie).
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the command name in parentheses.
	if i := bytes.LastIndexByte(stat, ')'); i >= 0 && i+2 < len(stat) {
		return stat[i+2] != 'Z'
	}
	return true
}

// findProcess finds the one live process whose executable is named binary
// and whose command line has arg, and returns its pid and command line.
func findProcess(binary, arg string) (int, []string, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscanf(e.Name(), "%d", &pid); err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(argv[0]) != binary || !processAlive(pid) {
			continue
		}
		for _, a := range argv[1:] {
			if a == arg {
				return pid, argv, nil
			}
		}
	}
	return 0, nil, fmt.Errorf("no live %s process with %s", binary, arg)
}
