package scalingpolicy

import (
	"context"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/scaling"
)

// PlannerInput is the controller's observation of sp read from c, without
// its cache (lookup.Unindexed serves the cache's index fields) and without
// starting watches of source kinds: what `kubectl echelon plan sp` plans on.
func PlannerInput(ctx context.Context, c client.Client, sp *v1alpha1.ScalingPolicy, now time.Time) (scaling.Input, error) {
	r := &Reconciler{Client: lookup.Unindexed{Client: c}, apiReader: c, sources: &sourceWatches{}, now: func() time.Time { return now }}
	obs, err := r.observe(ctx, sp)
	return obs.in, err
}
