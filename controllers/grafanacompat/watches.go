/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

package grafanacompat

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// requestName is the name of every request: the namespace is what counts.
const requestName = "grafana-compat"

// toNamespace maps any object to its namespace's request.
func toNamespace(_ context.Context, obj client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: requestName}}}
}

// SetupWithManager reconciles a namespace when a workload's labels,
// annotations or spec change (not its status: rollouts would wake it for
// nothing), an Echelon resource is made, changed or deleted, or (once their
// CRD is seen) a ZoneAwarePodDisruptionBudget changes.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	changed := builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))
	b := ctrl.NewControllerManagedBy(mgr).Named("grafanacompat")
	for _, obj := range []client.Object{&appsv1.StatefulSet{}, &appsv1.Deployment{}, &appsv1.ReplicaSet{},
		&v1alpha1.RolloutGroup{}, &v1alpha1.ScalingPolicy{}, &v1alpha1.DelayedDownscale{}, &v1alpha1.ZoneDisruptionBudget{}} {
		b = b.Watches(obj, handler.EnqueueRequestsFromMapFunc(toNamespace), changed)
	}
	c, err := b.Build(r)
	if err != nil {
		return err
	}
	// The ZoneAwarePodDisruptionBudgets are watched once their CRD is seen
	// (zpdbReader): a watch of a missing CRD would only log errors.
	r.zpdbs.watch = zpdbWatch(mgr, c)
	return nil
}
