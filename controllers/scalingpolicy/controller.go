package scalingpolicy

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/patch"
	"github.com/echelon-operator/echelon/controllers/internal/source"
	"github.com/echelon-operator/echelon/internal/hooks"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/migrate"
	"github.com/echelon-operator/echelon/internal/podcall"
	"github.com/echelon-operator/echelon/internal/scaling"
)

const controllerName = "scalingpolicy"

// Reconciler scales the targets of ScalingPolicies.
type Reconciler struct {
	client.Client
	// apiReader reads what the cache does not hold: whether a source resource
	// exists when its scale subresource cannot be read.
	apiReader client.Reader
	// tlsObjects reads the Secrets and ConfigMaps of tls blocks: the
	// process's httptls.Objects, which watches each one read.
	tlsObjects client.Reader
	events     recorder.EventRecorder
	sources    *sourceWatches
	now        func() time.Time
	// hookCaller makes the beforePodRemoval calls of spec.hooks; podHost
	// says how a pod is reached (podcall.Addressing.Host); hooksDone
	// remembers the pods already called.
	hookCaller *hooks.Caller
	podHost    func(pod *corev1.Pod, service string) (host, why string)
	hooksDone  *hooks.Memo
}

// +kubebuilder:rbac:groups=echelon.dev,resources=scalingpolicies,verbs=list;watch
// +kubebuilder:rbac:groups=echelon.dev,resources=scalingpolicies/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;patch
// +kubebuilder:rbac:groups=apps,resources=deployments;replicasets,verbs=list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments/scale;replicasets/scale,verbs=get

