package budget

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
)

// A volume resize (spec.volumeClaimSizes) holds the zone it grows for the
// whole of its work with a Resize intent naming no pod (a hold), and asks
// for the pods it restarts with a Resize intent naming them, both decided by
// disruption.Decide on the group's one record, as every rollout, downscale
// and eviction is.

// ResizeHolder is who holds a group's zone for its resize, in the record.
func ResizeHolder(rg *v1alpha1.RolloutGroup) string {
	return fmt.Sprintf("RolloutGroup %s (volume resize)", rg.Name)
}

// AcquireResize decides req (reason Resize: a hold when it names no pod, a
// restart otherwise) for rg on its record, the group's own or the
// ZoneDisruptionBudget it shares, read live with its members' pods, and
// records the verdict's intent with an optimistic lock when it is allowed.
func AcquireResize(ctx context.Context, c client.Client, live client.Reader, rg *v1alpha1.RolloutGroup, req disruption.Request, now func() time.Time) (disruption.Verdict, error) {
	req.Reason, req.Holder = v1alpha1.DisruptionResize, ResizeHolder(rg)
	if _, shared := SharedKey(rg); shared {
		decide := func(ctx context.Context, zdb *v1alpha1.ZoneDisruptionBudget) (disruption.Verdict, error) {
			v, err := SharedView(ctx, live, zdb, v1alpha1.DisruptionResize, now(), Requester{Group: rg}, nil)
			if err != nil {
				return disruption.Verdict{}, err
			}
			return disruption.Decide(v, req), nil
		}
		return AcquireShared(ctx, c, live, rg, decide, false, metrics.RequesterResize)
	}
	decide := func(ctx context.Context, g *v1alpha1.RolloutGroup) (disruption.Verdict, error) {
		v, err := GroupView(ctx, live, g, v1alpha1.DisruptionResize, now())
		if err != nil {
			return disruption.Verdict{}, err
		}
		return disruption.Decide(v, req), nil
	}
	key := types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}
	return Acquire(ctx, c, live, key, func() *v1alpha1.RolloutGroup { return &v1alpha1.RolloutGroup{} }, decide, false, metrics.RequesterResize)
}

// ResizeHold is the zone rg's resize holds in h, and until when; "" when
// none.
func ResizeHold(rg *v1alpha1.RolloutGroup, h *v1alpha1.DisruptionHold) (zone string, until time.Time) {
	for _, in := range disruption.IntentsOf(h) {
		if in.IsHold() && in.Holder == ResizeHolder(rg) {
			return in.Zone, in.Expires
		}
	}
	return "", time.Time{}
}

// ReadResizeHold reads rg's record live (the group, or the
// ZoneDisruptionBudget it shares) and returns ResizeHold of it.
func ReadResizeHold(ctx context.Context, live client.Reader, rg *v1alpha1.RolloutGroup) (string, time.Time, error) {
	key, shared := SharedKey(rg)
	if !shared {
		zone, until := ResizeHold(rg, rg.Status.Disruption)
		return zone, until, nil
	}
	zdb := NewZDB()
	if err := live.Get(ctx, key, zdb); err != nil {
		return "", time.Time{}, client.IgnoreNotFound(err)
	}
	zone, until := ResizeHold(rg, zdb.Status.Disruption)
	return zone, until, nil
}

// ReleaseResize drops rg's resize hold from its record, with an optimistic
// lock, once the resize is complete: the other zones go at once rather
// than when the hold expires.
func ReleaseResize(ctx context.Context, c client.Client, live client.Reader, rg *v1alpha1.RolloutGroup) error {
	if key, shared := SharedKey(rg); shared {
		return release(ctx, c, live, key, NewZDB, ResizeHolder(rg))
	}
	key := types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}
	return release(ctx, c, live, key, func() *v1alpha1.RolloutGroup { return &v1alpha1.RolloutGroup{} }, ResizeHolder(rg))
}

func release[H Holder](ctx context.Context, c client.Client, live client.Reader, key types.NamespacedName, newHolder func() H, holder string) error {
	err := rewrite(ctx, c, live, key, newHolder, func(intents []disruption.Intent) ([]disruption.Intent, bool) {
		kept := slices.DeleteFunc(slices.Clone(intents), func(in disruption.Intent) bool { return in.IsHold() && in.Holder == holder })
		return kept, len(kept) != len(intents)
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release the resize hold: %w", err)
	}
	return nil
}
