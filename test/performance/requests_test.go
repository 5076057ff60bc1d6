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

func TestMethodOf(t *testing.T) {
	tests := map[string]string{
		"GET pods":                   "GET",
		"LIST pods":                  "GET",
		"WATCH statefulsets":         "GET",
		"CREATE events":              "POST",
		"CREATE pods/eviction":       "POST",
		"UPDATE leases":              "PUT",
		"PATCH rolloutgroups/status": "PATCH",
		"DELETE pods":                "DELETE",
		"DELETECOLLECTION pods":      "DELETE",
		"GET /version":               "GET",
		"POST /apis":                 "POST",
	}
	for key, want := range tests {
		if got := methodOf(key); got != want {
			t.Errorf("methodOf(%q) = %q, want %q", key, got, want)
		}
	}
}

func TestTallyAndByMethod(t *testing.T) {
	counts := map[string]int{
		"GET pods":                   4,
		"LIST pods":                  1,
		"WATCH pods":                 2,
		"GET leases":                 30,
		"UPDATE leases":              20,
		"CREATE leases":              1,
		"DELETE pods":                90,
		"CREATE events":              95,
		"PATCH rolloutgroups/status": 12,
	}
	reads, writes, leaseWrites := tally(counts)
	if reads != 37 || writes != 197 || leaseWrites != 21 {
		t.Errorf("tally = %d reads, %d writes, %d lease writes; want 37, 197, 21", reads, writes, leaseWrites)
	}
	want := map[string]float64{"GET": 37, "PUT": 20, "POST": 96, "DELETE": 90, "PATCH": 12}
	if got := byMethod(counts); !maps.Equal(got, want) {
		t.Errorf("byMethod = %v, want %v", got, want)
	}
}

func TestSumAndDiffCounts(t *testing.T) {
	a := map[string]int{"DELETE pods": 40, "GET leases": 10}
	b := map[string]int{"DELETE pods": 50, "UPDATE leases": 3}
	sum := sumCounts(a, b)
	if want := map[string]int{"DELETE pods": 90, "GET leases": 10, "UPDATE leases": 3}; !maps.Equal(sum, want) {
		t.Errorf("sumCounts = %v, want %v", sum, want)
	}
	if got, want := diffCounts(sum, a), map[string]int{"DELETE pods": 50, "UPDATE leases": 3}; !maps.Equal(got, want) {
		t.Errorf("diffCounts = %v, want %v (keys whose difference is 0 left out)", got, want)
	}
}

// at is a time t0 plus ms milliseconds.
var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func at(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

func answered(key string, arrivedMS, doneMS, code int) request {
	return request{key: key, arrived: at(arrivedMS), done: at(doneMS), code: code}
}

func TestCountAndFirstSince(t *testing.T) {
	reqs := []request{
		answered("DELETE pods", 100, 120, 200),
		answered("DELETE pods", 300, 350, 200),
		answered("DELETE pods", 290, 360, 409), // refused: no deletion
		answered("CREATE pods/eviction", 280, 370, 201),
		answered("GET pods", 250, 260, 200),
	}
	if got := countSince(reqs, at(200), successfulPodDeletion); got != 2 {
		t.Errorf("countSince = %d successful deletions from 200ms, want 2", got)
	}
	if got := countSince(reqs, at(100), successfulPodDeletion); got != 3 {
		t.Errorf("countSince = %d successful deletions from 100ms (inclusive), want 3", got)
	}
	first, ok := firstSince(reqs, at(200), successfulPodDeletion)
	if !ok || first.key != "CREATE pods/eviction" {
		t.Errorf("firstSince = %+v, %t; want the eviction, which arrived first though answered last", first, ok)
	}
	if _, ok := firstSince(reqs, at(400), successfulPodDeletion); ok {
		t.Error("firstSince found a request that arrived before t")
	}
}
