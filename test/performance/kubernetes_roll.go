/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// kubernetesImage is the template the StatefulSet controller rolls on its own
// after the operator's rollout (measureKubernetesRoll).
const kubernetesImage = "example.com/bench:3"

// measureKubernetesRoll is the partition scenario's floor: Kubernetes rolling
// the same StatefulSets itself, one after the other, as a user without
// Echelon would (RollingUpdate, partition 0, the StatefulSet's own
// maxUnavailable the group's). The StatefulSet controller's own latency
// between a pod becoming available and the next deletion is in it, as it is
// in every partition Echelon lowers; the batch floor of the OnDelete scenario
// is not (the bench deletes those pods itself).
//
// It runs after the operator's rollout: the group is deleted (its finalizer
// hands every partition back), then each member's template changes once its
// predecessor has every pod updated and Ready, as the StatefulSet status
// reports it, the same evidence the group's Complete waits for.
func measureKubernetesRoll(ctx context.Context, cfg runConfig, c client.Client, w *watcher, ns string, g group) (time.Duration, error) {
	rg := &v1alpha1.RolloutGroup{}
	rg.Namespace, rg.Name = ns, g.name
	if err := c.Delete(ctx, rg); client.IgnoreNotFound(err) != nil {
		return 0, fmt.Errorf("delete RolloutGroup %s: %w", g.name, err)
	}
	if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
		return w.waitUntil(ctx, "RolloutGroup "+g.name+" to be gone", func(ctx context.Context) (bool, error) {
			err := w.Get(ctx, client.ObjectKeyFromObject(rg), &v1alpha1.RolloutGroup{})
			if apierrors.IsNotFound(err) {
				return true, nil
			}
			return false, err
		})
	}); err != nil {
		return 0, err
	}
	// The finalizer hands the partitions back; set them to 0 here too, so the
	// floor does not depend on it (a no-op patch when it has).
	for _, name := range g.members {
		sts := &appsv1.StatefulSet{}
		sts.Namespace, sts.Name = ns, name
		patch := []byte(`{"spec":{"updateStrategy":{"rollingUpdate":{"partition":0}}}}`)
		if err := c.Patch(ctx, sts, client.RawPatch(types.StrategicMergePatchType, patch)); err != nil {
			return 0, fmt.Errorf("set the partition of StatefulSet %s to 0: %w", name, err)
		}
	}
	began := time.Now()
	for _, name := range g.members {
		if err := setImage(ctx, c, ns, name, kubernetesImage); err != nil {
			return 0, err
		}
		if err := withTimeout(ctx, cfg.timeout, func(ctx context.Context) error {
			return w.waitUntil(ctx, "StatefulSet "+name+" rolled by Kubernetes", allReady(w, ns, kubernetesImage, name))
		}); err != nil {
			return 0, err
		}
	}
	return time.Since(began), nil
}
