package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	// ResizePhase is 1 for the phase of a group's volume resize
	// (Resizing, Complete, Blocked), 0 for the others.
	ResizePhase = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_volume_resize_phase",
		Help: "Phase of a RolloutGroup's volume resize (spec.volumeClaimSizes): 1 for the current phase (Resizing, Complete, Blocked).",
	}, []string{labelNamespace, labelGroup, labelPhase})

	// ResizeClaims counts a group's claims of the templates resized, by
	// member and phase (Pending, Expanding, FileSystemResizePending, Resized).
	ResizeClaims = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "echelon_volume_resize_claims",
		Help: "PersistentVolumeClaims of a RolloutGroup's volume resize, by member and phase (Pending, Expanding, FileSystemResizePending, Resized).",
	}, []string{labelNamespace, labelGroup, labelStatefulSet, labelPhase})

	// ResizeActions counts what a resize did: claims patched, pods
	// restarted, StatefulSets replaced.
	ResizeActions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "echelon_volume_resize_actions_total",
		Help: "Acts of a RolloutGroup's volume resize, by member and action (claim_patched, pod_restarted, statefulset_replaced).",
	}, []string{labelNamespace, labelGroup, labelStatefulSet, "action"})
)

// RequesterResize is the requester of a volume resize's disruption
// decisions (its holds and restarts).
const RequesterResize = "resize"

// Actions of ResizeActions.
const (
	ResizeClaimPatched        = "claim_patched"
	ResizePodRestarted        = "pod_restarted"
	ResizeStatefulSetReplaced = "statefulset_replaced"
)

func init() {
	crmetrics.Registry.MustRegister(ResizePhase, ResizeClaims, ResizeActions)
}

// SetResizePhase sets the group's resize phase gauge; "" clears it.
func SetResizePhase(namespace, group, phase string) {
	for _, p := range []string{"Resizing", "Complete", "Blocked"} {
		v := 0.0
		if p == phase {
			v = 1
		}
		ResizePhase.WithLabelValues(namespace, group, p).Set(v)
	}
}

func forgetResize(labels prometheus.Labels) {
	ResizePhase.DeletePartialMatch(labels)
	ResizeClaims.DeletePartialMatch(labels)
	ResizeActions.DeletePartialMatch(labels)
}
