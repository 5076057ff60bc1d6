package rolloutgroup

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// observe reads the group's members and their pods from the cache into the
// planner's input. It makes no API calls: every read is served by informers
// (a batch is confirmed by a live read before it is deleted: confirmWithLiveRead).
// The deletion expectations and the partition writes not cached yet
// (partitionWrites) are this process's own.
func (r *Reconciler) observe(ctx context.Context, rg *v1alpha1.RolloutGroup, now time.Time) (rollout.Input, error) {
	in, allPods, err := lookup.ObserveRolloutGroup(ctx, r.Client, lookup.IndexedReads{}, rg, now)
	if err != nil || in.InvalidSpec != "" {
		return in, err
	}
	in.Deleting = r.deletions.Pending(types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}, allPods, now)
	in.Members = r.partitions.overlay(in.Members)
	return in, nil
}
