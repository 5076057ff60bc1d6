/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"errors"
	"fmt"
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/test/builders"
)

// createWorkers bounds the bench's concurrent creates. The bench's client has
// client-go's rate limit raised (the control plane's users get 1000 QPS), so
// this pool is what keeps thousands of objects from queueing at the API server
// all at once.
const createWorkers = 16

// group is one RolloutGroup of the bench with its member StatefulSets.
type group struct {
	name    string
	members []string
}

// benchGroups are the rolling group, named groupName with memberNames, and
// idle groups of the same shape whose members carry the group's name.
func benchGroups(s scenario, idle int) []group {
	groups := []group{{name: groupName, members: memberNames[:s.members]}}
	for i := range idle {
		g := group{name: fmt.Sprintf("idle-%02d", i+1)}
		for _, m := range memberNames[:s.members] {
			g.members = append(g.members, g.name+"-"+m)
		}
		groups = append(groups, g)
	}
	return groups
}

// statefulSetNames are the members of every group, then the floor's StatefulSet.
func statefulSetNames(groups []group) []string {
	var names []string
	for _, g := range groups {
		names = append(names, g.members...)
	}
	return append(names, floorName)
}

// createWorkload creates every StatefulSet (the floor's too) and every group
// at image, createWorkers at a time. With rollingUpdate the groups' members
// roll by their partition, held at their replicas, with the StatefulSet's own
// maxUnavailable the group's: the StatefulSet controller then replaces every
// pod Echelon releases at once, as Echelon deletes them for OnDelete (the
// floor's StatefulSet stays OnDelete).
func createWorkload(ctx context.Context, c client.Client, ns string, s scenario, groups []group, image string, rollingUpdate bool) error {
	var objs []client.Object
	for _, name := range statefulSetNames(groups) {
		sts := statefulSet(ns, name, s.replicas, image)
		if rollingUpdate && name != floorName {
			partition, maxUnavailable := s.replicas, intstr.FromInt32(s.maxUnavailable)
			sts.Spec.UpdateStrategy = appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateStatefulSetStrategy{Partition: &partition, MaxUnavailable: &maxUnavailable}}
		}
		objs = append(objs, sts)
	}
	for _, g := range groups {
		objs = append(objs, builders.MakeRolloutGroup(ns, g.name).Members(g.members...).MaxUnavailable(s.maxUnavailable).Obj())
	}
	return createAll(ctx, c, objs)
}

// createAll creates objs, createWorkers at a time.
func createAll(ctx context.Context, c client.Client, objs []client.Object) error {
	return forEach(ctx, len(objs), createWorkers, func(ctx context.Context, i int) error {
		if err := c.Create(ctx, objs[i]); err != nil {
			return fmt.Errorf("create %T %s: %w", objs[i], objs[i].GetName(), err)
		}
		return nil
	})
}

// forEach calls f for every index below n, at most workers at a time, and
// returns every error joined. Once ctx is done it starts no more calls.
func forEach(ctx context.Context, n, workers int, f func(ctx context.Context, i int) error) error {
	sem := make(chan struct{}, max(workers, 1))
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		// Checked after the select too: when a slot and the end of ctx are both
		// ready, the select may take either.
		if ctx.Err() != nil {
			wg.Wait()
			return errors.Join(append(errs, context.Cause(ctx))...)
		}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(ctx, i)
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
