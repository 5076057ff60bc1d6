/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"syscall"
	"time"

	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// fastLeaderElection are the lease timings of the e2e tests: a lease that is
// not renewed expires after 4 s, and candidates try every 500 ms, so a handover
// takes seconds rather than the default's 15 s.
var fastLeaderElection = []string{
	"--leader-elect=true",
	"--leader-elect-lease-duration=4s",
	"--leader-elect-renew-deadline=3s",
	"--leader-elect-retry-period=500ms",
}

// leaderPoll is how often the bench asks the operators which one leads: the
// metric is the only place that says so at once.
const leaderPoll = 100 * time.Millisecond

// instance is one operator process behind a counting proxy of its own.
type instance struct {
	*framework.Operator
	counter *requestCounter
	pid     int
	// pprofPort serves the process's /debug/pprof when the run profiles it.
	pprofPort int
	// readyAfter runs from the process's start to its /ready.
	readyAfter time.Duration

	// signal is the signal the bench sent the process mid-rollout, or 0.
	signal syscall.Signal
	// atSignal is what the process had used when the bench signalled it; it
	// may be gone by the end of the rollout.
	atSignal usage
	// stopped receives the outcome of a SIGTERM sent in the background.
	stopped chan error
}

// operators are the processes of one run.
type operators []*instance

// startOperators starts cfg.operators processes, under leader election if
// more than one, each through its own proxy, and waits until each is ready. It
// returns what it started even on failure, for stop to end.
func startOperators(ctx context.Context, cfg runConfig, user *controlplane.User, ns string) (operators, error) {
	flags := []string{"--namespaces=" + ns}
	if cfg.operators > 1 {
		flags = append(flags, "--leader-election-namespace="+ns)
		flags = append(flags, fastLeaderElection...)
	}
	flags = append(flags, cfg.operatorLogArgs...)
	var ops operators
	started := make([]time.Time, cfg.operators)
	for i := range cfg.operators {
		name := fmt.Sprintf("echelon-%s%s-%d", cfg.slug(), cfg.variant, i+1)
		counter, err := startRequestCounter(user.Config, filepath.Join(cfg.workDir, "requests-"+name+".log"))
		if err != nil {
			return ops, err
		}
		kubeconfig := filepath.Join(cfg.workDir, name+".kubeconfig")
		if err := counter.writeKubeconfig(kubeconfig); err != nil {
			counter.close()
			return ops, err
		}
		in := &instance{counter: counter}
		opFlags := flags
		if cfg.profile || cfg.cpuProfile {
			if in.pprofPort, err = framework.FreePort(); err != nil {
				counter.close()
				return ops, err
			}
			opFlags = append(slices.Clone(flags), fmt.Sprintf("--pprof-bind-address=127.0.0.1:%d", in.pprofPort))
		}
		started[i] = time.Now()
		if in.Operator, err = framework.StartOperator(cfg.binary, kubeconfig, cfg.operatorLogDir, name, opFlags...); err != nil {
			counter.close()
			return ops, err
		}
		ops = append(ops, in)
	}
	for i, in := range ops {
		if err := withTimeout(ctx, cfg.timeout, in.WaitReady); err != nil {
			return ops, err
		}
		in.readyAfter = time.Since(started[i])
		var err error
		if in.pid, err = operatorPID(cfg.binary, fmt.Sprintf("--http-port=%d", in.HTTPPort)); err != nil {
			return ops, err
		}
	}
	return ops, nil
}

// waitLeader returns the one process that leads, once exactly one does.
func (ops operators) waitLeader(ctx context.Context) (*instance, error) {
	if len(ops) == 1 {
		return ops[0], nil
	}
	tick := time.NewTicker(leaderPoll)
	defer tick.Stop()
	for {
		var leaders []*instance
		for _, in := range ops {
			if in.IsLeader() {
				leaders = append(leaders, in)
			}
		}
		if len(leaders) == 1 {
			return leaders[0], nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for exactly one leader: %w", context.Cause(ctx))
		}
	}
}

// other returns a process other than in.
func (ops operators) other(in *instance) *instance {
	for _, o := range ops {
		if o != in {
			return o
		}
	}
	return nil
}

// counts sums the requests of every process so far, those of signalled ones
// included.
func (ops operators) counts() map[string]int {
	var all []map[string]int
	for _, in := range ops {
		all = append(all, in.counter.snapshot())
	}
	return sumCounts(all...)
}

// usage sums the CPU time of every process and takes the highest peak of
// resident memory; a signalled process counts with what it had used at the signal.
func (ops operators) usage() (usage, error) {
	var total usage
	for _, in := range ops {
		u := in.atSignal
		if in.signal == 0 {
			var err error
			if u, err = usageOf(in.pid); err != nil {
				return usage{}, fmt.Errorf("usage of %s: %w", in.Name, err)
			}
		}
		total.cpuSeconds += u.cpuSeconds
		total.peakRSSBytes = max(total.peakRSSBytes, u.peakRSSBytes)
	}
	return total, nil
}

// send records what the process has used and sends it sig: SIGTERM in the
// background (the process hands over and exits), SIGKILL at once.
func (in *instance) send(sig syscall.Signal) (time.Time, error) {
	u, err := usageOf(in.pid)
	if err != nil {
		return time.Time{}, fmt.Errorf("usage of %s: %w", in.Name, err)
	}
	in.signal, in.atSignal = sig, u
	at := time.Now()
	switch sig {
	case syscall.SIGTERM:
		in.stopped = make(chan error, 1)
		go func() { in.stopped <- in.Stop(stopWithin) }()
	case syscall.SIGKILL:
		in.Kill()
	default:
		return at, fmt.Errorf("the bench sends SIGTERM or SIGKILL, not %s", sig)
	}
	return at, nil
}

// stop ends every process and proxy. A process the bench sent SIGTERM must
// have exited cleanly; one it killed has no say.
func (ops operators) stop() error {
	var errs []error
	for _, in := range ops {
		switch in.signal {
		case syscall.SIGTERM:
			errs = append(errs, <-in.stopped)
		case syscall.SIGKILL:
			<-in.Exited()
		default:
			errs = append(errs, in.Stop(stopWithin))
		}
		in.counter.close()
	}
	return errors.Join(errs...)
}
