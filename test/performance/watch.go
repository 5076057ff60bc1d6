/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/test/nswatch"
)

// watcher keeps watches on the benchmark's RolloutGroups, StatefulSets and Pods
// and wakes its waiters on every event, so that every time the bench measures
// is the moment it saw a change, not the next tick of a poll.
type watcher struct {
	*nswatch.Watcher
}

func startWatch(ctx context.Context, cfg *rest.Config, ns string, podLog io.Writer) (*watcher, error) {
	w, err := nswatch.Start(ctx, cfg, operator.NewScheme(), ns, &v1alpha1.RolloutGroup{}, &appsv1.StatefulSet{}, &corev1.Pod{})
	if err != nil {
		return nil, err
	}
	if err := w.AddHandler(ctx, &corev1.Pod{}, podEventLogger(podLog)); err != nil {
		w.Close()
		return nil, err
	}
	return &watcher{w}, nil
}

// startLoggedWatch starts the watch of ns with every pod event logged to
// the run's pods-<slug>.log in its work directory; stop closes both.
func startLoggedWatch(ctx context.Context, run runConfig, cfg *rest.Config, ns string) (w *watcher, stop func(), err error) {
	podLog, err := os.Create(filepath.Join(run.workDir, "pods-"+run.slug()+".log"))
	if err != nil {
		return nil, nil, err
	}
	if w, err = startWatch(ctx, cfg, ns, podLog); err != nil {
		podLog.Close()
		return nil, nil, err
	}
	return w, func() { w.Close(); podLog.Close() }, nil
}

// waitUntil returns once cond holds, checking it now and after every event.
func (w *watcher) waitUntil(ctx context.Context, what string, cond func(context.Context) (bool, error)) error {
	if err := w.WaitUntil(ctx, cond); err != nil {
		return fmt.Errorf("wait for %s: %w", what, err)
	}
	return nil
}

// podOf is the pod of an informer event, also from a deletion's tombstone.
func podOf(obj any) (*corev1.Pod, bool) {
	if tombstone, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tombstone.Obj
	}
	pod, ok := obj.(*corev1.Pod)
	return pod, ok
}

// podEventLogger writes one line per pod event, to put the operator's requests
// next to what it saw: time, event, pod, revision, Ready, terminating.
func podEventLogger(out io.Writer) toolscache.ResourceEventHandler {
	var mu sync.Mutex
	logPod := func(event string, obj any) {
		pod, ok := podOf(obj)
		if !ok {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(out, "%s %-6s %s uid=%s rev=%s ready=%t terminating=%t\n", time.Now().Format("15:04:05.000000"), event, pod.Name,
			pod.UID[:8], pod.Labels[appsv1.ControllerRevisionHashLabelKey], kube.PodReady(pod), pod.DeletionTimestamp != nil)
	}
	return toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { logPod("add", obj) },
		UpdateFunc: func(_, obj any) { logPod("update", obj) },
		DeleteFunc: func(obj any) { logPod("delete", obj) },
	}
}
