package volumeresize

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// event is an Event a pass tells.
type event struct {
	kind, reason, message string
}

// events are the Events of the change from old to next status: the
// resize's start, a block, each zone resized, the end.
func events(old, next *v1alpha1.VolumeResizeStatus) []event {
	if next == nil {
		return nil
	}
	var out []event
	oldPhase := v1alpha1.VolumeResizePhase("")
	if old != nil {
		oldPhase = old.Phase
	}
	switch {
	case next.Phase == v1alpha1.VolumeResizeBlocked && (oldPhase != next.Phase || old.Message != next.Message):
		out = append(out, event{corev1.EventTypeWarning, v1alpha1.ReasonVolumeResizeBlocked, next.Message})
	case next.Phase == v1alpha1.VolumeResizeResizing && oldPhase != v1alpha1.VolumeResizeResizing:
		out = append(out, event{corev1.EventTypeNormal, v1alpha1.ReasonVolumeResizeStarted,
			fmt.Sprintf("volume resize started, zone by zone: %s", zoneNames(next))})
	}
	for _, z := range next.Zones {
		if z.Phase == v1alpha1.ZoneVolumeComplete && zonePhase(old, z.Name) != v1alpha1.ZoneVolumeComplete && oldPhase == v1alpha1.VolumeResizeResizing {
			out = append(out, event{corev1.EventTypeNormal, v1alpha1.ReasonZoneResized, fmt.Sprintf("%s: %d claims resized, StatefulSet replaced", z.Name, len(z.Claims))})
		}
	}
	if next.Phase == v1alpha1.VolumeResizeComplete && oldPhase == v1alpha1.VolumeResizeResizing {
		out = append(out, event{corev1.EventTypeNormal, v1alpha1.ReasonVolumeResizeComplete, "every claim and member has the size asked for"})
	}
	return out
}

func zonePhase(st *v1alpha1.VolumeResizeStatus, zone string) v1alpha1.ZoneVolumePhase {
	if st == nil {
		return ""
	}
	for _, z := range st.Zones {
		if z.Name == zone {
			return z.Phase
		}
	}
	return ""
}

func zoneNames(st *v1alpha1.VolumeResizeStatus) string {
	names := make([]string, 0, len(st.Zones))
	for _, z := range st.Zones {
		names = append(names, z.Name)
	}
	return strings.Join(names, ", ")
}
