/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/operator"
)

// watcher keeps watches on the benchmark's RolloutGroups, StatefulSets and Pods
// and wakes its waiters on every event, so that every time the bench measures
// is the moment it saw a change, not the next tick of a poll.
type watcher struct {
	cache.Cache
	changed chan struct{} // one pending wake-up at most
	stop    context.CancelFunc
	done    chan struct{}
}

func startWatch(ctx context.Context, cfg *rest.Config, ns string, podLog io.Writer) (*watcher, error) {
	c, err := cache.New(cfg, cache.Options{
		Scheme:            operator.NewScheme(),
		DefaultNamespaces: map[string]cache.Config{ns: {}},
	})
	if err != nil {
		return nil, fmt.Errorf("watch namespace %s: %w", ns, err)
	}
	ctx, stop := context.WithCancel(ctx)
	w := &watcher{Cache: c, changed: make(chan struct{}, 1), stop: stop, done: make(chan struct{})}
	wake := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { w.wake() },
		UpdateFunc: func(any, any) { w.wake() },
		DeleteFunc: func(any) { w.wake() },
	}
	for _, obj := range []client.Object{&v1alpha1.RolloutGroup{}, &appsv1.StatefulSet{}, &corev1.Pod{}} {
		inf, err := c.GetInformer(ctx, obj)
		if err == nil {
			_, err = inf.AddEventHandler(wake)
		}
		if _, isPod := obj.(*corev1.Pod); isPod && err == nil {
			_, err = inf.AddEventHandler(podEventLogger(podLog))
		}
		if err != nil {
			stop()
			return nil, fmt.Errorf("watch %T: %w", obj, err)
		}
	}
	go func() {
		defer close(w.done)
		_ = c.Start(ctx)
	}()
	if !c.WaitForCacheSync(ctx) {
		w.close()
		return nil, fmt.Errorf("watch namespace %s: caches did not sync", ns)
	}
	return w, nil
}

func (w *watcher) wake() {
	select {
	case w.changed <- struct{}{}:
	default:
	}
}

// close stops the watches and waits for them to end.
func (w *watcher) close() {
	w.stop()
	<-w.done
}

// waitUntil returns once cond holds, checking it now and after every event.
func (w *watcher) waitUntil(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	for {
		ok, err := cond(ctx)
		if err != nil {
			return fmt.Errorf("wait for %s: %w", what, err)
		}
		if ok {
			return nil
		}
		select {
		case <-w.changed:
		case <-ctx.Done():
			return fmt.Errorf("wait for %s: %w", what, context.Cause(ctx))
		}
	}
}

// podEventLogger writes one line per pod event, to put the operator's requests
// next to what it saw: time, event, pod, revision, Ready, terminating.
func podEventLogger(out io.Writer) toolscache.ResourceEventHandler {
	var mu sync.Mutex
	logPod := func(event string, obj any) {
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			if tombstone, isTombstone := obj.(toolscache.DeletedFinalStateUnknown); isTombstone {
				pod, ok = tombstone.Obj.(*corev1.Pod)
			}
		}
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s %-6s %s uid=%s rev=%s ready=%t terminating=%t\n", time.Now().Format("15:04:05.000000"), event, pod.Name,
			pod.UID[:8], pod.Labels[appsv1.ControllerRevisionHashLabelKey], podReady(pod), pod.DeletionTimestamp != nil)
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { logPod("add", obj) },
		UpdateFunc: func(_, obj any) { logPod("update", obj) },
		DeleteFunc: func(obj any) { logPod("delete", obj) },
	}
}
