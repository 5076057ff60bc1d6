/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// heapSummary is where an operator's live heap is, from its heap profile
// (served by --pprof-bind-address): what `go tool pprof -top` prints, by
// in-use bytes.
type heapSummary struct {
	// InuseBytes is every sampled allocation still live at the last GC.
	InuseBytes int64 `json:"inuseBytes"`
	// Flat are the functions that allocated the most live bytes themselves
	// (the innermost frame, inlined frames counted as their own);
	// Cumulative those with the most live bytes allocated by them or their
	// callees, without the runtime's frames and those nearly every
	// allocation passes: a function is counted once per stack.
	Flat       []heapEntry `json:"flat"`
	Cumulative []heapEntry `json:"cumulative"`
}

type heapEntry struct {
	Function string `json:"function"`
	Bytes    int64  `json:"bytes"`
}

// fetchHeap reads the heap profile of the operator whose pprof server listens
// on port, after a garbage collection, and sums it up.
func fetchHeap(ctx context.Context, port, top int) (heapSummary, error) {
	if port == 0 {
		return heapSummary{}, fmt.Errorf("the operator serves no pprof")
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", port), nil)
	if err != nil {
		return heapSummary{}, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return heapSummary{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return heapSummary{}, fmt.Errorf("GET /debug/pprof/heap: HTTP %d", resp.StatusCode)
	}
	return parseHeap(resp.Body, top)
}

// parseHeap sums up a heap profile by the in-use bytes of each function.
func parseHeap(r io.Reader, top int) (heapSummary, error) {
	p, err := profile.Parse(r)
	if err != nil {
		return heapSummary{}, fmt.Errorf("parse the heap profile: %w", err)
	}
	idx := -1
	for i, st := range p.SampleType {
		if st.Type == "inuse_space" {
			idx = i
		}
	}
	if idx < 0 {
		return heapSummary{}, fmt.Errorf("the profile has no inuse_space samples")
	}
	var total int64
	flat, cum := map[string]int64{}, map[string]int64{}
	for _, s := range p.Sample {
		v := s.Value[idx]
		if v == 0 {
			continue
		}
		total += v
		seen := map[string]bool{}
		first := true
		for _, loc := range s.Location {
			// A location's lines run from the innermost inlined function out.
			for _, line := range loc.Line {
				if line.Function == nil {
					continue
				}
				name := line.Function.Name
				if first {
					flat[name] += v
					first = false
				}
				if !seen[name] {
					seen[name] = true
					cum[name] += v
				}
			}
		}
	}
	// Frames under nearly every allocation, and the runtime's own (a
	// goroutine's start, the allocator, package initialisation), say nothing
	// of where memory goes.
	for name, v := range cum {
		if float64(v) > 0.95*float64(total) || strings.HasPrefix(name, "runtime.") || name == "main.main" {
			delete(cum, name)
		}
	}
	return heapSummary{InuseBytes: total, Flat: topEntries(flat, top), Cumulative: topEntries(cum, top)}, nil
}

// topEntries are the n largest of m, the largest first; ties by name.
func topEntries(m map[string]int64, n int) []heapEntry {
	names := slices.SortedFunc(maps.Keys(m), func(a, b string) int {
		if c := cmp.Compare(m[b], m[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	out := make([]heapEntry, 0, min(n, len(names)))
	for _, name := range names[:min(n, len(names))] {
		out = append(out, heapEntry{Function: name, Bytes: m[name]})
	}
	return out
}
