/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package grafanacompat

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/migrate"
)

// zpdbGVK is the Grafana operator's ZoneAwarePodDisruptionBudget, read as
// unstructured: its CRD may not be installed, and Echelon has no Go type
// for it.
var zpdbGVK = schema.GroupVersionKind{Group: migrate.ZoneAwarePDBGroup, Version: "v1", Kind: migrate.ZoneAwarePDBKind}

// zpdbReader reads the ZoneAwarePodDisruptionBudgets of a namespace, and
// starts watching them the first time a list succeeds. While the CRD is
// missing, or listing is forbidden, it reads none, says so once in the log
// and in metrics.GrafanaCompatZPDBReadable, and the reconciler looks again
// after zpdbRecheck: no watch is started, so nothing loops on errors.
type zpdbReader struct {
	// client lists from the API server (unstructured objects are not
	// cached); cache, once the watch runs, from its informer, so that a
	// reconcile costs no request. cache is nil in tests.
	client client.Client
	cache  client.Reader
	// watch starts the watch; nil in tests.
	watch func() error

	mu       sync.Mutex
	watching bool
	// state is the last state logged: "", "readable" or the reason not.
	state string
}

// list returns the namespace's budgets; readable is false, with no error,
// when they cannot be read for a reason that a log line and the metric
// report (no CRD, no permission).
func (z *zpdbReader) list(ctx context.Context, namespace string) (pdbs []migrate.ZoneAwarePDB, readable bool, err error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(zpdbGVK.GroupVersion().WithKind(zpdbGVK.Kind + "List"))
	reader := client.Reader(z.client)
	z.mu.Lock()
	if z.watching && z.cache != nil {
		reader = z.cache
	}
	z.mu.Unlock()
	err = reader.List(ctx, &list, client.InNamespace(namespace))
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		z.report(ctx, "the ZoneAwarePodDisruptionBudget CRD ("+zpdbGVK.GroupVersion().String()+") is not installed")
		return nil, false, nil
	case apierrors.IsForbidden(err):
		z.report(ctx, "listing ZoneAwarePodDisruptionBudgets is forbidden: grant the chart's grafanaCompat RBAC")
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("list ZoneAwarePodDisruptionBudgets: %w", err)
	}
	z.report(ctx, "readable")
	if err := z.startWatch(); err != nil {
		return nil, false, err
	}
	for _, item := range list.Items {
		spec, _, _ := unstructured.NestedMap(item.Object, "spec")
		pdbs = append(pdbs, migrate.ZoneAwarePDB{Namespace: item.GetNamespace(), Name: item.GetName(), Spec: spec})
	}
	return pdbs, true, nil
}

// report logs a change of state and sets the metric.
func (z *zpdbReader) report(ctx context.Context, state string) {
	readable := state == "readable"
	metrics.SetGrafanaCompatZPDBReadable(readable)
	z.mu.Lock()
	changed := z.state != state
	z.state = state
	z.mu.Unlock()
	if !changed {
		return
	}
	log := ctrl.LoggerFrom(ctx)
	if readable {
		log.Info("Grafana compat: reading ZoneAwarePodDisruptionBudgets")
		return
	}
	log.Info("Grafana compat: not reading ZoneAwarePodDisruptionBudgets; the evictions they guarded are judged by Kubernetes alone", "reason", state, "recheckIn", zpdbRecheck)
}

func (z *zpdbReader) startWatch() error {
	z.mu.Lock()
	defer z.mu.Unlock()
	if z.watching || z.watch == nil {
		return nil
	}
	if err := z.watch(); err != nil {
		return fmt.Errorf("watch ZoneAwarePodDisruptionBudgets: %w", err)
	}
	z.watching = true
	return nil
}

// zpdbWatch is the watch the reader starts, once the CRD is known to exist.
func zpdbWatch(mgr ctrl.Manager, c interface {
	Watch(source.TypedSource[ctrl.Request]) error
}) func() error {
	return func() error {
		obj := &unstructured.Unstructured{}
		obj.SetGroupVersionKind(zpdbGVK)
		return c.Watch(source.Kind[client.Object](mgr.GetCache(), obj, handler.EnqueueRequestsFromMapFunc(toNamespace)))
	}
}
