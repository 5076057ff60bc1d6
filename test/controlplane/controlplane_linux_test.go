/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/echelon-operator/echelon/test/controlplane"
)

// helperEnv makes the test binary a process that starts a control plane, prints
// its run directory and its children's PIDs, and waits to be killed.
const helperEnv = "ECHELON_CONTROLPLANE_TEST_HELPER"

// children returns the PIDs of the live processes whose parent is pid.
func children(pid int) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited meanwhile
		}
		// "pid (comm) state ppid ...": comm may hold spaces, so split after ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[0] != "Z" && fields[1] == strconv.Itoa(pid) {
			out = append(out, child)
		}
	}
	return out, nil
}

func alive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestHelperProcess(t *testing.T) {
	if os.Getenv(helperEnv) == "" {
		t.Skip("helper of TestComponentsDieWithTheTestBinary")
	}
	cp, err := controlplane.Start(context.Background(), controlplane.Options{Nodes: 1})
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	pids, err := children(os.Getpid())
	if err != nil {
		fmt.Printf("error %v\n", err)
		os.Exit(1)
	}
	fmt.Printf("dir %s\n", cp.Dir())
	for _, pid := range pids {
		fmt.Printf("pid %d\n", pid)
	}
	fmt.Println("ready")
	time.Sleep(time.Hour)
}

// A test binary that is killed (a `go test -timeout` panic, a Ctrl-C, an OOM
// kill) runs no cleanup; its components must still die, or they would hold ports
// and CPU for the rest of the machine's life.
func TestComponentsDieWithTheTestBinary(t *testing.T) {
	controlPlane(t) // same skip-or-fail rule as the other tests
	g := NewWithT(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$")
	cmd.Env = append(os.Environ(), helperEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	cmd.Stderr = os.Stderr
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })

	var pids []int
	var dir string
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		line := lines.Text()
		if line == "ready" {
			break
		}
		if d, ok := strings.CutPrefix(line, "dir "); ok {
			dir = d
			t.Cleanup(func() { _ = os.RemoveAll(dir) })
		}
		if p, ok := strings.CutPrefix(line, "pid "); ok {
			pid, err := strconv.Atoi(p)
			g.Expect(err).NotTo(HaveOccurred())
			pids = append(pids, pid)
		}
		g.Expect(line).NotTo(HavePrefix("error"))
	}
	// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok.
	g.Expect(pids).To(HaveLen(5), "children of the helper")

	g.Expect(cmd.Process.Signal(syscall.SIGKILL)).To(Succeed())
	err = cmd.Wait()
	var exitErr *exec.ExitError
	g.Expect(errors.As(err, &exitErr)).To(BeTrue())
	g.Eventually(func() []int {
		var left []int
		for _, pid := range pids {
			if alive(pid) {
				left = append(left, pid)
			}
		}
		return left
	}).WithTimeout(10*time.Second).WithPolling(50*time.Millisecond).Should(BeEmpty(), "components outlived the killed test binary")
}

// Stop must leave no process behind either.
func TestStopLeavesNoChildren(t *testing.T) {
	controlPlane(t)
	g := NewWithT(t)
	before, err := children(os.Getpid())
	g.Expect(err).NotTo(HaveOccurred())
	cp, err := controlplane.Start(t.Context(), controlplane.Options{Nodes: 1})
	g.Expect(err).NotTo(HaveOccurred())
	during, err := children(os.Getpid())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(len(during) - len(before)).To(Equal(5))
	g.Expect(cp.Stop()).To(Succeed())
	after, err := children(os.Getpid())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(ConsistOf(before))
	g.Expect(cp.Dir()).NotTo(BeADirectory(), "Stop removes the run directory")
}

// A control plane that fails to start says why and leaves nothing running.
func TestFailedStartLeavesNoChildren(t *testing.T) {
	controlPlane(t)
	g := NewWithT(t)
	before, err := children(os.Getpid())
	g.Expect(err).NotTo(HaveOccurred())
	_, err = controlplane.Start(t.Context(), controlplane.Options{Nodes: 1, CRDDirs: []string{"no/such/crds"}})
	g.Expect(err).To(MatchError(ContainSubstring("no/such/crds")))
	g.Expect(err).To(MatchError(ContainSubstring("==> kube-apiserver")), "the error carries the logs")
	after, err := children(os.Getpid())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(after).To(ConsistOf(before))
}
