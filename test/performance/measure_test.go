/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"testing"
	"time"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		method, path, watch string
		want                string
	}{
		{"GET", "/api/v1/namespaces/ns/pods", "", "LIST pods"},
		{"GET", "/api/v1/namespaces/ns/pods", "true", "WATCH pods"},
		{"GET", "/api/v1/pods", "1", "WATCH pods"},
		{"GET", "/api/v1/namespaces/ns/pods/p-0", "", "GET pods"},
		{"DELETE", "/api/v1/namespaces/ns/pods/p-0", "", "DELETE pods"},
		{"DELETE", "/api/v1/namespaces/ns/pods", "", "DELETECOLLECTION pods"},
		{"POST", "/api/v1/namespaces/ns/pods/p-0/eviction", "", "CREATE pods/eviction"},
		{"PATCH", "/apis/echelon.dev/v1alpha1/namespaces/ns/rolloutgroups/g/status", "", "PATCH rolloutgroups/status"},
		{"PUT", "/apis/coordination.k8s.io/v1/namespaces/ns/leases/l", "", "UPDATE leases"},
		{"POST", "/apis/events.k8s.io/v1/namespaces/ns/events", "", "CREATE events"},
		{"GET", "/api/v1/namespaces/ns", "", "GET namespaces"},
		{"GET", "/api/v1/namespaces", "", "LIST namespaces"},
		{"GET", "/apis/apps/v1/statefulsets", "", "LIST statefulsets"},
		{"GET", "/version", "", "GET /version"},
		{"GET", "/apis", "", "GET /apis"},
		{"GET", "/api/v1", "", "GET /api/v1"},
	}
	for _, tt := range tests {
		if got := classify(tt.method, tt.path, tt.watch); got != tt.want {
			t.Errorf("classify(%s %s watch=%q) = %q, want %q", tt.method, tt.path, tt.watch, got, tt.want)
		}
	}
}

func TestParseStatCPU(t *testing.T) {
	// The command name holds a space and a parenthesis; utime=250, stime=50 ticks.
	stat := "4242 (ech elon)) S 1 4242 4242 0 -1 4194560 1000 0 0 0 250 50 0 0 20 0 9 0 100 1000000 2000 18446744073709551615"
	got, err := parseStatCPU(stat)
	if err != nil {
		t.Fatal(err)
	}
	if got != 3.0 {
		t.Errorf("parseStatCPU = %v, want 3.0", got)
	}
}

func TestParseVmHWM(t *testing.T) {
	got, err := parseVmHWM("Name:\techelon\nVmPeak:\t 1300000 kB\nVmHWM:\t   51200 kB\nVmRSS:\t   40000 kB\n")
	if err != nil {
		t.Fatal(err)
	}
	if got != 50<<20 {
		t.Errorf("parseVmHWM = %d, want %d", got, 50<<20)
	}
	if _, err := parseVmHWM("Name:\techelon\n"); err == nil {
		t.Error("a status without VmHWM was accepted")
	}
}

func TestHasArg(t *testing.T) {
	cmdline := []byte("/tmp/bin/echelon\x00--kubeconfig=/tmp/k\x00--http-port=4242\x00--leader-elect=true\x00")
	if !hasArg(cmdline, "--http-port=4242") {
		t.Error("hasArg missed --http-port=4242")
	}
	for _, arg := range []string{"--http-port=424", "--http-port=42420", "http-port=4242", ""} {
		if hasArg(cmdline, arg) {
			t.Errorf("hasArg found %q", arg)
		}
	}
}

func TestMedian(t *testing.T) {
	s := time.Second
	if got := median([]time.Duration{3 * s, s, 2 * s}); got != 2*s {
		t.Errorf("median of 3 = %s", got)
	}
	if got := median([]time.Duration{4 * s, s, 2 * s, 3 * s}); got != 2500*time.Millisecond {
		t.Errorf("median of 4 = %s", got)
	}
}
