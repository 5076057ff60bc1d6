package scalingpolicy

import (
	"context"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
)

// observation is what a pass read: the planner's input and the objects the
// controller acts on.
type observation = lookup.ScalingObservation

// observe reads the target, the source and the target's RolloutGroup from
// the cache (a resource's scale subresource from the API server), and
// watches each source kind it reads.
func (r *Reconciler) observe(ctx context.Context, sp *v1alpha1.ScalingPolicy) (observation, error) {
	return lookup.ObserveScalingPolicy(ctx, r.Client, r.apiReader, r.sources.watch, sp, r.now())
}
