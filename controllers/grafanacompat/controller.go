/*
Copyright 2026 The Echelon Authors.

Licensed under the Apache License, Version 2.0.
*/

// Package grafanacompat is the --grafana-compat mode: it reads the Grafana
// rollout-operator's labels and annotations on the StatefulSets,
// Deployments and ReplicaSets of each watched namespace, and its
// ZoneAwarePodDisruptionBudgets, translates them with the migrate package,
// and keeps the resulting RolloutGroups, ScalingPolicies, DelayedDownscales
// and ZoneDisruptionBudgets in the cluster (labelled
// echelon.dev/grafana-compat), where the ordinary controllers act on them
// with every guarantee, status, Event and metric. It never writes the
// workloads itself (the ScalingPolicy controller writes the Grafana
// protocol's grafana.com/last-downscale when it downscales one). A resource a user made that claims the same StatefulSet wins:
// the compat resource is deleted (or not made) and a Warning Event on the
// StatefulSet says so.
package grafanacompat

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/migrate"
)

// CompatLabel marks the resources compat mode owns. Only those are updated
// or deleted by it.
const CompatLabel = v1alpha1.GrafanaCompatLabel

// fieldManager owns the fields compat mode applies.
const fieldManager = "echelon-grafana-compat"

// Event reasons on the StatefulSets.
const (
	// ReasonOverridden: a user's resource claims the StatefulSet, so its
	// Grafana keys are ignored.
	ReasonOverridden = "GrafanaKeysOverridden"
	// ReasonNotTranslated: a Grafana key could not be translated (the
	// message says why); the rest of the workload's keys are acted on.
	ReasonNotTranslated = "GrafanaKeyNotTranslated"
)

// zpdbRecheck is how soon a namespace is reconciled again while the
// ZoneAwarePodDisruptionBudgets cannot be read, so that a CRD installed (or
// a permission granted) later is noticed without a restart.
const zpdbRecheck = time.Minute

// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups;scalingpolicies;delayeddownscales,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apps,resources=statefulsets;deployments;replicasets,verbs=list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
//
// Reading ZoneAwarePodDisruptionBudgets, writing ZoneDisruptionBudgets and
// injecting the CA into the Grafana webhook configurations are compat's
// alone: config/rbac/grafana_compat_role.yaml, and the chart's grafanaCompat,
// grant them, not a marker, so that an install without compat mode holds
// none of them.

// Reconciler keeps one namespace's compat resources in line with its
// workloads' Grafana keys. A request names the namespace only.
type Reconciler struct {
	client client.Client
	events recorder.EventRecorder
	zpdbs  *zpdbReader
}

// New is the compat reconciler of mgr.
func New(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{client: mgr.GetClient(), events: mgr.GetEventRecorder("echelon"), zpdbs: &zpdbReader{client: mgr.GetClient(), cache: mgr.GetCache()}}
}

