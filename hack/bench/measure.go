/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// clockTicksPerSecond is the unit of utime and stime in /proc/<pid>/stat
// (USER_HZ), 100 on every Linux architecture Go supports.
const clockTicksPerSecond = 100

// requestsByMethod sums rest_client_requests_total of a Prometheus text
// exposition by its method label: the HTTP method of each request the process's
// Kubernetes clients made.
func requestsByMethod(exposition string) (map[string]float64, error) {
	out := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(exposition))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "rest_client_requests_total{") {
			continue
		}
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, "rest_client_requests_total{"), "} ")
		if !ok {
			return nil, fmt.Errorf("metrics: cannot parse %q", line)
		}
		v, err := strconv.ParseFloat(strings.Fields(value)[0], 64)
		if err != nil {
			return nil, fmt.Errorf("metrics: value of %q: %w", line, err)
		}
		method := labelValue(labels, "method")
		if method == "" {
			return nil, fmt.Errorf("metrics: no method label in %q", line)
		}
		out[method] += v
	}
	return out, sc.Err()
}

// labelValue returns the value of one label in `a="x",b="y"`. The values
// searched here (HTTP methods) hold no quotes or commas.
func labelValue(labels, name string) string {
	for _, kv := range strings.Split(labels, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if ok && k == name {
			return strings.Trim(v, `"`)
		}
	}
	return ""
}

// isRead tells reads (GET, which covers get, list and watch) from writes.
func isRead(method string) bool {
	return method == "GET" || method == "HEAD"
}

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
func peakRSSBytes(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	return parseVmHWM(string(b))
}

func parseVmHWM(status string) (int64, error) {
	for _, line := range strings.Split(status, "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			f := strings.Fields(v)
			if len(f) != 2 || f[1] != "kB" {
				return 0, fmt.Errorf("/proc status: cannot parse %q", line)
			}
			kb, err := strconv.ParseInt(f[0], 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("/proc status: no VmHWM")
}

// pidOf finds the process running the executable at path. The bench builds the
// operator into a directory of its own, so that path names one process.
func pidOf(path string) (int, error) {
	exes, _ := filepath.Glob("/proc/[0-9]*/exe")
	for _, exe := range exes {
		if target, err := os.Readlink(exe); err == nil && target == path {
			return strconv.Atoi(filepath.Base(filepath.Dir(exe)))
		}
	}
	return 0, fmt.Errorf("no process runs %s", path)
}
