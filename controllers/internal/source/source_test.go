/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package source

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func TestRecorderNamesGrafanaSource(t *testing.T) {
	for _, tc := range []struct {
		name   string
		labels map[string]string
		want   string
	}{
		{"a user's resource", nil, "Normal Scaled scaled to 3"},
		{"a compat resource", map[string]string{v1alpha1.GrafanaCompatLabel: "true"}, "Normal Scaled scaled to 3" + GrafanaNote},
		{"a label with another value", map[string]string{v1alpha1.GrafanaCompatLabel: "false"}, "Normal Scaled scaled to 3"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := events.NewFakeRecorder(1)
			rec := sourced{fakeEventRecorder{fake}}
			sp := &v1alpha1.ScalingPolicy{ObjectMeta: metav1.ObjectMeta{Name: "zone-b", Labels: tc.labels}}
			rec.Eventf(sp, nil, "Normal", "Scaled", "Scale", "scaled to %d", 3)
			if got := <-fake.Events; got != tc.want {
				t.Errorf("event %q, want %q", got, tc.want)
			}
		})
	}
}

// fakeEventRecorder adds AnnotatedEventf to client-go's fake, which the
// recorder interface of controller-runtime wants.
type fakeEventRecorder struct{ *events.FakeRecorder }

func (f fakeEventRecorder) AnnotatedEventf(regarding, related runtime.Object, _ map[string]string, eventtype, reason, action, note string, args ...any) {
	f.Eventf(regarding, related, eventtype, reason, action, note, args...)
}