// Reconcile brings one ScalingPolicy's target one step closer to the desired
// replicas: observe, plan (pure), scale, write back, then write status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
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
	plan := scaling.Decide(obs.In)
	if plan.AskDisruption != nil {
		if plan, err = r.askDisruption(ctx, sp, &obs, plan); err != nil {
			return ctrl.Result{}, err
		}
	}
	if isDownscale(plan) && obs.In.FloorSource != "" {
		in, held, err := r.confirmDelayed(ctx, obs, plan)
		if err != nil {
			return ctrl.Result{}, err
		}
		if held != "" {
			obs.In = in
			plan = scaling.Decide(obs.In)
			plan.Message += "; " + held
			r.events.Eventf(sp, obs.Target, corev1.EventTypeNormal, "DelayedDownscaleUnconfirmed", "Hold",
				"not shrinking StatefulSet %s past a pod DelayedDownscale %s has not prepared: %s", obs.Target.Name, obs.In.FloorSource, held)
		}
	}
	// The pods a downscale removes hear the hook first; then only a
	// downscale the cache allows pays the live reads, and records its
	// intent in the group before the StatefulSet is patched.
	plan, hookHeld := r.beforeDownscale(ctx, sp, obs, plan)
	if isDownscale(plan) && obs.Group != nil {
		hooked := *plan.Scale
		if plan, err = r.confirmDownscale(ctx, sp, &obs); err != nil {
			return ctrl.Result{}, err
		}
		if isDownscale(plan) && *plan.Scale < hooked {
			// The live read asks for more than the hook was called for:
			// those pods go in a later pass, once called. Their intent,
			// recorded with the rest, ends when it expires.
			plan.Scale = &hooked
		}
	}
	now := obs.In.Now
	selector := obs.GuardedSelector
	if obs.Target != nil && obs.Target.Spec.Selector != nil {
		if sel, err := metav1.LabelSelectorAsSelector(obs.Target.Spec.Selector); err == nil {
			selector = sel.String()
		}
	}

	// A downscale is recorded before it is made: the other zones' delay counts
	// from lastDownscaleTime, and a crash between the two must not lose it (a
	// recorded downscale that then failed only delays the others).
	written := sp.Status
	if isDownscale(plan) {
		intended := computeStatus(sp, obs.In, plan, true, selector, now, now)
		if err := r.patchStatus(ctx, sp, written, intended); err != nil {
			return ctrl.Result{}, err
		}
		written = intended
	}
	actCtx, cancelAct := fenced(ctx, obs.In, plan)
	scaled, actErr := r.scale(actCtx, sp, obs, plan)
	cancelAct()
	scaledAt := r.now() // after the patch: the other zones' delay counts from here
	actErr = errors.Join(actErr, r.writeBack(ctx, sp, obs, plan, scaled))

	st := computeStatus(sp, obs.In, plan, scaled, selector, now, scaledAt)
	if isDownscale(plan) && !scaled {
		st.LastDownscaleTime = written.LastDownscaleTime // keep the record: it may have happened
	}
	if actErr != nil {
		// observedGeneration says a pass over that generation succeeded (as in
		// Cluster API).
		st.ObservedGeneration = written.ObservedGeneration
	}
	r.recordTransition(sp, plan, st, scaled)
	r.exportMetrics(sp, plan, st, scaled, now)
	if err := r.patchStatus(ctx, sp, written, st); err != nil {
		return ctrl.Result{}, errors.Join(actErr, err)
	}
	if actErr != nil {
		return ctrl.Result{}, actErr
	}
	after := requeueAfter(obs.In, plan)
	if hookHeld && (after == 0 || after > hookRetryInterval) {
		after = hookRetryInterval
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

func isDownscale(p scaling.Plan) bool { return p.Scale != nil && *p.Scale < p.Current }

// patchStatus writes the policy's status next over written, when they differ.
func (r *Reconciler) patchStatus(ctx context.Context, sp *v1alpha1.ScalingPolicy, written, next v1alpha1.ScalingPolicyStatus) error {
	if err := patch.Status(ctx, r, sp, written, next, func(o *v1alpha1.ScalingPolicy, s v1alpha1.ScalingPolicyStatus) { o.Status = s }); err != nil {
		return fmt.Errorf("ScalingPolicy: %w", err)
	}
	return nil
}

// scale patches the target's spec.replicas as planned. The patch carries the
// target's resourceVersion, so a change made meanwhile (by a person, an
// autoscaler) is not overwritten: the pass fails and runs again on fresh state.
func (r *Reconciler) scale(ctx context.Context, sp *v1alpha1.ScalingPolicy, obs observation, plan scaling.Plan) (bool, error) {
	if plan.Scale == nil || obs.Target == nil {
		return false, nil
	}
	patched := obs.Target.DeepCopy()
	patched.Spec.Replicas = plan.Scale
	if *plan.Scale < plan.Current && sp.Labels[v1alpha1.GrafanaCompatLabel] == "true" {
		// The Grafana protocol's record, in the same patch: a Grafana
		// operator put back (switching back from compat mode) waits for
		// the zone delay after this downscale too.
		metav1.SetMetaDataAnnotation(&patched.ObjectMeta, migrate.LastDownscaleAnnotation, migrate.FormatLastDownscale(r.now()))
	}
	// The field manager, with the operator's user, tells the no-downscale
	// webhook that this downscale is the policy's own.
	if err := r.Patch(ctx, patched, client.MergeFromWithOptions(obs.Target, client.MergeFromWithOptimisticLock{}),
		client.FieldOwner(lookup.ScalingPolicyFieldManager)); err != nil {
		r.events.Eventf(sp, obs.Target, corev1.EventTypeWarning, "ScaleFailed", "Scale",
			"scaling StatefulSet %s from %d to %d failed: %s", obs.Target.Name, plan.Current, *plan.Scale, kube.APIMessage(err))
		return false, fmt.Errorf("scale StatefulSet %s to %d: %w", obs.Target.Name, *plan.Scale, err)
	}
	return true, nil
}

// writeBack reports the target's replicas in the source resource's
// .status.replicas, when the policy follows a resource and writeBack is on.
func (r *Reconciler) writeBack(ctx context.Context, sp *v1alpha1.ScalingPolicy, obs observation, plan scaling.Plan, scaled bool) error {
	if obs.Resource == nil || obs.Target == nil || (sp.Spec.WriteBack != nil && !*sp.Spec.WriteBack) {
		return nil
	}
	current := plan.Current
	if scaled {
		current = *plan.Scale
	}
	if obs.ResourceScale.Status.Replicas == current {
		return nil
	}
	patch := client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"status":{"replicas":%d}}`, current))
	if err := r.Status().Patch(ctx, obs.Resource, patch); err != nil {
		r.events.Eventf(sp, nil, corev1.EventTypeWarning, "WriteBackFailed", "WriteBack",
			"writing replicas %d into the status of %s %s failed: %s", current, obs.Resource.GetKind(), obs.Resource.GetName(), kube.APIMessage(err))
		return fmt.Errorf("write back replicas to %s %s: %w", obs.Resource.GetKind(), obs.Resource.GetName(), err)
	}
	return nil
}

// recordTransition emits an Event for every scale, and for every wait or
// refusal when it begins (not on every pass while it lasts).
func (r *Reconciler) recordTransition(sp *v1alpha1.ScalingPolicy, plan scaling.Plan, st v1alpha1.ScalingPolicyStatus, scaled bool) {
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

func (r *Reconciler) exportMetrics(sp *v1alpha1.ScalingPolicy, plan scaling.Plan, st v1alpha1.ScalingPolicyStatus, scaled bool, now time.Time) {
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

// WithTLSObjects reads the Secrets and ConfigMaps of tls blocks through
// objects (the process's httptls.Objects) instead of live; nil keeps live.
func (r *Reconciler) WithTLSObjects(objects client.Reader) *Reconciler {
	if objects != nil {
		r.tlsObjects = objects
	}
	return r
}

// New returns the reconciler, reading through the
// manager's cache and API reader. The policy indexes must be registered.
func New(mgr ctrl.Manager) *Reconciler {
	r := &Reconciler{
		Client:     mgr.GetClient(),
		apiReader:  mgr.GetAPIReader(),
		tlsObjects: mgr.GetAPIReader(),
		events:     source.Recorder(mgr.GetEventRecorder("echelon")),
		now:        time.Now,
		// Each hook call carries its own timeout.
		hookCaller: &hooks.Caller{HTTP: httptls.NewClient(0)},
		hooksDone:  hooks.NewMemo(),
		podHost:    podcall.Addressing{ClusterDomain: "cluster.local"}.Host,
	}
	r.sources = &sourceWatches{cache: mgr.GetCache(), mapper: r.requestsForResource, watched: map[schema.GroupVersionKind]bool{}}
	return r
}
