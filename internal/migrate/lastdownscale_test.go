/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package migrate

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestLastDownscaleOf: the values the Grafana operator writes are read; a
// value that is not a time is an error naming the annotation; no annotation
// is no downscale.
func TestLastDownscaleOf(t *testing.T) {
	at := time.Date(2026, 11, 26, 5, 4, 3, 0, time.UTC)
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		want        time.Time
		err         string
	}{
		{"none", nil, time.Time{}, ""},
		{"as the Grafana operator writes it", map[string]string{LastDownscaleAnnotation: "2026-11-26T05:04:03Z"}, at, ""},
		{"with an offset", map[string]string{LastDownscaleAnnotation: "2026-11-26T06:04:03+01:00"}, at, ""},
		{"with fractions", map[string]string{LastDownscaleAnnotation: "2026-11-26T05:04:03.5Z"}, at.Add(500 * time.Millisecond), ""},
		{"a Go time.String", map[string]string{LastDownscaleAnnotation: "2026-11-26 05:04:03 +0000 UTC"}, time.Time{},
			`annotation grafana.com/last-downscale="2026-11-26 05:04:03 +0000 UTC": not an RFC 3339 time`},
		{"empty", map[string]string{LastDownscaleAnnotation: ""}, time.Time{}, `annotation grafana.com/last-downscale="": not an RFC 3339 time`},
		{"a Unix time", map[string]string{LastDownscaleAnnotation: "1764133443"}, time.Time{}, `annotation grafana.com/last-downscale="1764133443"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "ingester-zone-b", Annotations: tc.annotations}}
			got, err := LastDownscaleOf(sts)
			switch {
			case tc.err == "" && err != nil:
				t.Fatalf("error %v, want none", err)
			case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
				t.Fatalf("error %v, want one containing %q", err, tc.err)
			}
			if !got.Equal(tc.want) {
				t.Errorf("LastDownscaleOf = %s, want %s", got, tc.want)
			}
		})
	}
}

// TestFormatLastDownscaleReadsBack: what compat mode writes, the Grafana
// operator's parser (RFC 3339) and ours read back, to the second.
func TestFormatLastDownscaleReadsBack(t *testing.T) {
	at := time.Date(2026, 11, 26, 7, 8, 9, 123456789, time.FixedZone("CET", 3600))
	v := FormatLastDownscale(at)
	if v != "2026-11-26T06:08:09Z" {
		t.Errorf("FormatLastDownscale = %q, want UTC to the second", v)
	}
	if got, err := time.Parse(time.RFC3339, v); err != nil || !got.Equal(at.Truncate(time.Second)) {
		t.Errorf("read back %s, %v; want %s", got, err, at.Truncate(time.Second))
	}
}
