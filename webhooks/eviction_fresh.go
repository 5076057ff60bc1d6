package webhooks

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/budget"
)

// NewCachedEvictionBudgets is NewEvictionBudgets for the cache c (the
// manager's; reader reads it): a decision the cache allows is confirmed on
// the cache itself when its pods are at least as new as the budget's record
// of intents, and read live only when they are not (budget.Covers). It adds
// handlers to c's informers, before c starts or after (a handler added
// later is told every object held).
func NewCachedEvictionBudgets(c cache.Cache, reader, live client.Reader, writer client.Client, now func() time.Time) (EvictionBudgets, error) {
	// An informer not started yet is created; nothing waits for it.
	ctx := context.Background()
	clock, err := podCacheClock(ctx, c)
	if err != nil {
		return nil, err
	}
	seen := &budget.RecordsSeen{}
	if err := watchRecords(ctx, c, seen); err != nil {
		return nil, err
	}
	return newLiveBudgets(reader, live, writer, now, clock, seen), nil
}

// podCacheClock is the clock of the cache's pods (budget.CacheClock). An
// informer of every namespace says it itself: the resourceVersion of the
// last change its store holds, its watch's bookmarks included. A cache of
// several namespaces keeps an informer per namespace, none of which speaks
// for the others, and does not show them: its clock is, per namespace, the
// resourceVersion of the last pod change a handler was told of, which the
// store held before the handler was told.
func podCacheClock(ctx context.Context, c cache.Cache) (budget.CacheClock, error) {
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
	if budget.Covers(c.rv[obj.GetNamespace()], obj.GetResourceVersion()) {
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
// it first appeared in (budget.RecordsSeen.Observe).
func watchRecords(ctx context.Context, c cache.Cache, seen *budget.RecordsSeen) error {
	for _, obj := range []client.Object{&v1alpha1.RolloutGroup{}, &v1alpha1.ZoneDisruptionBudget{}} {
		inf, err := c.GetInformer(ctx, obj, cache.BlockUntilSynced(false))
		if err != nil {
			return fmt.Errorf("the %T informer: %w", obj, err)
		}
		observe := func(o any) {
			if h, ok := o.(budget.Holder); ok {
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
				if h, ok := o.(budget.Holder); ok {
					seen.Forget(h.GetUID())
				}
			},
		}); err != nil {
			return fmt.Errorf("watch the records of %T: %w", obj, err)
		}
	}
	return nil
}
