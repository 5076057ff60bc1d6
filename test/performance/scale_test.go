/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"bytes"
	"flag"
	"slices"
	"testing"
	"time"

	"github.com/google/pprof/profile"
)

// heapProfile builds a heap profile whose samples allocate at the given
// stacks (innermost function first) the given in-use bytes.
func heapProfile(t *testing.T, samples map[int64][]string) []byte {
	t.Helper()
	p := &profile.Profile{
		SampleType: []*profile.ValueType{{Type: "alloc_space", Unit: "bytes"}, {Type: "inuse_space", Unit: "bytes"}},
		PeriodType: &profile.ValueType{Type: "space", Unit: "bytes"},
	}
	funcs := map[string]*profile.Function{}
	for v, stack := range samples {
		s := &profile.Sample{Value: []int64{2 * v, v}}
		for _, name := range stack {
			f := funcs[name]
			if f == nil {
				f = &profile.Function{ID: uint64(len(funcs) + 1), Name: name}
				funcs[name] = f
				p.Function = append(p.Function, f)
			}
			loc := &profile.Location{ID: uint64(len(p.Location) + 1), Line: []profile.Line{{Function: f}}}
			p.Location = append(p.Location, loc)
			s.Location = append(s.Location, loc)
		}
		p.Sample = append(p.Sample, s)
	}
	var b bytes.Buffer
	if err := p.Write(&b); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestParseHeap(t *testing.T) {
	data := heapProfile(t, map[int64][]string{
		600: {"lookup.stripPod", "cache.(*Reflector).watch", "runtime.goexit"},
		300: {"json.Unmarshal", "cache.(*Reflector).list", "runtime.goexit"},
		100: {"json.Unmarshal", "main.main", "runtime.goexit"},
	})
	h, err := parseHeap(bytes.NewReader(data), 2)
	if err != nil {
		t.Fatal(err)
	}
	if h.InuseBytes != 1000 {
		t.Errorf("in use = %d, want 1000", h.InuseBytes)
	}
	wantFlat := []heapEntry{{"lookup.stripPod", 600}, {"json.Unmarshal", 400}}
	if !slices.Equal(h.Flat, wantFlat) {
		t.Errorf("flat = %v, want %v", h.Flat, wantFlat)
	}
	// runtime.goexit is under every sample and says nothing: left out.
	// main.main is left out as well.
	wantCum := []heapEntry{{"cache.(*Reflector).watch", 600}, {"lookup.stripPod", 600}}
	if !slices.Equal(h.Cumulative, wantCum) {
		t.Errorf("cumulative = %v, want %v", h.Cumulative, wantCum)
	}

	if _, err := parseHeap(bytes.NewReader([]byte("not a profile")), 2); err == nil {
		t.Error("garbage parsed as a profile")
	}
}

func TestParseLoadAverage(t *testing.T) {
	got, err := parseLoadAverage("3.52 2.10 1.05 4/812 12345\n")
	if err != nil || got != [3]float64{3.52, 2.10, 1.05} {
		t.Errorf("parseLoadAverage = %v, %v", got, err)
	}
	if _, err := parseLoadAverage("3.52"); err == nil {
		t.Error("a short /proc/loadavg was accepted")
	}
}

func TestScaleFlags(t *testing.T) {
	var o scaleOptions
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	bindScaleFlags(fs, &o)
	if err := o.validate(); err != nil || !slices.Equal(o.groups, []int{100}) || o.replicas != 50 || o.idle != 5*time.Minute {
		t.Fatalf("defaults %+v: %v; want 100 groups of 3 x 50 pods, idle 5m", o, err)
	}
	if err := fs.Parse([]string{"--scale-groups=100, 300,1000", "--scale-idle=30s"}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(o.groups, []int{100, 300, 1000}) || o.idle != 30*time.Second {
		t.Errorf("parsed %+v", o)
	}
	for _, bad := range []scaleOptions{
		{groups: []int{100, 0}, replicas: 50, heapTop: 1},
		{groups: []int{100}, replicas: 0, heapTop: 1},
		{groups: []int{100}, replicas: 50, idle: -time.Second, heapTop: 1},
		{replicas: 50, heapTop: 1},
	} {
		if err := bad.validate(); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
	if err := fs.Parse([]string{"--scale-groups=100,x"}); err == nil {
		t.Error("--scale-groups=100,x accepted")
	}
}

func TestGrowth(t *testing.T) {
	small := &result{PodsInNamespace: 5000, PeakRSSBytes: 100}
	large := &result{PodsInNamespace: 15000, PeakRSSBytes: 600}
	results := []*result{small, large}
	value := func(r *result) float64 { return float64(r.PeakRSSBytes) }
	format := func(v float64) string { return time.Duration(v).String() }
	if got := growth(results, small, value, format); got != "-" {
		t.Errorf("growth of the first run = %q, want -", got)
	}
	// 500 more over 10 thousand more pods: 50 per thousand.
	if got := growth(results, large, value, format); got != "50ns" {
		t.Errorf("growth = %q, want 50ns", got)
	}
}
