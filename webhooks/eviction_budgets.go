package webhooks

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/metrics"
)

// What the eviction webhook reads to find and decide a pod's budget, and
// writes: the budget's hold, and the Event of a refusal.
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch
// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups;zonedisruptionbudgets,verbs=get;list;watch
// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups/status;zonedisruptionbudgets/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Kinds of the budgets that judge evictions.
const (
	KindRolloutGroup         = "RolloutGroup"
	KindZoneDisruptionBudget = "ZoneDisruptionBudget"
)

// errBudgetGone says the budget was deleted after it was found: it judges
// nothing any more.
var errBudgetGone = errors.New("the budget no longer exists")

// Budget is one budget that judges evictions of a pod.
type Budget struct {
	// Kind is KindRolloutGroup or KindZoneDisruptionBudget.
	Kind      string
	Namespace string
	Name      string
	UID       types.UID
	// Zone is the pod's zone: the StatefulSet that owns it.
	Zone string
	// Group is, for a ZoneDisruptionBudget that a RolloutGroup shares
	// (spec.sharedDisruptionBudget), the group that claims the pod: its
	// budget judges the pod, in the shared record.
	Group string
}

// String is "RolloutGroup ingester", for messages.
func (b Budget) String() string { return b.Kind + " " + b.Name }

// EvictionBudgets finds the budgets of a pod and decides an eviction on
// them. The eviction webhook takes it as an interface so that its unit tests
// give it fixed answers; the operator's (NewEvictionBudgets) finds budgets in
// the cache and decides on what the API server holds.
type EvictionBudgets interface {
	// Pod is the pod to evict, nil when it does not exist.
	Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error)
	// Judging lists the budgets that judge evictions of pod: every
	// RolloutGroup claiming its StatefulSet, or else every
	// ZoneDisruptionBudget selecting it. unusable says, for each budget that
	// covers the pod but cannot judge it (an invalid partition regex, a pod
	// no StatefulSet owns), why.
	Judging(ctx context.Context, pod *corev1.Pod) (budgets []Budget, unusable []string, err error)
	// Judge decides the eviction of pod on b as the cache holds it,
	// writing nothing: a refusal there is final, an allowance is
	// confirmed by Acquire. errBudgetGone when b no longer exists.
	Judge(ctx context.Context, b Budget, pod *corev1.Pod) (disruption.Verdict, error)
	// Acquire decides the eviction of pod on b as the API server holds it,
	// and records the intent the decision allows unless dryRun
	// (budget.Acquire). errBudgetGone when b no longer exists.
	Acquire(ctx context.Context, b Budget, pod *corev1.Pod, dryRun bool) (disruption.Verdict, error)
}

// liveBudgets is the operator's EvictionBudgets: which budgets cover a pod
// comes from the cache (a budget created a moment ago may be missed, as a
// PodDisruptionBudget the disruption controller has not observed is), the
// decision from the API server.
type liveBudgets struct {
	cache  client.Reader
	live   client.Reader
	writer client.Client
	now    func() time.Time
	// fresh says whether the cache's pods are at least as new as a
	// budget's record: a decision it covers is confirmed on the cache, with
	// no request; nil reads every confirmation live.
	fresh *budget.Freshness
	// turns holds, per budget (by UID), the turn to record an intent in it.
	turns sync.Map
	// written holds, per budget (by UID), the budget as this replica last
	// wrote it: newer than the cache until the watch brings the write back.
	written sync.Map
}

// NewEvictionBudgets returns the operator's EvictionBudgets: it finds
// budgets through cache (the manager's, with lookup's indexes), decides
// first on it, confirms an allowance on it when fresh says its pods are at
// least as new as the budget's record and otherwise on what live (the API
// server) holds, and records intents through writer. A nil fresh confirms
// every allowance live.
func NewEvictionBudgets(cache, live client.Reader, writer client.Client, now func() time.Time, fresh *budget.Freshness) EvictionBudgets {
	b := &liveBudgets{cache: cache, live: live, now: now, fresh: fresh}
	b.writer = rememberingWriter{Client: writer, written: &b.written}
	return b
}

