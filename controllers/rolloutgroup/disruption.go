package rolloutgroup

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// acquireBudget records the intent of the plan's batch in the group's
// status.disruption before any pod of it is taken: budget.Acquire reads the
// group from the API server, decides again on the intents it records
// (another decision may have recorded one the cache does not show yet: a
// ScalingPolicy's downscale, an admitted eviction) with every member's pods
// as the API server lists them after that read, and writes the intent with
// an optimistic lock. A refusal turns the plan into a wait and writes
// nothing. It returns the plan and the record the API server now holds, to
// serve as written status. The batch's hooks have been called before: the
// act follows the decision at once, under budget.Fence.
//
// When pre is set (what must be on record before the batch goes: its
// AfterBatch gate, its ordinals for the version-leak report), the intent's
// write carries it too, and recorded is the status that write left: one
// write before the act, not two. recorded is nil when nothing was written.
func (r *Reconciler) acquireBudget(ctx context.Context, rg *v1alpha1.RolloutGroup, in rollout.Input, plan rollout.Plan, pre *v1alpha1.RolloutGroupStatus) (_ rollout.Plan, held *v1alpha1.DisruptionHold, recorded *v1alpha1.RolloutGroupStatus, _ error) {
	held = rg.Status.Disruption
	if !plan.Budget.Record() {
		return plan, held, nil, nil
	}
	req := plan.Budget.Request
	if _, shared := budget.SharedKey(rg); shared {
		return r.acquireShared(ctx, rg, in, plan)
	}
	// viewRV is the cache's version the last decision was made on, ""
	// when its pods were read live.
	var viewRV string
	decide := func(ctx context.Context, holder *v1alpha1.RolloutGroup) (disruption.Verdict, error) {
		held = holder.Status.Disruption
		members, at, err := r.podsCovering(ctx, holder, in.Members)
		if err != nil {
			return disruption.Verdict{}, err
		}
		viewRV = at
		v, err := budget.ViewOf(holder, members, v1alpha1.DisruptionRollout, r.now(), in.Deleting.Has)
		if err != nil {
			return disruption.Verdict{}, err
		}
		return disruption.Decide(v, req), nil
	}
	var written *v1alpha1.RolloutGroup
	also := func(patched *v1alpha1.RolloutGroup) {
		if pre != nil {
			patched.Status = keepHold(patched.Status, *pre)
		}
		st := patched.Status
		recorded = &st
		written = patched // the API server's answer, once written
	}
	key := types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}
	verdict, err := budget.AcquireWith(ctx, r.Client, budget.FirstRead(r.apiReader, r.cachedHolder(ctx, key)), key, func() *v1alpha1.RolloutGroup { return &v1alpha1.RolloutGroup{} },
		decide, false, metrics.RequesterRollout, also)
	if err != nil {
		return plan, rg.Status.Disruption, nil, err
	}
	if !verdict.Allowed {
		plan.WaitForBudget(verdict)
		return plan, held, nil, nil
	}
	r.fresh.Wrote(written, viewRV)
	plan.Budget.Verdict = verdict
	return plan, disruption.RecordOf(verdict.Record), recorded, nil
}

// freshWait bounds how long a batch waits for the cache to cover the
// budget's record before its pods are read live: the act of the record's
// last writer (this group's last batch, an admitted eviction) reaches the
// cache in milliseconds.
const freshWait = 20 * time.Millisecond

// podsCovering is members with their pods as the cache holds them, when
// the cache's pods are at least as new as holder's record (and at returns
// the cache's version), or else as the API server lists them (at is ""):
// a decision that lets pods go is made on a view not older than the record
// it is judged with. The cache's pods are listed after its version was
// read, so they are at least that new.
func (r *Reconciler) podsCovering(ctx context.Context, holder budget.Holder, members []rollout.Member) (_ []rollout.Member, at string, _ error) {
	if at = r.fresh.Covered(ctx, holder, freshWait, metrics.RequesterRollout); at == "" {
		out, err := r.withLivePods(ctx, members)
		return out, "", err
	}
	out := slices.Clone(members)
	for i := range out {
		if out[i].StatefulSet == nil {
			continue
		}
		pods, err := r.podsOf(ctx, r.Client, out[i])
		if err != nil {
			return nil, "", err
		}
		out[i].Pods = pods
	}
	return out, at, nil
}

