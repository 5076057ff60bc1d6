package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/patch"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/scaling"
)

const scalingControllerName = "scalingpolicy"

// ScalingPolicyReconciler scales the targets of ScalingPolicies.
type ScalingPolicyReconciler struct {
	client.Client
	// apiReader reads what the cache does not hold: whether a source resource
	// exists when its scale subresource cannot be read.
	apiReader client.Reader
	events    recorder.EventRecorder
	sources   *sourceWatches
	now       func() time.Time
}

// +kubebuilder:rbac:groups=echelon.dev,resources=scalingpolicies,verbs=list;watch
// +kubebuilder:rbac:groups=echelon.dev,resources=scalingpolicies/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;patch
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets,verbs=list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments/scale;replicasets/scale,verbs=get

// Reconcile brings one ScalingPolicy's target one step closer to the desired
// replicas: observe, plan (pure), scale, write back, then write status once.
func (r *ScalingPolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sp := &v1alpha1.ScalingPolicy{}
	if err := r.Get(ctx, req.NamespacedName, sp); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.ForgetPolicy(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get ScalingPolicy: %w", err)
	}
	obs, err := r.observe(ctx, sp)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan := scaling.Decide(obs.in)
	if isDownscale(plan) && obs.in.Group != nil {
		if plan, err = r.confirmDownscale(ctx, obs); err != nil {
			return ctrl.Result{}, err
		}
	}
	now := obs.in.Now
	selector := obs.guardedSelector
	if obs.target != nil && obs.target.Spec.Selector != nil {
		if sel, err := metav1.LabelSelectorAsSelector(obs.target.Spec.Selector); err == nil {
			selector = sel.String()
		}
	}

	// A downscale is recorded before it is made: the other zones' delay counts
	// from lastDownscaleTime, and a crash between the two must not lose it (a
	// recorded downscale that then failed only delays the others).
	written := sp.Status
	if isDownscale(plan) {
		intended := computeScalingStatus(sp, obs.in, plan, true, selector, now, now)
		if err := r.patchStatus(ctx, sp, written, intended); err != nil {
			return ctrl.Result{}, err
		}
		written = intended
	}
	scaled, actErr := r.scale(ctx, sp, obs, plan)
	scaledAt := r.now() // after the patch: the other zones' delay counts from here
	actErr = errors.Join(actErr, r.writeBack(ctx, sp, obs, plan, scaled))

	st := computeScalingStatus(sp, obs.in, plan, scaled, selector, now, scaledAt)
	if isDownscale(plan) && !scaled {
		st.LastDownscaleTime = written.LastDownscaleTime // keep the record: it may have happened
	}
	r.recordScalingTransition(sp, plan, st, scaled)
	r.exportScalingMetrics(sp, plan, st, scaled, now)
	if err := r.patchStatus(ctx, sp, written, st); err != nil {
		return ctrl.Result{}, errors.Join(actErr, err)
	}
	if actErr != nil {
		return ctrl.Result{}, actErr
	}
	return ctrl.Result{RequeueAfter: plan.RequeueAfter}, nil
}

func isDownscale(p scaling.Plan) bool { return p.Scale != nil && *p.Scale < p.Current }

// patchStatus writes the policy's status next over written, when they differ.
func (r *ScalingPolicyReconciler) patchStatus(ctx context.Context, sp *v1alpha1.ScalingPolicy, written, next v1alpha1.ScalingPolicyStatus) error {
	if err := patch.Status(ctx, r, sp, written, next, func(o *v1alpha1.ScalingPolicy, s v1alpha1.ScalingPolicyStatus) { o.Status = s }); err != nil {
		return fmt.Errorf("ScalingPolicy: %w", err)
	}
	return nil
}