func (b *liveBudgets) Pod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	key := types.NamespacedName{Namespace: namespace, Name: name}
	pod := &corev1.Pod{}
	err := b.cache.Get(ctx, key, pod)
	if apierrors.IsNotFound(err) {
		// A pod created a moment ago may not be cached yet; an eviction of
		// a pod that does not exist is answered 404 by the API server.
		err = b.live.Get(ctx, key, pod)
	}
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get pod %s: %w", name, err)
	}
	return pod, nil
}

func (b *liveBudgets) Judging(ctx context.Context, pod *corev1.Pod) ([]Budget, []string, error) {
	owner := lookup.OwnerStatefulSet(pod)
	if owner != "" {
		sts := &appsv1.StatefulSet{}
		if err := getOrNil(ctx, b.cache, pod.Namespace, owner, sts); err != nil {
			return nil, nil, err
		}
		if sts.Name == "" {
			sts = nil
		}
		groups, err := lookup.GroupsClaiming(ctx, b.cache, pod.Namespace, owner, sts)
		if err != nil {
			return nil, nil, err
		}
		if len(groups) > 0 {
			budgets, unusable := groupBudgets(groups, owner)
			// A shared budget is known by its UID (the record this replica
			// last wrote, its turn to record); one not found has none, and
			// refuses (budget.MissingShared).
			for i := range budgets {
				if budgets[i].Group == "" {
					continue
				}
				zdb := &v1alpha1.ZoneDisruptionBudget{}
				if err := b.cache.Get(ctx, types.NamespacedName{Namespace: budgets[i].Namespace, Name: budgets[i].Name}, zdb); err == nil {
					budgets[i].UID = zdb.UID
				} else if !apierrors.IsNotFound(err) {
					return nil, nil, fmt.Errorf("get ZoneDisruptionBudget %s: %w", budgets[i].Name, err)
				}
			}
			return budgets, unusable, nil
		}
	}
	var list v1alpha1.ZoneDisruptionBudgetList
	if err := b.cache.List(ctx, &list, client.InNamespace(pod.Namespace)); err != nil {
		return nil, nil, fmt.Errorf("list ZoneDisruptionBudgets: %w", err)
	}
	budgets, unusable := zdbBudgets(list.Items, pod, owner)
	return budgets, unusable, nil
}

// groupBudgets are the budgets of the groups that claim the StatefulSet
// zone, by name. A pod of a group is judged by the group alone, whatever
// ZoneDisruptionBudget also selects it: the group's hold orders its
// rollouts, downscales and evictions.
func groupBudgets(groups []v1alpha1.RolloutGroup, zone string) (budgets []Budget, unusable []string) {
	slices.SortFunc(groups, func(a, b v1alpha1.RolloutGroup) int { return strings.Compare(a.Name, b.Name) })
	for i := range groups {
		rg := &groups[i]
		if _, err := budget.PartitionOf(rg.Spec.DisruptionBudget); err != nil {
			unusable = append(unusable, fmt.Sprintf("RolloutGroup %s: spec.disruptionBudget.%v; it judges no eviction until fixed", rg.Name, err))
			continue
		}
		if shared, ok := budget.SharedKey(rg); ok {
			budgets = append(budgets, Budget{Kind: KindZoneDisruptionBudget, Namespace: rg.Namespace, Name: shared.Name, Zone: zone, Group: rg.Name})
			continue
		}
		budgets = append(budgets, Budget{Kind: KindRolloutGroup, Namespace: rg.Namespace, Name: rg.Name, UID: rg.UID, Zone: zone})
	}
	return budgets, unusable
}