// cachedHolder is the group as the cache holds it, for the first read of
// budget.AcquireWith (budget.FirstRead): when it is the latest, the intent
// is decided and written with no read of the group; when not, its write
// meets a Conflict and the group is read live. nil when the cache has none.
func (r *Reconciler) cachedHolder(ctx context.Context, key types.NamespacedName) *v1alpha1.RolloutGroup {
	cached := &v1alpha1.RolloutGroup{}
	if err := r.Get(ctx, key, cached); err != nil {
		return nil
	}
	return cached
}

// acquireShared is acquireBudget for a group that shares a
// ZoneDisruptionBudget: the intent is recorded in that budget's status,
// decided on every sharing group's members and pods as read live (or from
// the cache, when its pods cover the budget's record), and the
// group's own hold stays as it is. What must be on record in the group
// before the batch goes is then written after the intent, in a write of its
// own (recorded is nil): the act still waits for both.
func (r *Reconciler) acquireShared(ctx context.Context, rg *v1alpha1.RolloutGroup, in rollout.Input, plan rollout.Plan) (rollout.Plan, *v1alpha1.DisruptionHold, *v1alpha1.RolloutGroupStatus, error) {
	req := plan.Budget.Request
	decide := func(ctx context.Context, zdb *v1alpha1.ZoneDisruptionBudget) (disruption.Verdict, error) {
		members, at, err := r.podsCovering(ctx, zdb, in.Members)
		if err != nil {
			return disruption.Verdict{}, err
		}
		// The other groups' members and pods from where this group's came.
		reader := r.apiReader
		if at != "" {
			reader = r.Client
		}
		v, err := budget.SharedView(ctx, reader, zdb, v1alpha1.DisruptionRollout, r.now(),
			budget.Requester{Group: rg, Members: members, Deleting: in.Deleting.Has}, nil)
		if err != nil {
			return disruption.Verdict{}, err
		}
		return disruption.Decide(v, req), nil
	}
	verdict, err := budget.AcquireShared(ctx, r.Client, r.apiReader, rg, decide, false, metrics.RequesterRollout)
	if err != nil {
		return plan, rg.Status.Disruption, nil, err
	}
	if !verdict.Allowed {
		plan.WaitForBudget(verdict)
		return plan, rg.Status.Disruption, nil, nil
	}
	plan.Budget.Verdict = verdict
	return plan, rg.Status.Disruption, nil, nil
}

// budgetKey is where the group's intents are recorded: the
// ZoneDisruptionBudget it shares, or the group itself.
func budgetKey(rg *v1alpha1.RolloutGroup) (types.NamespacedName, bool) {
	if key, shared := budget.SharedKey(rg); shared {
		return key, true
	}
	return types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}, false
}

