/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/internal/kube"
)

// measureBatch times one batch with no operator: it changes the template of
// the StatefulSet, deletes n of its outdated pods at once, and returns how long
// it took from the deletions until all n were back, Ready, on the new revision.
// That is the least a batch of a rollout can take on this control plane.
func measureBatch(ctx context.Context, c client.Client, w *watcher, ns, name, image string, n int) (time.Duration, error) {
	if err := setImage(ctx, c, ns, name, image); err != nil {
		return 0, err
	}
	var sts *appsv1.StatefulSet
	if err := w.waitUntil(ctx, "StatefulSet "+name+" to observe its new template", func(ctx context.Context) (bool, error) {
		var err error
		sts, err = statefulSetAt(ctx, w, ns, name, image)
		return sts != nil, err
	}); err != nil {
		return 0, err
	}
	revision := sts.Status.UpdateRevision

	var pods corev1.PodList
	if err := w.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels(sts.Spec.Selector.MatchLabels)); err != nil {
		return 0, err
	}
	var victims []corev1.Pod
	for _, p := range pods.Items {
		if p.Labels[appsv1.ControllerRevisionHashLabelKey] != revision && p.DeletionTimestamp == nil {
			victims = append(victims, p)
		}
	}
	if len(victims) < n {
		return 0, fmt.Errorf("StatefulSet %s has %d outdated pods, need %d", name, len(victims), n)
	}
	slices.SortFunc(victims, func(a, b corev1.Pod) int { return ordinal(a.Name) - ordinal(b.Name) })
	victims = victims[:n]
	old := map[string]types.UID{}
	for _, p := range victims {
		old[p.Name] = p.UID
	}

	began := time.Now()
	if err := deleteAtOnce(ctx, c, victims); err != nil {
		return 0, err
	}
	err := w.waitUntil(ctx, fmt.Sprintf("%d replaced pods of %s to be Ready", n, name), func(ctx context.Context) (bool, error) {
		for podName, uid := range old {
			pod := &corev1.Pod{}
			if err := w.Get(ctx, client.ObjectKey{Namespace: ns, Name: podName}, pod); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if pod.UID == uid || pod.Labels[appsv1.ControllerRevisionHashLabelKey] != revision || !kube.PodReady(pod) {
				return false, nil
			}
		}
		return true, nil
	})
	return time.Since(began), err
}

// deleteAtOnce deletes the pods concurrently, as an operator deleting a batch would.
func deleteAtOnce(ctx context.Context, c client.Client, pods []corev1.Pod) error {
	return forEach(ctx, len(pods), len(pods), func(ctx context.Context, i int) error {
		if err := c.Delete(ctx, &pods[i], client.Preconditions{UID: &pods[i].UID}); err != nil {
			return fmt.Errorf("delete pod %s: %w", pods[i].Name, err)
		}
		return nil
	})
}

// ordinal is the number at the end of a StatefulSet pod's name.
func ordinal(pod string) int {
	n, _ := strconv.Atoi(pod[strings.LastIndexByte(pod, '-')+1:])
	return n
}

// median of a non-empty list.
func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
