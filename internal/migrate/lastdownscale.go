/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package migrate

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
)

// LastDownscaleAnnotation is the Grafana protocol's record of a
// StatefulSet's last downscale: the Grafana operator writes it when it
// admits or makes a downscale, and checks the zones of a rollout-group
// against it. Compat mode reads it as the time of the zone's last downscale
// and writes it when it downscales a StatefulSet of a compat group.
const LastDownscaleAnnotation = annotationLastDownscale

// ParseLastDownscale reads a last-downscale value: RFC 3339, as the Grafana
// operator writes it, with or without fractions of a second. The error names
// the annotation.
func ParseLastDownscale(value string) (time.Time, error) {
	t, err := time.Parse(time.RFC3339Nano, value)
	if err != nil {
		return time.Time{}, fmt.Errorf("annotation %s=%q: not an RFC 3339 time (such as 2026-01-02T15:04:05Z)", LastDownscaleAnnotation, value)
	}
	return t, nil
}

// FormatLastDownscale is the value compat mode writes for a downscale at t:
// RFC 3339 in UTC, to the second, as the Grafana operator writes it, so that
// a Grafana operator put back reads it.
func FormatLastDownscale(t time.Time) string {
	return t.UTC().Format(time.RFC3339)
}

// LastDownscaleOf is the time sts's annotation records; zero when it has
// none. A value that cannot be read is returned as the error, and counts as
// none.
func LastDownscaleOf(sts *appsv1.StatefulSet) (time.Time, error) {
	if sts == nil {
		return time.Time{}, nil
	}
	v, ok := sts.Annotations[LastDownscaleAnnotation]
	if !ok {
		return time.Time{}, nil
	}
	return ParseLastDownscale(v)
}
