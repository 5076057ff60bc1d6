/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/operator"
	"github.com/echelon-operator/echelon/test/controlplane"
	"github.com/echelon-operator/echelon/test/nswatch"
)

// watcher follows the RolloutGroup and its StatefulSets through watches and
// wakes its waiters on every change, so that the demo reacts to status changes
// as they happen instead of polling. Close it before the control plane goes
// away under it.
type watcher struct {
	*nswatch.Watcher
}

func startWatch(ctx context.Context, cp *controlplane.ControlPlane, ns string) (*watcher, error) {
	w, err := nswatch.Start(ctx, cp.Config(), operator.NewScheme(), ns, &v1alpha1.RolloutGroup{}, &appsv1.StatefulSet{})
	if err != nil {
		return nil, err
	}
	return &watcher{w}, nil
}

// waitUntil returns once cond holds, checking it now and after every change.
func (w *watcher) waitUntil(ctx context.Context, cond func(context.Context) (bool, error)) error {
	if err := w.WaitUntil(ctx, cond); err != nil {
		return fmt.Errorf("waiting for the rollout: %w", err)
	}
	return nil
}

// rolledOutTo returns a condition that holds when every member runs image on
// every pod, all of them available, and the group says Complete for exactly
// these revisions: a Complete left over from the previous rollout does not count.
func (w *watcher) rolledOutTo(image string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		rg := &v1alpha1.RolloutGroup{}
		if err := w.Get(ctx, client.ObjectKey{Namespace: namespace, Name: groupName}, rg); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		if rg.Status.Phase != v1alpha1.PhaseComplete || len(rg.Status.StatefulSets) == 0 {
			return false, nil
		}
		for _, m := range rg.Status.StatefulSets {
			sts := &appsv1.StatefulSet{}
			if err := w.Get(ctx, client.ObjectKey{Namespace: namespace, Name: m.Name}, sts); err != nil {
				return false, client.IgnoreNotFound(err)
			}
			containers := sts.Spec.Template.Spec.Containers
			switch {
			case len(containers) == 0 || containers[0].Image != image,
				sts.Status.ObservedGeneration != sts.Generation,
				m.UpdateRevision != sts.Status.UpdateRevision,
				m.UpdatedReplicas != m.Replicas || m.AvailableReplicas != m.Replicas:
				return false, nil
			}
		}
		return true, nil
	}
}

// displayed is what `kubectl get rolloutgroups` shows of a group's status,
// apart from its age.
type displayed struct{ phase, updated, rolling string }

func (w *watcher) displayed(ctx context.Context) displayed {
	rg := &v1alpha1.RolloutGroup{}
	if err := w.Get(ctx, client.ObjectKey{Namespace: namespace, Name: groupName}, rg); err != nil {
		return displayed{}
	}
	return displayed{string(rg.Status.Phase), rg.Status.Updated, rg.Status.CurrentStatefulSet}
}

// followRollout runs `kubectl get rolloutgroups` on every change of the
// group's status until the group is rolled out to newImage, and prints the row
// when it differs from the last one printed (age aside). Each row carries the
// time since the template change; the header is repeated only when kubectl
// changes the column widths.
func followRollout(ctx context.Context, w *watcher, k *kubectl, out io.Writer, changed time.Time) error {
	// The status before the operator noticed the change is not news.
	lastStatus, lastRow := w.displayed(ctx), ""
	lastHeader := ""
	done := w.rolledOutTo(newImage)
	return w.waitUntil(ctx, func(ctx context.Context) (bool, error) {
		if now := w.displayed(ctx); now != lastStatus {
			lastStatus = now
			at := time.Since(changed)
			table, err := k.run(ctx, "get", "rolloutgroups", "-n", namespace)
			if err != nil {
				return false, err
			}
			lines := strings.Split(strings.TrimRight(table, "\n"), "\n")
			if len(lines) == 2 && withoutAge(lines[1]) != lastRow {
				lastRow = withoutAge(lines[1])
				if lines[0] != lastHeader {
					lastHeader = lines[0]
					fmt.Fprintf(out, "%s%8s  %s\n", indent, "", lines[0])
				}
				fmt.Fprintf(out, "%s%8s  %s\n", indent, fmt.Sprintf("+%.1fs", at.Seconds()), lines[1])
			}
		}
		return done(ctx)
	})
}

// withoutAge drops the last column, AGE, from a row of `kubectl get rolloutgroups`.
func withoutAge(row string) string {
	fields := strings.Fields(row)
	return strings.Join(fields[:max(len(fields)-1, 0)], " ")
}
