/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// On Linux every component gets SIGKILL from the kernel when the test binary
// that started it dies, even by SIGKILL or a `go test -timeout` panic, so a
// crashed test run leaves no etcd or kube-apiserver behind.
//
// The kernel sends the signal when the thread that forked the child exits. Go
// only ends threads whose goroutine locked itself to the thread and returned,
// which nothing in a test run does around Start, so in practice the signal comes
// when the process dies.

func parentDeathSysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// parentDeathExecArg marks an invocation of the test binary as the launcher of
// an envtest-managed component. envtest starts etcd and kube-apiserver itself and
// offers no way to set their SysProcAttr, so it is pointed at small scripts that
// run the test binary with this marker; init below then sets the parent-death
// signal and replaces itself with the real binary (the signal survives exec).
const parentDeathExecArg = "__echelon_controlplane_exec_with_parent_death_signal"

func init() {
	if len(os.Args) < 4 || os.Args[1] != parentDeathExecArg {
		return
	}
	parent, target, args := os.Args[2], os.Args[3], os.Args[3:]
	if _, _, errno := syscall.RawSyscall(syscall.SYS_PRCTL, syscall.PR_SET_PDEATHSIG, uintptr(syscall.SIGKILL), 0); errno != 0 {
		fmt.Fprintf(os.Stderr, "controlplane: set parent-death signal for %s: %v\n", target, errno)
		os.Exit(1)
	}
	// The test binary may have died before the signal was armed.
	if strconv.Itoa(os.Getppid()) != parent {
		os.Exit(1)
	}
	err := syscall.Exec(target, args, os.Environ())
	fmt.Fprintf(os.Stderr, "controlplane: exec %s: %v\n", target, err)
	os.Exit(1)
}

// parentDeathLauncher writes an executable script at path that runs target with
// the parent-death signal armed (see parentDeathExecArg).
func parentDeathLauncher(path, target string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("write launcher for %s: %w", target, err)
	}
	// The script's shell is the child of the test binary and execs it in place,
	// so the test binary is the parent that init checks against.
	script := fmt.Sprintf("#!/bin/sh\nexec %s %s %d %s \"$@\"\n",
		shellQuote(self), parentDeathExecArg, os.Getpid(), shellQuote(target))
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		return fmt.Errorf("write launcher for %s: %w", target, err)
	}
	return nil
}

// shellQuote quotes s as one word for /bin/sh.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