// withLivePods is members with each one's pods listed from the API server:
// a decision that lets pods go is made on pods read after the record it is
// judged with, so that a pod a recorded intent names is never judged on a
// view older than the intent (confirmWithLiveRead's read of the batch's
// member came before it).
//
// The members are listed at once, each in its own request: the batch's act
// waits for the slowest list, not for their sum.
func (r *Reconciler) withLivePods(ctx context.Context, members []rollout.Member) ([]rollout.Member, error) {
	out := slices.Clone(members)
	errs := make([]error, len(out))
	var wg sync.WaitGroup
	for i := range out {
		if out[i].StatefulSet == nil {
			continue
		}
		wg.Go(func() { out[i].Pods, errs[i] = r.livePodsOf(ctx, out[i]) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// fenced is the context the plan's act runs under: for a batch the budget
// allowed, one that ends at its intent's act deadline (budget.Fence).
func fenced(ctx context.Context, plan rollout.Plan) (context.Context, context.CancelFunc) {
	if b := plan.Budget; b != nil && b.Verdict.Allowed && len(plan.Delete) > 0 {
		return budget.Fence(ctx, b.Verdict)
	}
	return ctx, func() {}
}

// withdrawUntaken withdraws from the batch's recorded intent the pods the
// act did not take (taken is how many it did, in the batch's order): a
// partition write refused because the StatefulSet changed, a deletion that
// found the pod gone or replaced, a failed request. Those pods are not on
// their way out, and must not stop the other zones until the intent
// expires.
func (r *Reconciler) withdrawUntaken(ctx context.Context, rg *v1alpha1.RolloutGroup, plan rollout.Plan, taken int32) error {
	b := plan.Budget
	if b == nil || !b.Verdict.Allowed || int(taken) >= len(plan.Delete) {
		return nil
	}
	var untaken []string
	for _, pod := range plan.Delete[taken:] {
		untaken = append(untaken, pod.Name)
	}
	return r.withdraw(ctx, rg, b.Verdict.Intent, untaken)
}

// withdraw removes pods from the recorded intent in, in the record of the
// group's budget: its own status, or the ZoneDisruptionBudget it shares.
func (r *Reconciler) withdraw(ctx context.Context, rg *v1alpha1.RolloutGroup, in disruption.Intent, pods []string) error {
	key, shared := budgetKey(rg)
	if shared {
		return budget.Withdraw(ctx, r.Client, r.apiReader, key, budget.NewZDB, in, pods)
	}
	return budget.Withdraw(ctx, r.Client, r.apiReader, key, func() *v1alpha1.RolloutGroup { return &v1alpha1.RolloutGroup{} }, in, pods)
}

// countBudgetDecision counts the budget's answer to the pass's batch: a
// refusal, or a batch allowed and (at least partly) deleted.
func countBudgetDecision(plan rollout.Plan, acted actionResult) {
	switch b := plan.Budget; {
	case b == nil:
	case !b.Verdict.Allowed:
		metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterRollout, "denied", b.Verdict.Code).Inc()
	case acted.deleted > 0 && b.Reserved:
		// A slot under the zone's reservation, with no record written.
		metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterRollout, "allowed", "Reserved").Inc()
	case acted.deleted > 0:
		metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterRollout, "allowed", "").Inc()
	}
}

// keepHold is next with written's status.disruption, status.notifications
// and status.volumeResize. Only budget.Acquire writes the hold, with an
// optimistic lock, only the notifier writes status.notifications, and only
// the volume resizer status.volumeResize; the
// controller's own status writes are merge patches from written to next,
// which then never send those fields: they neither clear nor overwrite what
// another writer recorded.
func keepHold(written, next v1alpha1.RolloutGroupStatus) v1alpha1.RolloutGroupStatus {
	next.Disruption = written.Disruption.DeepCopy()
	next.Notifications = written.Notifications.DeepCopy()
	next.VolumeResize = written.VolumeResize.DeepCopy()
	return next
}

// fresherHold is the later of two views of status.disruption (the cache's
// and this process's own record): the one whose last intent was decided
// last, the cache's when they tie. The cache may not show an intent this
// process recorded a moment ago, and this process's record does not show
// intents other decisions recorded since.
func fresherHold(cached, own *v1alpha1.DisruptionHold) *v1alpha1.DisruptionHold {
	if lastDecided(own).After(lastDecided(cached)) {
		return own.DeepCopy()
	}
	return cached.DeepCopy()
}

func lastDecided(h *v1alpha1.DisruptionHold) time.Time {
	var last time.Time
	if h != nil {
		for _, in := range h.Intents {
			if in.DecidedAt.After(last) {
				last = in.DecidedAt.Time
			}
		}
	}
	return last
}
