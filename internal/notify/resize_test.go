package notify

import (
	"slices"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func TestDeriveResize(t *testing.T) {
	now := time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)
	resizing := func(zone string) *v1alpha1.VolumeResizeStatus {
		return &v1alpha1.VolumeResizeStatus{Phase: v1alpha1.VolumeResizeResizing, CurrentZone: zone, Message: zone + ": expanding"}
	}
	complete := &v1alpha1.VolumeResizeStatus{Phase: v1alpha1.VolumeResizeComplete}
	blocked := &v1alpha1.VolumeResizeStatus{Phase: v1alpha1.VolumeResizeBlocked, Message: "StorageClass slow does not set allowVolumeExpansion: true"}
	tests := []struct {
		name  string
		steps []*v1alpha1.VolumeResizeStatus
		want  []string
	}{
		{name: "a resize from start to end", steps: []*v1alpha1.VolumeResizeStatus{nil, resizing("a"), resizing("a"), resizing("b"), resizing("c"), complete},
			want: []string{"VolumeResizeStarted a", "VolumeResizeZoneDone a", "VolumeResizeZoneDone b", "VolumeResizeZoneDone c", "VolumeResizeComplete "}},
		{name: "a resize seen complete is history", steps: []*v1alpha1.VolumeResizeStatus{complete, complete}},
		{name: "blocked once, then started", steps: []*v1alpha1.VolumeResizeStatus{blocked, blocked, resizing("a")},
			want: []string{"VolumeResizeBlocked ", "VolumeResizeStarted a"}},
		{name: "a second resize after the first", steps: []*v1alpha1.VolumeResizeStatus{resizing("a"), complete, resizing("a")},
			want: []string{"VolumeResizeStarted a", "VolumeResizeZoneDone a", "VolumeResizeComplete ", "VolumeResizeStarted a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ns v1alpha1.NotificationStatus
			for _, st := range tt.steps {
				ns = DeriveResize(ns, st, v1alpha1.PhaseComplete, true, now)
			}
			var got []string
			for _, ev := range ns.Events {
				got = append(got, string(ev.Type)+" "+ev.Member)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("events %q, want %q", got, tt.want)
			}
			if int(ns.Sequence) != len(tt.want) {
				t.Fatalf("sequence %d, want %d", ns.Sequence, len(tt.want))
			}
		})
	}
}
