/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"maps"
	"net/http"
	"strings"
	"time"
)

// What the bench counts in the operators' requests. Keys are those of classify.

// methodOf is the HTTP method of a request kind.
func methodOf(key string) string {
	verb, _, _ := strings.Cut(key, " ")
	switch verb {
	case "GET", "LIST", "WATCH":
		return http.MethodGet
	case "CREATE":
		return http.MethodPost
	case "UPDATE":
		return http.MethodPut
	case "DELETECOLLECTION":
		return http.MethodDelete
	default: // PATCH, DELETE, and the methods of paths outside a resource
		return verb
	}
}

// isRead tells reads (GET, which covers get, list and watch) from writes.
func isRead(method string) bool {
	return method == http.MethodGet || method == http.MethodHead
}

// isLeaseWrite tells the writes of leader election, which come with time
// rather than with pods, from the rest.
func isLeaseWrite(key string) bool {
	return key == "UPDATE leases" || key == "CREATE leases" || key == "PATCH leases"
}

// isPodDeletion tells a pod deletion, by DELETE or by the Eviction API.
func isPodDeletion(key string) bool {
	return key == "DELETE pods" || key == "CREATE pods/eviction"
}

// byMethod sums request counts by HTTP method.
func byMethod(counts map[string]int) map[string]float64 {
	out := map[string]float64{}
	for key, n := range counts {
		out[methodOf(key)] += float64(n)
	}
	return out
}

// tally sums reads, writes other than leader election's, and leader
// election's writes.
func tally(counts map[string]int) (reads, writes, leaseWrites int) {
	for key, n := range counts {
		switch {
		case isRead(methodOf(key)):
			reads += n
		case isLeaseWrite(key):
			leaseWrites += n
		default:
			writes += n
		}
	}
	return reads, writes, leaseWrites
}

// sumCounts adds request counts up.
func sumCounts(counts ...map[string]int) map[string]int {
	out := map[string]int{}
	for _, c := range counts {
		for k, n := range c {
			out[k] += n
		}
	}
	return out
}

func diffCounts(after, before map[string]int) map[string]int {
	out := maps.Clone(after)
	for k, n := range before {
		out[k] -= n
	}
	maps.DeleteFunc(out, func(_ string, n int) bool { return n == 0 })
	return out
}

// successful pod deletions and lease writes: what a failed request did not do
// is no deletion and no take-over.
func successfulPodDeletion(r request) bool { return isPodDeletion(r.key) && succeeded(r.code) }
func successfulLeaseWrite(r request) bool  { return isLeaseWrite(r.key) && succeeded(r.code) }

func succeeded(code int) bool { return code >= 200 && code < 300 }

// countSince counts the requests that arrived at or after t and match.
func countSince(reqs []request, t time.Time, match func(request) bool) int {
	n := 0
	for _, r := range reqs {
		if !r.arrived.Before(t) && match(r) {
			n++
		}
	}
	return n
}

// firstSince returns the request that arrived first at or after t among those
// that match.
func firstSince(reqs []request, t time.Time, match func(request) bool) (request, bool) {
	var first request
	found := false
	for _, r := range reqs {
		if !r.arrived.Before(t) && match(r) && (!found || r.arrived.Before(first.arrived)) {
			first, found = r, true
		}
	}
	return first, found
}