// zdbBudgets are the budgets of the ZoneDisruptionBudgets that select pod,
// by name; owner is the StatefulSet that owns it ("" when none). A budget
// whose selector is invalid selects nothing (its status says so).
func zdbBudgets(zdbs []v1alpha1.ZoneDisruptionBudget, pod *corev1.Pod, owner string) (budgets []Budget, unusable []string) {
	slices.SortFunc(zdbs, func(a, b v1alpha1.ZoneDisruptionBudget) int { return strings.Compare(a.Name, b.Name) })
	for i := range zdbs {
		zdb := &zdbs[i]
		sel, err := budget.ZDBSelector(zdb)
		if err != nil || !sel.Matches(labels.Set(pod.Labels)) {
			continue
		}
		if owner == "" {
			unusable = append(unusable, fmt.Sprintf("ZoneDisruptionBudget %s selects pod %s, which no StatefulSet owns: its zones are StatefulSets, so it does not judge this pod", zdb.Name, pod.Name))
			continue
		}
		if _, err := budget.PartitionOf(&zdb.Spec.ZoneBudget); err != nil {
			unusable = append(unusable, fmt.Sprintf("ZoneDisruptionBudget %s: spec.%v; it judges no eviction until fixed", zdb.Name, err))
			continue
		}
		budgets = append(budgets, Budget{Kind: KindZoneDisruptionBudget, Namespace: zdb.Namespace, Name: zdb.Name, UID: zdb.UID, Zone: owner})
	}
	return budgets, unusable
}

func (b *liveBudgets) Acquire(ctx context.Context, bud Budget, pod *corev1.Pod, dryRun bool) (disruption.Verdict, error) {
	key := types.NamespacedName{Namespace: bud.Namespace, Name: bud.Name}
	if !dryRun {
		done, err := b.takeTurn(ctx, bud)
		if err != nil {
			return disruption.Verdict{}, err
		}
		defer done()
	}
	var v disruption.Verdict
	var err error
	// viewRV is the cache's version the last decision was confirmed on;
	// "" when it read live.
	var viewRV string
	switch bud.Kind {
	case KindRolloutGroup:
		v, err = budget.Acquire(ctx, b.writer, b.firstKnown(ctx, bud, &v1alpha1.RolloutGroup{}), key, func() *v1alpha1.RolloutGroup { return &v1alpha1.RolloutGroup{} },
			b.confirmGroup(bud, pod, &viewRV), dryRun, metrics.RequesterEviction)
	case KindZoneDisruptionBudget:
		v, err = budget.Acquire(ctx, b.writer, b.firstKnown(ctx, bud, &v1alpha1.ZoneDisruptionBudget{}), key, func() *v1alpha1.ZoneDisruptionBudget { return &v1alpha1.ZoneDisruptionBudget{} },
			b.confirmZDB(bud, pod, &viewRV), dryRun, metrics.RequesterEviction)
	default:
		return disruption.Verdict{}, fmt.Errorf("budget kind %q", bud.Kind)
	}
	if apierrors.IsNotFound(err) {
		return b.gone(ctx, bud, v, err)
	}
	if err == nil && v.Allowed && !dryRun {
		if w, ok := b.written.Load(bud.UID); ok {
			if h, ok := w.(budget.Holder); ok {
				b.fresh.Wrote(h, viewRV)
			}
		}
	}
	return v, err
}

// freshWait bounds how long a confirmation waits for the cache to cover
// the record before it reads live: the act of the record's last writer (an
// eviction admitted a moment ago, a rollout's deletes) reaches the cache in
// milliseconds.
const freshWait = 20 * time.Millisecond

// cacheCovered returns the cache's version when its pods cover holder's
// record (budget.Freshness), "" when they do not within freshWait: the
// confirmation then reads live.
func (b *liveBudgets) cacheCovered(ctx context.Context, holder budget.Holder) string {
	return b.fresh.Covered(ctx, holder, freshWait, metrics.RequesterEviction)
}

