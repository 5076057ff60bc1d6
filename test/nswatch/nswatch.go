/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package nswatch watches a few kinds of objects in one namespace and wakes
// its waiters on every event, for `make demo` and `make bench`: they react to
// a change the moment they see it, not at the next tick of a poll.
//
//	w, err := nswatch.Start(ctx, cfg, scheme, ns, &v1alpha1.RolloutGroup{}, &appsv1.StatefulSet{})
//	...
//	defer w.Close()
//	err = w.WaitUntil(ctx, func(ctx context.Context) (bool, error) { ... w.Get(ctx, key, obj) ... })
package nswatch

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Watcher keeps watches on the objects of a few kinds in one namespace. It
// reads them from its cache as a client.Reader.
type Watcher struct {
	cache   cache.Cache
	changed chan struct{} // one pending wake-up at most
	stop    context.CancelFunc
	done    chan struct{}
}

var _ client.Reader = (*Watcher)(nil)

// Start watches the kinds of objects in namespace and returns once the caches
// are in sync. Close stops the watches.
func Start(ctx context.Context, cfg *rest.Config, scheme *runtime.Scheme, namespace string, objects ...client.Object) (*Watcher, error) {
	c, err := cache.New(cfg, cache.Options{
		Scheme:            scheme,
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
	})
	if err != nil {
		return nil, fmt.Errorf("watch namespace %s: %w", namespace, err)
	}
	ctx, stop := context.WithCancel(ctx)
	w := &Watcher{cache: c, changed: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
	wake := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.wake() },
		UpdateFunc: func(any, any) { w.wake() },
		DeleteFunc: func(any) { w.wake() },
	}
	for _, obj := range objects {
		if err := w.addHandler(ctx, obj, wake); err != nil {
			stop()
			return nil, err
		}
	}
	go func() {
		defer close(w.done)
		_ = c.Start(ctx)
	}()
	if !c.WaitForCacheSync(ctx) {
		w.Close()
		return nil, fmt.Errorf("watch namespace %s: caches did not sync", namespace)
	}
	return w, nil
}

// AddHandler adds handler to the watch on obj's kind, one of those Start was
// given. The handler first gets an add for every object already in the cache,
// so it misses nothing that happened before.
func (w *Watcher) AddHandler(ctx context.Context, obj client.Object, handler toolscache.ResourceEventHandler) error {
	return w.addHandler(ctx, obj, handler)
}

func (w *Watcher) addHandler(ctx context.Context, obj client.Object, handler toolscache.ResourceEventHandler) error {
	inf, err := w.cache.GetInformer(ctx, obj)
	if err == nil {
		_, err = inf.AddEventHandler(handler)
	}
	if err != nil {
		return fmt.Errorf("watch %T: %w", obj, err)
	}
	return nil
}

func (w *Watcher) wake() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// Close stops the watches and waits for them to end, so that a caller can stop
// the control plane next without the watches failing under it.
func (w *Watcher) Close() {
	w.stop()
	<-w.done
}

// WaitUntil returns once cond holds, checking it now and after every event.
// It returns cond's error as it is, or the cause of ctx's end.
func (w *Watcher) WaitUntil(ctx context.Context, cond func(context.Context) (bool, error)) error {
	for {
		ok, err := cond(ctx)
		if err != nil || ok {
			return err
		}
		select {
		case <-w.changed:
		case <-ctx.Done():
			return context.Cause(ctx)
		}
	}
}

// Get reads an object from the cache.
func (w *Watcher) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	return w.cache.Get(ctx, key, obj, opts...)
}

// List reads a list of objects from the cache.
func (w *Watcher) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return w.cache.List(ctx, list, opts...)
}
