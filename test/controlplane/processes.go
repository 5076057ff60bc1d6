/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// stopGracePeriod is how long a component may take to exit after SIGTERM before
// it is killed. The components shut down in well under a second; the margin is
// for a loaded two-core machine.
const stopGracePeriod = 10 * time.Second

// process is a control plane component started by this package (envtest starts
// etcd and kube-apiserver itself). Its stdout and stderr go to a log file.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{} // closed when the process has exited
	err  error         // exit error, valid once done is closed
}

// startProcess starts path with args and the test's environment plus env,
// writing its output to logPath. The process
// leads its own process group, so that stop reaches anything it forks, and gets
// the platform's parent-death signal (see parentDeathSysProcAttr), so that it
// dies with the test binary even when the test binary is killed.
func startProcess(name, path string, args, env []string, logPath string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.SysProcAttr = parentDeathSysProcAttr()
	cmd.Env = append(os.Environ(), env...)
	if err := cmd.Start(); err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s (%s): %w", name, path, err)
	}
	p := &process{name: name, cmd: cmd, log: logFile, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		if p.err == nil {
			return true, fmt.Errorf("%s exited", p.name)
		}
		return true, fmt.Errorf("%s exited: %w", p.name, p.err)
	default:
		return false, nil
	}
}

// stop sends SIGTERM to the process group, then SIGKILL after stopGracePeriod,
// and waits for the process to exit. Its exit status then says nothing (the
// scheduler, for one, exits 1 when told to stop without leader election), but a
// process that had already exited on its own is reported: a component must not
// die while in use.
func (p *process) stop() error {
	if done, err := p.exited(); done {
		return err
	}
	pgid := -p.cmd.Process.Pid
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGracePeriod):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
	return nil
}
