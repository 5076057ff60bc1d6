package rolloutgroup

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// observe reads the group's members and their pods from the cache into the
// planner's input. It makes no API calls: every read is served by informers
// (a batch is confirmed by a live read before it is deleted: confirmWithLiveRead).
// The deletion expectations are this process's own.
func (r *Reconciler) observe(ctx context.Context, rg *v1alpha1.RolloutGroup, now time.Time) (rollout.Input, error) {
	in, allPods, err := observeGroup(ctx, r.Client, lookup.IndexedReads{}, rg, now)
	if err != nil || in.InvalidSpec != "" {
		return in, err
	}
	in.Deleting = r.deletions.Pending(types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}, allPods, now)
	return in, nil
}

// observeGroup is the observation of a group that the controller and the
// kubectl plugin's dry run share: lookup's members and pods, and where the
// rollout stands in spec.steps and the restart spec.restartAt asks for.
func observeGroup(ctx context.Context, c client.Reader, reads lookup.GroupReads, rg *v1alpha1.RolloutGroup, now time.Time) (rollout.Input, []*corev1.Pod, error) {
	in, allPods, err := lookup.ObserveRolloutGroup(ctx, c, reads, rg, now)
	in.Steps = stepsInput(rg)
	if rg.Spec.RestartAt != nil {
		in.RestartAt = rg.Spec.RestartAt.Time
	}
	return in, allPods, err
}

// PlannerInput is the controller's observation of rg read from c with plain
// lists (no cache index), without what only a running controller knows (its
// deletion expectations): what `kubectl echelon plan` plans on.
func PlannerInput(ctx context.Context, c client.Reader, rg *v1alpha1.RolloutGroup, now time.Time) (rollout.Input, error) {
	in, _, err := observeGroup(ctx, c, lookup.ListedReads{}, rg, now)
	return in, err
}