// gone is the answer when bud's object was not found: errBudgetGone, but
// for a budget a group shares, whose absence refuses (budget.MissingShared)
// as long as the group still names it.
func (b *liveBudgets) gone(ctx context.Context, bud Budget, v disruption.Verdict, err error) (disruption.Verdict, error) {
	if bud.Group == "" {
		return v, fmt.Errorf("%s: %w", bud, errBudgetGone)
	}
	rg := &v1alpha1.RolloutGroup{}
	if gerr := b.live.Get(ctx, types.NamespacedName{Namespace: bud.Namespace, Name: bud.Group}, rg); gerr != nil {
		return v, fmt.Errorf("%s: %w", bud, errors.Join(err, gerr))
	}
	if rg.Spec.SharedDisruptionBudget != bud.Name {
		return v, fmt.Errorf("%s: %w", bud, errBudgetGone)
	}
	return budget.MissingShared(rg), nil
}

// firstKnown is the reader budget.Acquire reads the budget through: its
// first read answers, with no request, the newer (by resourceVersion) of
// the cache's copy and the one this replica last wrote; every later read,
// after a Conflict, goes to the API server. The intent is written with the
// resourceVersion read, so a copy that was not the latest only costs a
// Conflict and a live read; and the pods are read live after it, so no
// recorded pod is judged on a view older than its record. A dry run, which
// writes nothing, is judged on that copy as it is.
func (b *liveBudgets) firstKnown(ctx context.Context, bud Budget, holder client.Object) client.Reader {
	key := types.NamespacedName{Namespace: bud.Namespace, Name: bud.Name}
	known := holder
	if err := b.cache.Get(ctx, key, holder); err != nil || holder.GetUID() != bud.UID {
		known = nil
	}
	if w, ok := b.written.Load(bud.UID); ok {
		w := w.(client.Object)
		if known == nil {
			known = w
		} else if newer, err := resourceversion.CompareResourceVersion(w.GetResourceVersion(), known.GetResourceVersion()); err == nil && newer > 0 {
			known = w
		}
	}
	return budget.FirstRead(b.live, known)
}

// rememberingWriter is the webhook's writer: it keeps, by UID, the last
// budget status it wrote (as the API server answered it).
type rememberingWriter struct {
	client.Client
	written *sync.Map
}

func (w rememberingWriter) Status() client.SubResourceWriter {
	return rememberingStatus{SubResourceWriter: w.Client.Status(), written: w.written}
}

type rememberingStatus struct {
	client.SubResourceWriter
	written *sync.Map
}

func (w rememberingStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if err := w.SubResourceWriter.Patch(ctx, obj, patch, opts...); err != nil {
		return err
	}
	w.written.Store(obj.GetUID(), obj.DeepCopyObject().(client.Object))
	return nil
}

// takeTurn waits, until ctx ends, for the budget's turn to record an
// intent, and returns the function that hands it on. Evictions judged at
// once by this replica (a node's pods) then record one after the other,
// each deciding on the intents recorded before it, instead of all reading
// the same record and all but one meeting a Conflict and deciding again:
// a wave of n costs n decisions, not about n*n/2. Other replicas still
// meet at the optimistic lock.
func (b *liveBudgets) takeTurn(ctx context.Context, bud Budget) (func(), error) {
	v, _ := b.turns.LoadOrStore(bud.UID, make(chan struct{}, 1))
	turn := v.(chan struct{})
	select {
	case turn <- struct{}{}:
		return func() { <-turn }, nil
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: wait for the turn to record an intent: %w", bud, context.Cause(ctx))
	}
}

