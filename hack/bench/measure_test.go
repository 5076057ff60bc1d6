/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"maps"
	"testing"
	"time"
)

func TestRequestsByMethod(t *testing.T) {
	exposition := `# HELP rest_client_requests_total Number of HTTP requests, partitioned by status code, method, and host.
# TYPE rest_client_requests_total counter
rest_client_requests_total{code="200",host="127.0.0.1:41235",method="GET"} 12
rest_client_requests_total{code="201",host="127.0.0.1:41235",method="POST"} 3
rest_client_requests_total{code="200",host="127.0.0.1:41235",method="PATCH"} 7
rest_client_requests_total{code="409",host="127.0.0.1:41235",method="PATCH"} 2
rest_client_requests_total{code="200",host="127.0.0.1:41235",method="DELETE"} 5
rest_client_requests_total_other{method="GET"} 99
process_cpu_seconds_total 1.5
`
	got, err := requestsByMethod(exposition)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"GET": 12, "POST": 3, "PATCH": 9, "DELETE": 5}
	if !maps.Equal(got, want) {
		t.Errorf("requestsByMethod = %v, want %v", got, want)
	}
	if _, err := requestsByMethod(`rest_client_requests_total{code="200"} 1`); err == nil {
		t.Error("a series without a method label was accepted")
	}
}

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

func TestScenarioBatches(t *testing.T) {
	tests := []struct {
		s    scenario
		want int
	}{
		{scenario{members: 3, replicas: 30, maxUnavailable: 5}, 18},
		{scenario{members: 3, replicas: 10, maxUnavailable: 2}, 15},
		{scenario{members: 3, replicas: 10, maxUnavailable: 3}, 12},
		{scenario{members: 1, replicas: 5, maxUnavailable: 5}, 1},
	}
	for _, tt := range tests {
		if got := tt.s.batches(); got != tt.want {
			t.Errorf("%+v.batches() = %d, want %d", tt.s, got, tt.want)
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
