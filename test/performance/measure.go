/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicksPerSecond is the unit of utime and stime in /proc/<pid>/stat
// (USER_HZ), 100 on every Linux architecture Go supports.
const clockTicksPerSecond = 100

// cpuSeconds is the user and system CPU time a process has used so far.
func cpuSeconds(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(string(b))
}

// parseStatCPU reads utime and stime (fields 14 and 15) from /proc/<pid>/stat.
// The command name, field 2, may hold spaces, so fields are counted after its
// closing parenthesis.
func parseStatCPU(stat string) (float64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("/proc stat: no command name in %q", stat)
	}
	fields := strings.Fields(stat[i+1:]) // fields[0] is field 3, the state
	if len(fields) < 13 {
		return 0, fmt.Errorf("/proc stat: too few fields in %q", stat)
	}
	utime, err := strconv.ParseUint(fields[11], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc stat utime: %w", err)
	}
	stime, err := strconv.ParseUint(fields[12], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("/proc stat stime: %w", err)
	}
	return float64(utime+stime) / clockTicksPerSecond, nil
}

// peakRSSBytes is the process's high-water mark of resident memory (VmHWM).
func peakRSSBytes(pid int) (int64, error) { return statusBytes(pid, "VmHWM") }

// rssBytes is the process's resident memory now (VmRSS).
func rssBytes(pid int) (int64, error) { return statusBytes(pid, "VmRSS") }

func statusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseStatusBytes(string(b), field)
}

func parseVmHWM(status string) (int64, error) { return parseStatusBytes(status, "VmHWM") }

// parseStatusBytes reads a field of /proc/<pid>/status given in kB.
func parseStatusBytes(status, field string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("/proc status: cannot parse %q", line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc status: no %s", field)
}

// operatorPID finds the process that runs the executable at path with arg on
// its command line. The bench builds the operator into a directory of its own
// and gives each process its own --http-port, so the two name one process.
func operatorPID(path, arg string) (int, error) {
	exes, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, exe := range exes {
		if target, err := os.Readlink(exe); err != nil || target != path {
			continue
		}
		dir := filepath.Dir(exe)
		cmdline, err := os.ReadFile(filepath.Join(dir, "cmdline"))
		if err == nil && hasArg(cmdline, arg) {
			return strconv.Atoi(filepath.Base(dir))
		}
	}
	return 0, fmt.Errorf("no process runs %s with %s", path, arg)
}

// hasArg tells whether a /proc/<pid>/cmdline, each argument ended by a NUL,
// holds arg.
func hasArg(cmdline []byte, arg string) bool {
	for _, a := range bytes.Split(bytes.TrimSuffix(cmdline, []byte{0}), []byte{0}) {
		if string(a) == arg {
			return true
		}
	}
	return false
}

// usage is what a process has used so far.
type usage struct {
	cpuSeconds   float64
	peakRSSBytes int64
}

func usageOf(pid int) (usage, error) {
	cpu, err := cpuSeconds(pid)
	if err != nil {
		return usage{}, err
	}
	rss, err := peakRSSBytes(pid)
	return usage{cpuSeconds: cpu, peakRSSBytes: rss}, err
}