// scale patches the target's spec.replicas as planned. The patch carries the
// target's resourceVersion, so a change made meanwhile (by a person, an
// autoscaler) is not overwritten: the pass fails and runs again on fresh state.
func (r *ScalingPolicyReconciler) scale(ctx context.Context, sp *v1alpha1.ScalingPolicy, obs scalingObservation, plan scaling.Plan) (bool, error) {
	if plan.Scale == nil || obs.target == nil {
		return false, nil
	}
	patched := obs.target.DeepCopy()
	patched.Spec.Replicas = plan.Scale
	// The field manager, with the operator's user, tells the no-downscale
	// webhook that this downscale is the policy's own.
	if err := r.Patch(ctx, patched, client.MergeFromWithOptions(obs.target, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(lookup.ScalingPolicyFieldManager)); err != nil {
		r.events.Eventf(sp, obs.target, corev1.EventTypeWarning, "ScaleFailed", "Scale",
			"scaling StatefulSet %s from %d to %d failed: %s", obs.target.Name, plan.Current, *plan.Scale, apiMessage(err))
		return false, fmt.Errorf("scale StatefulSet %s to %d: %w", obs.target.Name, *plan.Scale, err)
	}
	return true, nil
}

// writeBack reports the target's replicas in the source resource's
// .status.replicas, when the policy follows a resource and writeBack is on.
func (r *ScalingPolicyReconciler) writeBack(ctx context.Context, sp *v1alpha1.ScalingPolicy, obs scalingObservation, plan scaling.Plan, scaled bool) error {
	if obs.resource == nil || obs.target == nil || (sp.Spec.WriteBack != nil && !*sp.Spec.WriteBack) {
		return nil
	}
	current := plan.Current
	if scaled {
		current = *plan.Scale
	}
	if obs.resourceScale.Status.Replicas == current {
		return nil
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"replicas":%d}}`, current))
	if err := r.Status().Patch(ctx, obs.resource, patch); err != nil {
		r.events.Eventf(sp, nil, corev1.EventTypeWarning, "WriteBackFailed", "WriteBack",
			"writing replicas %d into the status of %s %s failed: %s", current, obs.resource.GetKind(), obs.resource.GetName(), apiMessage(err))
		return fmt.Errorf("write back replicas to %s %s: %w", obs.resource.GetKind(), obs.resource.GetName(), err)
	}
	return nil
}

// recordScalingTransition emits an Event for every scale, and for every wait or
// refusal when it begins (not on every pass while it lasts).
func (r *ScalingPolicyReconciler) recordScalingTransition(sp *v1alpha1.ScalingPolicy, plan scaling.Plan, st v1alpha1.ScalingPolicyStatus, scaled bool) {
	switch {
	case scaled:
		r.events.Eventf(sp, nil, corev1.EventTypeNormal, plan.Reason, "Scale", "%s", plan.Message)
	case plan.Phase == v1alpha1.ScalingPhaseWaiting || plan.Phase == v1alpha1.ScalingPhaseBlocked || plan.Phase == v1alpha1.ScalingPhasePaused:
		if old := meta.FindStatusCondition(sp.Status.Conditions, v1alpha1.ScalingConditionReady); old != nil && old.Reason == plan.Reason && sp.Status.Phase == plan.Phase {
			return
		}
		eventType := corev1.EventTypeNormal
		if plan.Phase == v1alpha1.ScalingPhaseBlocked {
			eventType = corev1.EventTypeWarning
		}
		r.events.Eventf(sp, nil, eventType, plan.Reason, "Hold", "%s", plan.Message)
	}
}

func (r *ScalingPolicyReconciler) exportScalingMetrics(sp *v1alpha1.ScalingPolicy, plan scaling.Plan, st v1alpha1.ScalingPolicyStatus, scaled bool, now time.Time) {
	metrics.SetPolicy(sp.Namespace, sp.Name, st.Phase, st.DesiredReplicas, st.Replicas)
	if !scaled {
		return
	}
	direction := "up"
	if *plan.Scale < plan.Current {
		direction = "down"
	}
	metrics.ScaleOperations.WithLabelValues(sp.Namespace, sp.Name, direction).Inc()
	if since := sp.Status.WaitingSince; since != nil {
		metrics.ScaleWait.WithLabelValues(sp.Namespace, sp.Name).Observe(now.Sub(since.Time).Seconds())
	}
}

// newScalingPolicyReconciler returns the reconciler, reading through the
// manager's cache and API reader. The policy indexes must be registered.
func newScalingPolicyReconciler(mgr ctrl.Manager) *ScalingPolicyReconciler {
	r := &ScalingPolicyReconciler{
		Client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		events:    mgr.GetEventRecorder("echelon"),
		now:       time.Now,
	}
	r.sources = &sourceWatches{cache: mgr.GetCache(), mapper: r.requestsForResource, watched: map[schema.GroupVersionKind]bool{}}
	return r
}

// groupRolloutChanged passes RolloutGroup updates that change which member is
// rolled, or whether a rollout runs: what the interlock reads.
var groupRolloutChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*v1alpha1.RolloutGroup)
		n, okNew := e.ObjectNew.(*v1alpha1.RolloutGroup)
		if !okOld || !okNew {
			return true
		}
		return o.Generation != n.Generation || o.Status.Phase != n.Status.Phase || o.Status.CurrentStatefulSet != n.Status.CurrentStatefulSet
	},
}

// policyChanged passes ScalingPolicy updates that other policies read: a new
// target (claimed twice) and a recorded downscale (zone delay).
var policyChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*v1alpha1.ScalingPolicy)
		n, okNew := e.ObjectNew.(*v1alpha1.ScalingPolicy)
		if !okOld || !okNew {
			return true
		}
		return o.Spec.TargetRef != n.Spec.TargetRef || !equality.Semantic.DeepEqual(o.Status.LastDownscaleTime, n.Status.LastDownscaleTime)
	},
}

// delayedEligibleChanged passes DelayedDownscale updates that move the floor.
var delayedEligibleChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*v1alpha1.DelayedDownscale)
		n, okNew := e.ObjectNew.(*v1alpha1.DelayedDownscale)
		return !okOld || !okNew || !equality.Semantic.DeepEqual(o.Status.EligibleReplicas, n.Status.EligibleReplicas) ||
			o.Status.Replicas != n.Status.Replicas || !equality.Semantic.DeepEqual(o.Status.DesiredReplicas, n.Status.DesiredReplicas)
	},
}

// scalingStatefulSetChanged passes the StatefulSet updates a policy reads: its
// replicas (spec and status, Ready count) and generation.
var scalingStatefulSetChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, okOld := e.ObjectOld.(*appsv1.StatefulSet)
		n, okNew := e.ObjectNew.(*appsv1.StatefulSet)
		if !okOld || !okNew {
			return true
		}
		return o.Generation != n.Generation || o.Status.ObservedGeneration != n.Status.ObservedGeneration ||
			o.Status.Replicas != n.Status.Replicas || o.Status.ReadyReplicas != n.Status.ReadyReplicas ||
			!equality.Semantic.DeepEqual(o.Labels, n.Labels)
	},
}

// setupWithManager registers the controller and its watches; source resources
// are watched as policies name them (sourceWatches).
func (r *ScalingPolicyReconciler) setupWithManager(mgr ctrl.Manager) error {
	c, err := ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ScalingPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.ScalingPolicy{}, handler.EnqueueRequestsFromMapFunc(r.requestsForPolicy), builder.WithPredicates(policyChanged)).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.requestsForStatefulSet), builder.WithPredicates(scalingStatefulSetChanged)).
		Watches(&v1alpha1.RolloutGroup{}, handler.EnqueueRequestsFromMapFunc(r.requestsForGroup), builder.WithPredicates(groupRolloutChanged)).
		Watches(&v1alpha1.DelayedDownscale{}, handler.EnqueueRequestsFromMapFunc(r.requestsForDelayed), builder.WithPredicates(delayedEligibleChanged)).
		Named(scalingControllerName).
		Build(r)
	if err != nil {
		return err
	}
	r.sources.controller = c
	return nil
}
