/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

// containerName is the one container of every benchmark pod.
const containerName = "app"

// statefulSet is a member of the benchmark: OnDelete, so that only the operator
// (or the floor measurement) replaces pods, and Parallel, so that the StatefulSet
// controller recreates a batch of deleted pods at once.
func statefulSet(ns, name string, replicas int32, image string) *appsv1.StatefulSet {
	return builders.MakeStatefulSet(ns, name).Label("app", name).Replicas(replicas).Parallel().OnDelete().Container(containerName, image).Obj()
}

// setImage changes the pod template of a StatefulSet: the change that starts a
// rollout.
func setImage(ctx context.Context, c client.Client, ns, name, image string) error {
	patch := fmt.Sprintf(`{"spec":{"template":{"spec":{"containers":[{"name":%q,"image":%q}]}}}}`, containerName, image)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if err := c.Patch(ctx, sts, client.RawPatch(types.StrategicMergePatchType, []byte(patch))); err != nil {
		return fmt.Errorf("set image of StatefulSet %s: %w", name, err)
	}
	return nil
}

// statefulSetAt returns the StatefulSet if the StatefulSet controller has
// observed its spec with image, else nil.
func statefulSetAt(ctx context.Context, c client.Reader, ns, name, image string) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, sts); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	containers := sts.Spec.Template.Spec.Containers
	if len(containers) == 0 || containers[0].Image != image || sts.Status.ObservedGeneration != sts.Generation {
		return nil, nil
	}
	return sts, nil
}

// allReady returns a condition that holds when every pod of every StatefulSet
// runs image and is Ready.
func allReady(c client.Reader, ns, image string, names ...string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		for _, name := range names {
			sts, err := statefulSetAt(ctx, c, ns, name, image)
			if sts == nil || err != nil {
				return false, err
			}
			want := ptr.Deref(sts.Spec.Replicas, 1)
			if sts.Status.ReadyReplicas != want || sts.Status.UpdatedReplicas != want || sts.Status.Replicas != want {
				return false, nil
			}
		}
		return true, nil
	}
}

// groupsRolledOut returns a condition that holds when every group says
// Complete for the revision of image of every member, with every pod updated and
// available: a Complete left over from before the template change does not count.
func groupsRolledOut(c client.Reader, ns, image string, names ...string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		for _, name := range names {
			rg := &v1alpha1.RolloutGroup{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, rg); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			if rg.Status.Phase != v1alpha1.PhaseComplete || len(rg.Status.StatefulSets) != len(rg.Spec.StatefulSets) {
				return false, nil
			}
			for _, m := range rg.Status.StatefulSets {
				sts, err := statefulSetAt(ctx, c, ns, m.Name, image)
				if sts == nil || err != nil {
					return false, err
				}
				if m.UpdateRevision != sts.Status.UpdateRevision || m.UpdatedReplicas != m.Replicas || m.AvailableReplicas != m.Replicas {
					return false, nil
				}
			}
		}
		return true, nil
	}
}
