/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package nodetier

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	// insideEnv is set, to the run's name, in the test binary that Main
	// re-executes inside the network namespace.
	insideEnv = "ECHELON_NODETIER_RUN"

	// stateRoot holds one directory per run: its owner's PID and what
	// teardown must undo (state.json), so that the next run sweeps what a
	// killed one left behind.
	stateRoot = "/run/echelon-nodetier"
	// lockFile is held by the run on the machine (lockMachine); beside the
	// state directory, not in it, so that teardown can remove that.
	lockFile = "/run/echelon-nodetier.lock"

	// NodeAddress is the node's IP, on one end of a veth pair inside the
	// namespace: the API server, the kubelet and kube-proxy listen on it.
	// Nothing outside the namespace routes to it, and nothing in it routes out.
	NodeAddress = "192.168.231.2"
	nodePrefix  = "/24"
	nodeNetwork = "192.168.231.0/24"

	// PodCIDR is the bridge's range, inside the namespace.
	PodCIDR = "10.244.0.0/24"
)

// Main runs a test binary's tests on a real node. Call it from TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(nodetier.Main(m)) }
//
// Outside the namespace it sweeps what an earlier, killed run left, creates
// the run's network namespace, re-executes the test binary inside it (with
// nsenter: a network namespace only, so that the kubelet's volume mounts are
// seen by containerd), then tears everything down, whatever the tests did. On a
// machine where the tier cannot run it prints one line saying why and passes.
// Inside the namespace it runs the tests, which start the node with Start.
func Main(m *testing.M) int {
	if os.Getenv(insideEnv) != "" {
		return m.Run()
	}
	if why := Unsupported(); why != "" {
		fmt.Printf("node tier: not run: %s\n", why)
		return 0
	}
	unlock, err := lockMachine()
	if err != nil {
		fmt.Fprintf(os.Stderr, "node tier: %v\n", err)
		return 1
	}
	defer unlock()
	if err := sweep(); err != nil {
		fmt.Fprintf(os.Stderr, "node tier: sweep of earlier runs: %v\n", err)
		return 1
	}
	run, err := newRun()
	if err != nil {
		fmt.Fprintf(os.Stderr, "node tier: %v\n", err)
		_ = run.teardown()
		return 1
	}
	code := run.exec()
	if err := run.teardown(); err != nil {
		fmt.Fprintf(os.Stderr, "node tier: teardown: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// lockWait bounds how long a run waits for another one on the machine.
const lockWait = 20 * time.Minute

// lockMachine makes runs on one machine take turns: the kernel settings the
// kubelet changes, and the paths it writes outside its scratch directory,
// are the machine's, so a run that overlapped another would record the
// other's changes as the state to restore.
func lockMachine() (func(), error) {
	if err := os.MkdirAll(filepath.Dir(lockFile), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(lockFile, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(lockWait)
	for said := false; ; {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) || time.Now().After(deadline) {
			_ = f.Close()
			return nil, fmt.Errorf("lock %s (another node tier run): %w", lockFile, err)
		}
		if !said {
			fmt.Printf("node tier: waiting for another run to end (%s)\n", lockFile)
			said = true
		}
		time.Sleep(time.Second)
	}
}

// Unsupported says why the node tier cannot run on this machine, or "".
func Unsupported() string {
	if os.Geteuid() != 0 {
		return "needs root (network namespaces, containerd, the kubelet)"
	}
	if _, err := os.Stat("/sys/fs/cgroup/memory/memory.limit_in_bytes"); err != nil {
		if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); err != nil {
			return "no cgroup filesystem at /sys/fs/cgroup"
		}
	}
	for _, tool := range []string{"containerd", "containerd-shim-runc-v2", "runc", "ctr", "iptables", "nsenter", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Sprintf("%s not installed (hack/node-packages.sh installs it)", tool)
		}
	}
	if _, err := os.Stat(filepath.Join(cniBinDir, "bridge")); err != nil {
		return "no CNI plugins in " + cniBinDir + " (hack/node-packages.sh installs containernetworking-plugins)"
	}
	if _, err := nodeBinaries(); err != nil {
		return err.Error()
	}
	return ""
}

// run is one run of the tier, seen from outside its namespace.
type run struct {
	state state
	dir   string // the run's state directory under stateRoot
}

func newRun() (*run, error) {
	name := fmt.Sprintf("echelon-node-%d", os.Getpid())
	r := &run{dir: filepath.Join(stateRoot, name)}
	r.state = state{
		Owner:   os.Getpid(),
		Name:    name,
		Scratch: filepath.Join(os.TempDir(), name),
	}
	// What existed before is recorded first, so that teardown never removes
	// what it did not create.
	r.state.record()
	if err := os.MkdirAll(r.dir, 0o700); err != nil {
		return r, err
	}
	if err := r.state.save(r.dir); err != nil {
		return r, err
	}
	if err := os.MkdirAll(r.state.Scratch, 0o755); err != nil {
		return r, err
	}
	if err := createNamespace(name); err != nil {
		return r, err
	}
	return r, nil
}

// exec runs this test binary, with its arguments, inside the namespace and
// returns its exit code. SIGINT and SIGTERM are passed on, so that the tests
// stop their node before teardown sweeps.
func (r *run) exec() int {
	self, err := os.Executable()
	if err != nil {
		fmt.Fprintf(os.Stderr, "node tier: %v\n", err)
		return 1
	}
	args := append([]string{"--net=" + netnsPath(r.state.Name), "--", self}, os.Args[1:]...)
	cmd := exec.Command("nsenter", args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The tests' temporary files (the control plane's run directory, etcd's
	// data) go to the scratch directory too, so that teardown removes them
	// when the tests were killed before removing them themselves.
	tmp := filepath.Join(r.state.Scratch, "tmp")
	if err := os.MkdirAll(tmp, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "node tier: %v\n", err)
		return 1
	}
	cmd.Env = append(os.Environ(), insideEnv+"="+r.state.Name, scratchEnv+"="+r.state.Scratch, "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(os.Stderr, "node tier: %v\n", err)
		return 1
	}
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	err = cmd.Wait()
	close(done)
	var exit *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		if code := exit.ExitCode(); code > 0 {
			return code
		}
		return 1
	default:
		fmt.Fprintf(os.Stderr, "node tier: %v\n", err)
		return 1
	}
}

// teardown undoes the run: every process it left, its mounts, cgroups and
// namespace, the kernel settings the kubelet changed, and the files it made.
func (r *run) teardown() error {
	err := r.state.undo()
	if err == nil {
		err = os.RemoveAll(r.dir)
		_ = os.Remove(stateRoot) // if empty
	}
	return err
}

// sweep tears down every earlier run whose owner is gone (killed, so its own
// teardown never ran).
func sweep() error {
	entries, err := os.ReadDir(stateRoot)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, e := range entries {
		dir := filepath.Join(stateRoot, e.Name())
		s, err := loadState(dir)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if alive(s.Owner) {
			continue
		}
		start := time.Now()
		if err := s.undo(); err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", s.Name, err))
			continue
		}
		fmt.Printf("node tier: swept run %s, left by a killed test, in %s\n", s.Name, time.Since(start).Round(time.Millisecond))
		errs = append(errs, os.RemoveAll(dir))
	}
	return errors.Join(errs...)
}

// alive reports whether pid runs a test binary (a recycled PID runs
// something else).
func alive(pid int) bool {
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	return err == nil && strings.Contains(string(cmdline), ".test")
}
