// Package budget reads a group's disruption view from the API server and
// records the hold that disruption.Decide allows, with an optimistic lock,
// before the caller acts: the one place where the RolloutGroup controller,
// the ScalingPolicy controller, the prepare-downscale webhook and the
// eviction webhook meet. A cache read alone never admits a disruption: the
// hold is read from the API server, and a write made meanwhile by another
// decision fails with a Conflict and the decision is made again.
package budget

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
)

// maxAttempts bounds how often a decision is made again after a Conflict:
// each Conflict means another decision was recorded meanwhile, and the next
// attempt sees it.
const maxAttempts = 4

// Holder is an object whose status records a group's hold: a RolloutGroup
// or a ZoneDisruptionBudget.
type Holder interface {
	client.Object
	DisruptionHold() *v1alpha1.DisruptionHold
	SetDisruptionHold(*v1alpha1.DisruptionHold)
}

// Decider builds the view of the holder as read live and decides on it.
type Decider[H Holder] func(ctx context.Context, holder H) (disruption.Verdict, error)

// Acquire reads the holder from the API server, decides, and, when the
// verdict allows the disruption and asks for it, records the hold in the
// holder's status with the resourceVersion read. On a Conflict it reads and
// decides again. With dryRun nothing is written. The verdict returned is the
// one recorded (or not needing a record). requester (a metrics.Requester*
// value) labels the conflicts counted; a caller may act on an allowed
// verdict only after Acquire returns it without error.
func Acquire[H Holder](ctx context.Context, c client.Client, live client.Reader, key types.NamespacedName, newHolder func() H, decide Decider[H], dryRun bool, requester string) (disruption.Verdict, error) {
	for attempt := 1; ; attempt++ {
		holder := newHolder()
		if err := live.Get(ctx, key, holder); err != nil {
			return disruption.Verdict{}, fmt.Errorf("live read of %s: %w", key.Name, err)
		}
		v, err := decide(ctx, holder)
		if err != nil || !v.Allowed || !v.Record || dryRun {
			return v, err
		}
		patched := holder.DeepCopyObject().(H)
		patched.SetDisruptionHold(v.Hold.Record())
		err = c.Status().Patch(ctx, patched, client.MergeFromWithOptions(holder, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			return v, nil
		case apierrors.IsConflict(err) && attempt < maxAttempts:
			metrics.DisruptionHoldConflicts.WithLabelValues(requester).Inc()
			continue
		default:
			return disruption.Verdict{}, fmt.Errorf("record the disruption hold of zone %s in %s: %w", v.Hold.Zone, key.Name, err)
		}
	}
}
