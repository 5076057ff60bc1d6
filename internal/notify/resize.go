package notify

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// DeriveResize is next with the events of the group's volume resize since
// next.ObservedResize appended (when record is set; counted either way):
// its start, each zone done, its end, and a block. A resize first seen
// when it is already Complete gives no event: history, not news.
func DeriveResize(next v1alpha1.NotificationStatus, st *v1alpha1.VolumeResizeStatus, groupPhase v1alpha1.RolloutPhase, record bool, now time.Time) v1alpha1.NotificationStatus {
	if st == nil {
		return next
	}
	prev := v1alpha1.ResizeObserved{}
	if next.ObservedResize != nil {
		prev = *next.ObservedResize
	}
	cur := v1alpha1.ResizeObserved{Phase: st.Phase, Zone: st.CurrentZone}
	add := func(typ v1alpha1.NotificationEventType, zone string) {
		appendEvent(&next, record, v1alpha1.NotificationEvent{Type: typ, Time: metav1.NewTime(now), Phase: groupPhase, Member: zone, Message: st.Message})
	}
	switch {
	case next.ObservedResize == nil && st.Phase == v1alpha1.VolumeResizeComplete:
	case cur == prev:
	case st.Phase == v1alpha1.VolumeResizeBlocked:
		if prev.Phase != v1alpha1.VolumeResizeBlocked {
			add(v1alpha1.NotificationVolumeResizeBlocked, "")
		}
	case st.Phase == v1alpha1.VolumeResizeResizing:
		if prev.Phase != v1alpha1.VolumeResizeResizing {
			add(v1alpha1.NotificationVolumeResizeStarted, st.CurrentZone)
		} else if prev.Zone != "" && prev.Zone != st.CurrentZone {
			add(v1alpha1.NotificationVolumeResizeZoneDone, prev.Zone)
		}
	case st.Phase == v1alpha1.VolumeResizeComplete:
		if prev.Phase == v1alpha1.VolumeResizeResizing && prev.Zone != "" {
			add(v1alpha1.NotificationVolumeResizeZoneDone, prev.Zone)
		}
		add(v1alpha1.NotificationVolumeResizeComplete, "")
	}
	next.ObservedResize = &cur
	return next
}
