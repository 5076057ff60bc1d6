package budget

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/metrics"
)

// Freshness tells whether a cache's pods are at least as new as a
// holder's record of intents (Covers), from the cache's clock and the
// records its watches and this process's writes have shown (RecordsSeen).
// A nil Freshness covers nothing: every view is read live.
type Freshness struct {
	clock CacheClock
	seen  RecordsSeen
}

// NewFreshness returns the Freshness of the cache c (the manager's). It
// adds handlers to c's informers of pods, RolloutGroups and
// ZoneDisruptionBudgets, before c starts or after (a handler added later is
// told every object held).
func NewFreshness(c cache.Cache) (*Freshness, error) {
	// An informer not started yet is created; nothing waits for it.
	ctx := context.Background()
	f := &Freshness{}
	var err error
	if f.clock, err = podCacheClock(ctx, c); err != nil {
		return nil, err
	}
	if err := watchRecords(ctx, c, &f.seen); err != nil {
		return nil, err
	}
	return f, nil
}

// Covered returns the cache's version when its pods cover holder's record,
// waiting at most wait for them to; "" when they do not (the caller reads
// live). Counted by requester (a metrics.Requester* value) and source.
func (f *Freshness) Covered(ctx context.Context, holder Holder, wait time.Duration, requester string) string {
	if f == nil {
		metrics.DisruptionViews.WithLabelValues(requester, metrics.ViewLive).Inc()
		return ""
	}
	need := f.seen.Need(holder)
	have := WaitCovered(ctx, f.clock, holder.GetNamespace(), need, wait)
	if have != "" {
		metrics.DisruptionViews.WithLabelValues(requester, metrics.ViewFromCache).Inc()
		return have
	}
	metrics.DisruptionViews.WithLabelValues(requester, metrics.ViewLive).Inc()
	log.FromContext(ctx).V(1).Info("confirming on a live read: the cache's pods are older than the budget's record",
		"budget", holder.GetName(), "cachedPodsAt", f.clock(holder.GetNamespace()), "recordNeeds", need)
	return ""
}

// Wrote notes that this process wrote holder's record as holder now holds
// it, deciding on the cache's pods at viewRV ("" after a live read):
// RecordsSeen.Wrote.
func (f *Freshness) Wrote(holder Holder, viewRV string) {
	if f != nil {
		f.seen.Wrote(holder, viewRV)
	}
}

// podCacheClock is the clock of the cache's pods (CacheClock). An
// informer of every namespace says it itself: the resourceVersion of the
// last change its store holds, its watch's bookmarks included. A cache of
// several namespaces keeps an informer per namespace, none of which speaks
// for the others, and does not show them: its clock is, per namespace, the
// resourceVersion of the last pod change a handler was told of, which the
// store held before the handler was told.
func podCacheClock(ctx context.Context, c cache.Cache) (CacheClock, error) {
	inf, err := c.GetInformer(ctx, &corev1.Pod{}, cache.BlockUntilSynced(false))
	if err != nil {
		return nil, fmt.Errorf("the pod informer: %w", err)
	}
	if shared, ok := inf.(toolscache.SharedIndexInformer); ok {
		return func(string) string {
			if !shared.HasSynced() {
				return ""
			}
			return shared.GetStore().LastStoreSyncResourceVersion()
		}, nil
	}
	var clock namespaceClock
	if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    clock.tell,
		UpdateFunc: func(_, o any) { clock.tell(o) },
		DeleteFunc: clock.tell,
	}); err != nil {
		return nil, fmt.Errorf("watch the pods' versions: %w", err)
	}
	return clock.at, nil
}

// namespaceClock keeps, per namespace, the highest resourceVersion of the
// pods a handler was told of.
type namespaceClock struct {
	mu sync.Mutex
	rv map[string]string
}

func (c *namespaceClock) tell(o any) {
	if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
		o = tomb.Obj
	}
	obj, ok := o.(client.Object)
	if !ok || obj.GetResourceVersion() == "" {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.rv == nil {
		c.rv = map[string]string{}
	}
	if Covers(c.rv[obj.GetNamespace()], obj.GetResourceVersion()) {
		return
	}
	c.rv[obj.GetNamespace()] = obj.GetResourceVersion()
}

func (c *namespaceClock) at(namespace string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rv[namespace]
}

// watchRecords feeds seen with every RolloutGroup and ZoneDisruptionBudget
// the cache's watches deliver, so that a record is known from the version
// it first appeared in (RecordsSeen.Observe).
func watchRecords(ctx context.Context, c cache.Cache, seen *RecordsSeen) error {
	for _, obj := range []client.Object{&v1alpha1.RolloutGroup{}, &v1alpha1.ZoneDisruptionBudget{}} {
		inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("the %T informer: %w", obj, err)
		}
		observe := func(o any) {
			if h, ok := o.(Holder); ok {
				seen.Observe(h)
			}
		}
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    observe,
			UpdateFunc: func(_, o any) { observe(o) },
			DeleteFunc: func(o any) {
				if tomb, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
					o = tomb.Obj
				}
				if h, ok := o.(Holder); ok {
					seen.Forget(h.GetUID())
				}
			},
		}); err != nil {
			return fmt.Errorf("watch the records of %T: %w", obj, err)
		}
	}
	return nil
}
