package rolloutgroup

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// confirmWithLiveRead checks a plan that deletes pods against a live read of the
// member it deletes from, and plans again with what the API server returns.
// When the cache's pods are at least as new as the group's record of
// intents (budget.Freshness), its pods serve as that read: they show every
// pod the budget let go, by anyone, and the batch's decision is made on them
// again (podsCovering).
//
// The informer cache can be older than the last deletions: a new leader's cache
// after a handover, pods deleted by someone else, or a slow watch. Expectations
// (deletionExpectations) only cover this process's own deletions. One List of the
// member's pods per batch, served by the API server rather than the cache, shows
// every terminating pod, so the batch never counts on availability that is gone.
//
// Other members are read from the cache. The cache is a consistent snapshot of
// some past moment, and Echelon only ever deletes pods of one member at a time,
// finishing it before starting the next; so when the fresh plan turns to another
// member (the one read was done in the meantime), that member is read live too
// before any of its pods is deleted. At most one read per member, usually one.
func (r *Reconciler) confirmWithLiveRead(ctx context.Context, rg *v1alpha1.RolloutGroup, in rollout.Input, plan rollout.Plan) (rollout.Input, rollout.Plan, error) {
	// The input returned holds the pods read live; in's own members are left
	// as the cache showed them.
	in.Members = slices.Clone(in.Members)
	reader := r.apiReader
	if cached := r.cachedHolder(ctx, client.ObjectKeyFromObject(rg)); cached != nil && r.fresh.Covered(ctx, cached, 0, metrics.RequesterRollout) != "" {
		reader = r.Client
	}
	read := map[string]bool{}
	for len(plan.Delete) > 0 && !read[plan.Current] {
		i := slices.IndexFunc(in.Members, func(m rollout.Member) bool { return m.Name == plan.Current })
		if i < 0 || in.Members[i].StatefulSet == nil {
			return in, rollout.Plan{}, fmt.Errorf("plan deletes pods of %q, which is not a member with a StatefulSet", plan.Current)
		}
		live, err := r.podsOf(ctx, reader, in.Members[i])
		if err != nil {
			return in, rollout.Plan{}, err
		}
		in.Members[i].Pods = live
		read[plan.Current] = true
		fresh := rollout.Decide(in)
		if !samePods(plan.Delete, fresh.Delete) {
			metrics.PlansRevised.WithLabelValues(rg.Namespace, rg.Name).Inc()
		}
		plan = fresh
	}
	return in, plan, nil
}

// livePodsOf lists the member's pods from the API server, not the cache: the
// pods matching its selector that it controls.
func (r *Reconciler) livePodsOf(ctx context.Context, m rollout.Member) ([]*corev1.Pod, error) {
	return r.podsOf(ctx, r.apiReader, m)
}

// podsOf lists the member's pods from reader: the pods matching its
// selector that it controls.
func (r *Reconciler) podsOf(ctx context.Context, reader client.Reader, m rollout.Member) ([]*corev1.Pod, error) {
	pods, err := lookup.ListedReads{}.PodsOf(ctx, reader, m.StatefulSet)
	if err != nil {
		return nil, fmt.Errorf("read the pods of %s: %w", m.Name, err)
	}
	return pods, nil
}

func samePods(a, b []*corev1.Pod) bool {
	return slices.EqualFunc(a, b, func(x, y *corev1.Pod) bool { return x.UID == y.UID })
}