// Reconcile translates the namespace's keys, applies what no user resource
// overrides and is not stored as translated already (applied), and deletes the compat resources nothing asks for any more.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ns := req.Namespace
	obs, err := r.observe(ctx, ns)
	if err != nil {
		return ctrl.Result{}, err
	}
	res := migrate.Translate(obs.input, migrate.Options{})
	objs, err := res.Objects()
	if err != nil {
		return ctrl.Result{}, err
	}
	keep := map[string]bool{}
	counts := map[string]float64{}
	stored := map[string]client.Object{}
	for _, obj := range obs.compat {
		stored[kindOf(obj)+"/"+obj.GetName()] = obj
	}
	for _, obj := range objs {
		if owner := obs.overriddenBy(obj); owner != "" {
			r.warnOverridden(obs, obj, owner)
			continue
		}
		labels := obj.GetLabels()
		delete(labels, migrate.MigratedFromLabel)
		labels[CompatLabel] = "true"
		obj.SetLabels(labels)
		if err := stampDigest(obj); err != nil {
			return ctrl.Result{}, err
		}
		key := obj.GetKind() + "/" + obj.GetName()
		keep[key] = true
		counts[obj.GetKind()]++
		if applied(obj, stored[key]) {
			continue
		}
		if err := r.client.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(fieldManager), client.ForceOwnership); err != nil {
			return ctrl.Result{}, fmt.Errorf("apply %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	for _, kind := range metrics.GrafanaCompatKinds {
		metrics.GrafanaCompatObjects.WithLabelValues(ns, kind).Set(counts[kind])
	}
	for _, obj := range obs.compat {
		if keep[kindOf(obj)+"/"+obj.GetName()] {
			continue
		}
		if err := r.client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return ctrl.Result{}, fmt.Errorf("delete %s %s: %w", kindOf(obj), obj.GetName(), err)
		}
	}
	for _, f := range res.Findings {
		if f.Severity != migrate.SeverityError {
			continue
		}
		if sts := obs.statefulSetRef(f.Object); sts != nil {
			r.events.Eventf(sts, nil, corev1.EventTypeWarning, ReasonNotTranslated, "GrafanaCompat", "%s: %s", f.Key, f.Message)
		}
	}
	r.warnUnreadableLastDownscale(obs, keep)
	if !obs.zpdbsReadable {
		return ctrl.Result{RequeueAfter: zpdbRecheck}, nil
	}
	return ctrl.Result{}, nil
}

// warnUnreadableLastDownscale says on each member of a kept RolloutGroup
// whose grafana.com/last-downscale cannot be read that it counts as no
// downscale: the zone delay does not wait for it.
func (r *Reconciler) warnUnreadableLastDownscale(obs *observation, keep map[string]bool) {
	for _, sts := range obs.statefulSets {
		group := sts.Labels[migrate.RolloutGroupLabel]
		if group == "" || !keep["RolloutGroup/"+group] {
			continue
		}
		if _, err := migrate.LastDownscaleOf(sts); err != nil {
			r.events.Eventf(sts, nil, corev1.EventTypeWarning, ReasonNotTranslated, "GrafanaCompat",
				"%v: ignored, so the zone delay does not count from it", err)
		}
	}
}

// warnOverridden says on each StatefulSet obj would claim that owner, a
// user's resource, claims it instead.
func (r *Reconciler) warnOverridden(obs *observation, obj *unstructured.Unstructured, owner string) {
	for _, name := range claimedStatefulSets(obj) {
		if sts := obs.statefulSets[name]; sts != nil {
			r.events.Eventf(sts, nil, corev1.EventTypeWarning, ReasonOverridden, "GrafanaCompat",
				"%s claims this StatefulSet: its Grafana rollout-operator keys for a %s are ignored", owner, obj.GetKind())
		}
	}
}

// kindOf is the kind of one of the typed objects compat mode owns.
func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *v1alpha1.RolloutGroup:
		return "RolloutGroup"
	case *v1alpha1.ScalingPolicy:
		return "ScalingPolicy"
	case *v1alpha1.DelayedDownscale:
		return "DelayedDownscale"
	case *v1alpha1.ZoneDisruptionBudget:
		return "ZoneDisruptionBudget"
	}
	return ""
}

// claimedStatefulSets names the StatefulSets a translated object acts on.
func claimedStatefulSets(obj *unstructured.Unstructured) []string {
	switch obj.GetKind() {
	case "RolloutGroup":
		members, _, _ := unstructured.NestedSlice(obj.Object, "spec", "statefulSets")
		var names []string
		for _, m := range members {
			if name, ok := m.(map[string]any)["name"].(string); ok {
				names = append(names, name)
			}
		}
		return names
	case "ZoneDisruptionBudget":
		return nil // it selects pods; a user's budget of the same name takes its place
	default:
		kind, _, _ := unstructured.NestedString(obj.Object, "spec", "targetRef", "kind")
		name, _, _ := unstructured.NestedString(obj.Object, "spec", "targetRef", "name")
		if kind == "" || kind == v1alpha1.TargetKindStatefulSet {
			return []string{name}
		}
		return nil
	}
}