func (b *liveBudgets) Judge(ctx context.Context, bud Budget, pod *corev1.Pod) (disruption.Verdict, error) {
	key := types.NamespacedName{Namespace: bud.Namespace, Name: bud.Name}
	var v disruption.Verdict
	var err error
	switch bud.Kind {
	case KindRolloutGroup:
		rg := &v1alpha1.RolloutGroup{}
		if err = b.cache.Get(ctx, key, rg); err == nil {
			v, err = b.decideGroup(b.cache, bud, pod)(ctx, rg)
		}
	case KindZoneDisruptionBudget:
		zdb := &v1alpha1.ZoneDisruptionBudget{}
		if err = b.cache.Get(ctx, key, zdb); err == nil {
			v, err = b.decideZDB(b.cache, bud, pod)(ctx, zdb)
		}
	default:
		return disruption.Verdict{}, fmt.Errorf("budget kind %q", bud.Kind)
	}
	if apierrors.IsNotFound(err) {
		return b.gone(ctx, bud, v, err)
	}
	return v, err
}

// confirmGroup decides the eviction of pod on the RolloutGroup of bud as
// firstKnown or a live read gives it: the confirmation of the cache's
// allowance. Its view is the cache's when the cache's pods cover the
// group's record (cacheCovered), and otherwise one whose pods of the zones
// that matter are read live (budget.ConfirmGroupView). viewRV is set to the
// cache's version, or "" after a live read.
func (b *liveBudgets) confirmGroup(bud Budget, pod *corev1.Pod, viewRV *string) budget.Decider[*v1alpha1.RolloutGroup] {
	return func(ctx context.Context, rg *v1alpha1.RolloutGroup) (disruption.Verdict, error) {
		if *viewRV = b.cacheCovered(ctx, rg); *viewRV != "" {
			return b.decideGroup(b.cache, bud, pod)(ctx, rg)
		}
		view, err := budget.ConfirmGroupView(ctx, b.cache, b.live, rg, v1alpha1.DisruptionEviction, bud.Zone, b.now())
		if err != nil {
			return disruption.Verdict{}, fmt.Errorf("RolloutGroup %s: %w", rg.Name, err)
		}
		partition, _ := budget.PartitionOf(rg.Spec.DisruptionBudget) // the view has refused an invalid one
		return disruption.Decide(view, evictionRequest(bud.Zone, pod.Name, partition)), nil
	}
}

// confirmZDB is confirmGroup for the ZoneDisruptionBudget of bud
// (budget.ConfirmZDBView).
func (b *liveBudgets) confirmZDB(bud Budget, pod *corev1.Pod, viewRV *string) budget.Decider[*v1alpha1.ZoneDisruptionBudget] {
	return func(ctx context.Context, zdb *v1alpha1.ZoneDisruptionBudget) (disruption.Verdict, error) {
		if *viewRV = b.cacheCovered(ctx, zdb); *viewRV != "" {
			return b.decideZDB(b.cache, bud, pod)(ctx, zdb)
		}
		// A budget that groups share is decided on every sharing group's
		// members and pods read live: their intents name zones the budget's
		// own pods do not show. Whether any group shares it is the cache's
		// answer: a group that starts sharing is ordered with the budget
		// from the moment this replica sees it.
		shared, err := b.sharedByAny(ctx, zdb)
		if err != nil {
			return disruption.Verdict{}, err
		}
		if bud.Group != "" || shared {
			return b.decideZDB(b.live, bud, pod)(ctx, zdb)
		}
		view, err := budget.ConfirmZDBView(ctx, b.cache, b.live, zdb, bud.Zone, b.now(), b.judgedByGroup)
		if err != nil {
			return disruption.Verdict{}, fmt.Errorf("ZoneDisruptionBudget %s: %w", zdb.Name, err)
		}
		partition, _ := budget.PartitionOf(&zdb.Spec.ZoneBudget) // the view has refused an invalid one
		return disruption.Decide(view, evictionRequest(bud.Zone, pod.Name, partition)), nil
	}
}

