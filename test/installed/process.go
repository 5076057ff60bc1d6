/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package installed runs Echelon as an installation made it: the Helm chart or
// dist/install.yaml creates a Deployment on the test control plane, whose kwok
// nodes run no containers, so this package runs the echelon binary as a local
// process with that Deployment's arguments and environment and its
// ServiceAccount's token. A rollout then proves that what the install created
// (flags, RBAC, leader election Lease) lets the operator work. The package also
// holds the small workloads those tests roll out, and a role aggregation
// controller for tests of aggregated ClusterRoles.
package installed

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"
)

// stopGrace is how long a process may take to exit after SIGTERM; the
// operator releases its Lease and exits in well under a second.
const stopGrace = 15 * time.Second

// process is a local process whose output goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}

	mu  sync.Mutex
	err error
}

func startProcess(name, logDir, path string, args, env []string) (*process, error) {
	logPath := filepath.Join(logDir, name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = env
	// Its own process group, and killed with the test binary, so that a test
	// that dies leaves nothing running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		log.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

// exited returns a non-nil error once the process has ended.
func (p *process) exited() error {
	select {
	case <-p.done:
		p.mu.Lock()
		defer p.mu.Unlock()
		return fmt.Errorf("%s exited: %v\n%s", p.name, p.err, p.logTail(30))
	default:
		return nil
	}
}

// stop sends SIGTERM, then SIGKILL after stopGrace, and waits for the exit.
func (p *process) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

// logTail returns the last lines of the process's log.
func (p *process) logTail(lines int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return err.Error()
	}
	all := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return fmt.Sprintf("--- %s (last %d lines of %s) ---\n%s\n", p.name, len(all), p.logPath, bytes.Join(all, []byte("\n")))
}
