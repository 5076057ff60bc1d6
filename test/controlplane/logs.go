/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package controlplane

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// componentLogs are the components whose output is kept, in the order in which
// their tails are printed: the first to start first.
var componentLogs = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// tailReadLimit bounds how much of a log is read to find its last lines: the API
// server writes megabytes in a long run.
const tailReadLimit = 256 << 10

// logPath is where a component writes its stdout and stderr.
func (cp *ControlPlane) logPath(component string) string {
	return filepath.Join(cp.dir, "logs", component+".log")
}

// LogDir is the directory holding one <component>.log per component. It is
// removed by Stop unless ECHELON_CONTROLPLANE_KEEP=1.
func (cp *ControlPlane) LogDir() string {
	return filepath.Join(cp.dir, "logs")
}

// LogTails returns the last lines of each component's log, headed by the
// component's name, to print when a test fails.
func (cp *ControlPlane) LogTails(lines int) string {
	var b strings.Builder
	cp.mu.Lock()
	names := append(append([]string(nil), componentLogs...), cp.extraLogs...)
	cp.mu.Unlock()
	for _, c := range names {
		fmt.Fprintf(&b, "==> %s (last %d lines of %s) <==\n", c, lines, cp.logPath(c))
		tail, err := tailFile(cp.logPath(c), lines)
		if err != nil {
			fmt.Fprintf(&b, "(%v)\n", err)
			continue
		}
		b.WriteString(tail)
		if tail != "" && !strings.HasSuffix(tail, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// DumpLogsOnFailure prints the tail of each component's log when t has failed
// by the time it ends. Cleanups run last-registered first, so call it after
// anything whose own cleanup should appear in the logs.
func (cp *ControlPlane) DumpLogsOnFailure(t TB, lines int) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("control plane logs:\n%s", cp.LogTails(lines))
		}
	})
}

// tailFile returns the last n lines of the file.
func tailFile(path string, n int) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", err
	}
	offset := max(info.Size()-tailReadLimit, 0)
	data, err := io.ReadAll(io.NewSectionReader(f, offset, info.Size()-offset))
	if err != nil {
		return "", err
	}
	data = bytes.TrimRight(data, "\n")
	for i := len(data) - 1; i >= 0; i-- {
		if data[i] == '\n' {
			n--
			if n == 0 {
				return string(data[i+1:]), nil
			}
		}
	}
	return string(data), nil
}