// decideGroup decides the eviction of pod on the RolloutGroup of bud, its
// members and their pods as r holds them.
func (b *liveBudgets) decideGroup(r client.Reader, bud Budget, pod *corev1.Pod) budget.Decider[*v1alpha1.RolloutGroup] {
	return func(ctx context.Context, rg *v1alpha1.RolloutGroup) (disruption.Verdict, error) {
		view, err := budget.GroupView(ctx, r, rg, v1alpha1.DisruptionEviction, b.now())
		if err != nil {
			return disruption.Verdict{}, fmt.Errorf("RolloutGroup %s: %w", rg.Name, err)
		}
		partition, _ := budget.PartitionOf(rg.Spec.DisruptionBudget) // GroupView has refused an invalid one
		return disruption.Decide(view, evictionRequest(bud.Zone, pod.Name, partition)), nil
	}
}

// decideZDB decides the eviction of pod on the ZoneDisruptionBudget of
// bud, its zones and their pods as r holds them.
func (b *liveBudgets) decideZDB(r client.Reader, bud Budget, pod *corev1.Pod) budget.Decider[*v1alpha1.ZoneDisruptionBudget] {
	return func(ctx context.Context, zdb *v1alpha1.ZoneDisruptionBudget) (disruption.Verdict, error) {
		// Every ZoneDisruptionBudget may be shared: its view holds the
		// StatefulSets of the groups sharing it (none, most often: one
		// list of the groups more).
		var asking budget.Requester
		if bud.Group != "" {
			asking.Group = &v1alpha1.RolloutGroup{}
			if err := r.Get(ctx, types.NamespacedName{Namespace: bud.Namespace, Name: bud.Group}, asking.Group); err != nil {
				return disruption.Verdict{}, fmt.Errorf("RolloutGroup %s: %w", bud.Group, err)
			}
		}
		view, err := budget.SharedView(ctx, r, zdb, v1alpha1.DisruptionEviction, b.now(), asking, b.judgedByGroup)
		if err != nil {
			return disruption.Verdict{}, fmt.Errorf("ZoneDisruptionBudget %s: %w", zdb.Name, err)
		}
		// A budget that groups share orders whole zones: a partition of a
		// pod says nothing of the groups' pods.
		var partition func(string) string
		if !slices.ContainsFunc(view.Zones, func(z disruption.Zone) bool { return z.Group != "" }) {
			partition, _ = budget.PartitionOf(&zdb.Spec.ZoneBudget) // SharedView has refused an invalid one
		}
		return disruption.Decide(view, evictionRequest(bud.Zone, pod.Name, partition)), nil
	}
}

// sharedByAny reports whether a RolloutGroup (in the cache) shares zdb.
func (b *liveBudgets) sharedByAny(ctx context.Context, zdb *v1alpha1.ZoneDisruptionBudget) (bool, error) {
	var groups v1alpha1.RolloutGroupList
	if err := b.cache.List(ctx, &groups, client.InNamespace(zdb.Namespace)); err != nil {
		return false, fmt.Errorf("list RolloutGroups: %w", err)
	}
	return slices.ContainsFunc(groups.Items, func(g v1alpha1.RolloutGroup) bool { return g.Spec.SharedDisruptionBudget == zdb.Name }), nil
}

// judgedByGroup says whether a RolloutGroup claims sts: a
// ZoneDisruptionBudget leaves such a StatefulSet to the group.
func (b *liveBudgets) judgedByGroup(ctx context.Context, sts *appsv1.StatefulSet) (bool, error) {
	groups, err := lookup.GroupsClaiming(ctx, b.cache, sts.Namespace, sts.Name, sts)
	return len(groups) > 0, err
}

// evictionRequest asks to evict the pod named pod from zone.
func evictionRequest(zone, pod string, partition func(string) string) disruption.Request {
	req := disruption.Request{Zone: zone, Reason: v1alpha1.DisruptionEviction, Pods: []string{pod}, Holder: "eviction of pod " + pod}
	if partition != nil {
		req.Partition = partition(pod)
	}
	return req
}
