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
// attempt sees it. Concurrent evictions of one zone (a drain) each win one
// round, so the bound is well above a wave's size; the caller's context
// deadline (the webhook's) bounds the time.
const maxAttempts = 64

// Holder is an object whose status records a group's intents: a
// RolloutGroup or a ZoneDisruptionBudget.
type Holder interface {
	client.Object
	DisruptionHold() *v1alpha1.DisruptionHold
	SetDisruptionHold(*v1alpha1.DisruptionHold)
}

// Decider builds the view of the holder as read live and decides on it.
type Decider[H Holder] func(ctx context.Context, holder H) (disruption.Verdict, error)

// Acquire reads the holder from the API server, decides, and, when the
// verdict allows the disruption, records its intent (with the record's
// intents not yet done) in the holder's status with the resourceVersion
// read. On a Conflict it reads and decides again, until maxAttempts or the
// context's deadline. A refusal writes nothing; with dryRun nothing is
// written. The verdict returned is the one recorded. requester (a
// metrics.Requester* value) labels the conflicts counted. A caller acts on
// an allowed verdict only after Acquire returns it without error, and
// under Fence.
func Acquire[H Holder](ctx context.Context, c client.Client, live client.Reader, key types.NamespacedName, newHolder func() H, decide Decider[H], dryRun bool, requester string) (disruption.Verdict, error) {
	return AcquireWith(ctx, c, live, key, newHolder, decide, dryRun, requester, nil)
}

// AcquireWith is Acquire whose write also carries what also sets on the
// holder as read (after its intents are set): what the caller must have on
// record before it acts, in the same write as the intent.
func AcquireWith[H Holder](ctx context.Context, c client.Client, live client.Reader, key types.NamespacedName, newHolder func() H, decide Decider[H], dryRun bool, requester string, also func(H)) (disruption.Verdict, error) {
	for attempt := 1; ; attempt++ {
		holder := newHolder()
		if err := live.Get(ctx, key, holder); err != nil {
			return disruption.Verdict{}, fmt.Errorf("live read of %s: %w", key.Name, err)
		}
		v, err := decide(ctx, holder)
		if err != nil || !v.Allowed || dryRun {
			return v, err
		}
		patched := holder.DeepCopyObject().(H)
		patched.SetDisruptionHold(disruption.RecordOf(v.Record))
		if also != nil {
			also(patched)
		}
		err = c.Status().Patch(ctx, patched, client.MergeFromWithOptions(holder, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			return v, nil
		case apierrors.IsConflict(err) && attempt < maxAttempts && ctx.Err() == nil:
			metrics.DisruptionHoldConflicts.WithLabelValues(requester).Inc()
			continue
		default:
			return disruption.Verdict{}, fmt.Errorf("record the disruption of zone %s in %s: %w", v.Intent.Zone, key.Name, err)
		}
	}
}

// Fence is the context an allowed verdict's act runs under: it ends at the
// intent's act deadline, so that an act delayed past it (a slow API server,
// a stalled process) is not made after its intent may have expired for the
// other deciders.
func Fence(ctx context.Context, v disruption.Verdict) (context.Context, context.CancelFunc) {
	return context.WithDeadline(ctx, disruption.ActDeadline(v.Intent.Decided))
}

// Withdraw removes pods from the recorded intent in (matched by zone,
// reason, holder and the second it was decided) after its holder's act
// failed for them for certain (a refused write, a pod already gone): a pod
// it did not take must not stop other zones until the intent expires. An
// intent left with no pod is dropped. It reads the holder from the API
// server and writes with an optimistic lock, deciding again on a Conflict.
func Withdraw[H Holder](ctx context.Context, c client.Client, live client.Reader, key types.NamespacedName, newHolder func() H, in disruption.Intent, pods []string) error {
	err := rewrite(ctx, c, live, key, newHolder, func(intents []disruption.Intent) ([]disruption.Intent, bool) {
		return disruption.Withdrawn(intents, in, pods)
	})
	if err != nil {
		return fmt.Errorf("withdraw the pods %v of zone %s not taken: %w", pods, in.Zone, err)
	}
	return nil
}

// rewrite reads the holder's record live, edits it, and writes it back
// with an optimistic lock when edit changed it, editing again on a
// Conflict.
func rewrite[H Holder](ctx context.Context, c client.Client, live client.Reader, key types.NamespacedName, newHolder func() H,
	edit func([]disruption.Intent) ([]disruption.Intent, bool)) error {
	for attempt := 1; ; attempt++ {
		holder := newHolder()
		if err := live.Get(ctx, key, holder); err != nil {
			return fmt.Errorf("live read of %s: %w", key.Name, err)
		}
		intents, changed := edit(disruption.IntentsOf(holder.DisruptionHold()))
		if !changed {
			return nil
		}
		patched := holder.DeepCopyObject().(H)
		patched.SetDisruptionHold(disruption.RecordOf(intents))
		err := c.Status().Patch(ctx, patched, client.MergeFromWithOptions(holder, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			return nil
		case apierrors.IsConflict(err) && attempt < maxAttempts && ctx.Err() == nil:
			continue
		default:
			return fmt.Errorf("write the record of %s: %w", key.Name, err)
		}
	}
}
