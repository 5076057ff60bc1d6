/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
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
	done chan struct{} // closed when the process has exited for good
	err  error         // exit error, valid once done is closed

	mu  sync.Mutex
	cmd *exec.Cmd // the running command; another one after a restart
	// stopping is set by stop: an exit is then not restarted.
	stopping bool
}

// maxRestarts bounds how often a supervised component is started again
// after exiting on its own; restartPause is the wait before each start.
const (
	maxRestarts  = 3
	restartPause = time.Second
)

// startProcess starts path with args and the test's environment plus env,
// writing its output to logPath. The process
// leads its own process group, so that stop reaches anything it forks, and gets
// the platform's parent-death signal (see parentDeathSysProcAttr), so that it
// dies with the test binary even when the test binary is killed.
func startProcess(name, path string, args, env []string, logPath string) (*process, error) {
	return startSupervised(name, path, args, env, logPath, 0)
}

// startSupervised is startProcess for a component that a real cluster's
// kubelet would start again when it exits on its own, as kube-scheduler
// does by design when it finds its cache corrupted (a bind that the API
// server applied while answering with an error, during an API server
// restart under load: the soak saw it). Up to restarts times the process
// is started again with the same command line, a line in its log saying
// so; after that its exit is final and reported as any other.
func startSupervised(name, path string, args, env []string, logPath string, restarts int) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	start := func() (*exec.Cmd, error) {
		cmd := exec.Command(path, args...)
		cmd.Stdout = logFile
		cmd.Stderr = logFile
		cmd.SysProcAttr = parentDeathSysProcAttr()
		cmd.Env = append(os.Environ(), env...)
		if err := cmd.Start(); err != nil {
			return nil, fmt.Errorf("start %s (%s): %w", name, path, err)
		}
		return cmd, nil
	}
	cmd, err := start()
	if err != nil {
		_ = logFile.Close()
		return nil, err
	}
	p := &process{name: name, cmd: cmd, done: make(chan struct{})}
	go func() {
		defer close(p.done)
		defer func() { _ = logFile.Close() }()
		for n := 0; ; n++ {
			err := cmd.Wait()
			if n >= restarts || p.isStopping() {
				p.err = err
				return
			}
			fmt.Fprintf(logFile, "controlplane: %s exited on its own (%v); starting it again in %s, as a kubelet restarts a static pod (restart %d of at most %d)\n",
				name, err, restartPause, n+1, restarts)
			time.Sleep(restartPause)
			p.mu.Lock()
			if p.stopping {
				p.mu.Unlock()
				p.err = err
				return
			}
			next, startErr := start()
			if startErr != nil {
				p.mu.Unlock()
				p.err = errors.Join(err, startErr)
				return
			}
			cmd, p.cmd = next, next
			p.mu.Unlock()
		}
	}()
	return p, nil
}

func (p *process) isStopping() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stopping
}

// pid is the running process's id.
func (p *process) pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cmd.Process.Pid
}

// exited reports whether the process has ended for good, and how.
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
	p.mu.Lock()
	p.stopping = true
	pgid := -p.cmd.Process.Pid
	p.mu.Unlock()
	_ = syscall.Kill(pgid, syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGracePeriod):
		_ = syscall.Kill(pgid, syscall.SIGKILL)
		<-p.done
	}
	return nil
}
