// Package volumeresize grows the volumes of a RolloutGroup's members as
// spec.volumeClaimSizes asks, zone by zone: it observes the members'
// StatefulSets and claims (read live: the cache strips volumeClaimTemplates),
// asks the pure planner (internal/resize) what to do next, acts, and writes
// status.volumeResize once per pass. It is the only writer of that field;
// the RolloutGroup controller carries it over as written.
package volumeresize

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/patch"
	"github.com/echelon-operator/echelon/controllers/internal/source"
	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/resize"
)

const (
	controllerName = "volumeresize"
	// pollInterval is how soon a resize under way looks again: claims are
	// not watched (a cache of every claim of the namespace for one
	// occasional task), so the driver's progress is polled while a zone
	// is being resized, and only then. make bench (resize, 3 x 30 claims,
	// 2 s expansions, floor 6 s): 29.4 s polling every 2 s, 16.2 s every
	// 500 ms.
	pollInterval = 500 * time.Millisecond
	// renewInterval bounds the wait of a pass with nothing to do but hold
	// its zone: the hold (disruption.ResizeHoldWindow) is renewed before it
	// lapses.
	renewInterval = 30 * time.Second
	// deniedInterval is how soon a hold or restart the budget refused is
	// asked again, each ask reading the group's pods live.
	deniedInterval = time.Second
	// rolloutWaitInterval is how soon a resize waiting for a rollout of
	// the group looks again.
	rolloutWaitInterval = 10 * time.Second
)

// Reconciler grows the volumes of RolloutGroups.
type Reconciler struct {
	client.Client
	// apiReader reads the group, its members and their claims live.
	apiReader client.Reader
	events    recorder.EventRecorder
	now       func() time.Time
}

// New makes the reconciler on mgr's clients.
func New(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{Client: mgr.GetClient(), apiReader: mgr.GetAPIReader(),
		events: source.Recorder(mgr.GetEventRecorder("echelon")), now: time.Now}
}

// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups/status,verbs=patch
// +kubebuilder:rbac:groups=echelon.dev,resources=zonedisruptionbudgets,verbs=get
// +kubebuilder:rbac:groups=echelon.dev,resources=zonedisruptionbudgets/status,verbs=patch
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=persistentvolumeclaims,verbs=list;patch
// +kubebuilder:rbac:groups=storage.k8s.io,resources=storageclasses,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile takes one group's resize one step on: observe (live), plan
// (pure), hold the zone through the budget, act, write status once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	rg := &v1alpha1.RolloutGroup{}
	if err := r.apiReader.Get(ctx, req.NamespacedName, rg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if len(rg.Spec.VolumeClaimSizes) == 0 && rg.Status.VolumeResize == nil {
		return ctrl.Result{}, nil
	}
	in, err := r.observe(ctx, rg)
	if err != nil {
		return ctrl.Result{}, err
	}
	plan := resize.Decide(in)
	next := plan.Status
	res, actErr := r.act(ctx, rg, plan, next)
	if err := r.writeStatus(ctx, rg, next); err != nil {
		return ctrl.Result{}, err
	}
	r.tell(rg, next)
	if actErr != nil {
		return ctrl.Result{}, actErr
	}
	return res, nil
}

// act carries the plan out; it may change next (a restart waiting for the
// budget says so).
func (r *Reconciler) act(ctx context.Context, rg *v1alpha1.RolloutGroup, plan resize.Plan, next *v1alpha1.VolumeResizeStatus) (ctrl.Result, error) {
	poll := ctrl.Result{RequeueAfter: pollInterval}
	switch plan.Action {
	case resize.ActNone:
		// The sizes were withdrawn: a hold left by a resize under way goes
		// at once rather than when it expires.
		if rg.Status.VolumeResize != nil {
			return ctrl.Result{}, budget.ReleaseResize(ctx, r.Client, r.apiReader, rg)
		}
		return ctrl.Result{}, nil
	case resize.ActBlock:
		// A blocked resize holds no zone.
		return ctrl.Result{RequeueAfter: renewInterval}, budget.ReleaseResize(ctx, r.Client, r.apiReader, rg)
	case resize.ActWait:
		return poll, nil
	case resize.ActComplete:
		return ctrl.Result{}, budget.ReleaseResize(ctx, r.Client, r.apiReader, rg)
	case resize.ActHold:
		v, err := budget.AcquireResize(ctx, r.Client, r.apiReader, rg, disruption.Request{Zone: plan.Zone}, r.now)
		if err != nil {
			return poll, err
		}
		countDecision(v)
		if !v.Allowed {
			next.Message = fmt.Sprintf("%s: waiting: %s", plan.Zone, v.Message)
			return ctrl.Result{RequeueAfter: retryAfter(v)}, nil
		}
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	case resize.ActPatch:
		for _, c := range plan.Claims {
			body, _ := json.Marshal(map[string]any{"spec": map[string]any{"resources": map[string]any{"requests": map[string]any{"storage": c.Size.String()}}}})
			pvc := &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: rg.Namespace, Name: c.Name}}
			if err := r.Patch(ctx, pvc, client.RawPatch(types.MergePatchType, body)); err != nil {
				return poll, fmt.Errorf("patch PersistentVolumeClaim %s to %s: %w", c.Name, c.Size.String(), err)
			}
			metrics.ResizeActions.WithLabelValues(rg.Namespace, rg.Name, plan.Zone, metrics.ResizeClaimPatched).Inc()
		}
		r.events.Eventf(rg, nil, corev1.EventTypeNormal, v1alpha1.ReasonClaimsPatched, "PatchClaims",
			"%s: %d claims asked for the new size", plan.Zone, len(plan.Claims))
		return poll, nil
	case resize.ActRestart:
		return r.restart(ctx, rg, plan, next)
	case resize.ActRecord:
		next.Recreate = plan.Recreate
		// Written at once, before the delete: whoever takes over after the
		// delete creates the StatefulSet from it.
		if err := r.writeStatus(ctx, rg, next); err != nil {
			return poll, err
		}
		rg.Status.VolumeResize = next.DeepCopy()
		return r.deleteOrphaning(ctx, rg, plan)
	case resize.ActDelete:
		return r.deleteOrphaning(ctx, rg, plan)
	case resize.ActCreate:
		return r.create(ctx, rg, plan, next)
	}
	return poll, nil
}

// restart deletes the pods whose filesystems grow offline, once the budget
// recorded them.
func (r *Reconciler) restart(ctx context.Context, rg *v1alpha1.RolloutGroup, plan resize.Plan, next *v1alpha1.VolumeResizeStatus) (ctrl.Result, error) {
	v, err := budget.AcquireResize(ctx, r.Client, r.apiReader, rg, disruption.Request{Zone: plan.Zone, Pods: plan.Pods}, r.now)
	if err != nil {
		return ctrl.Result{RequeueAfter: pollInterval}, err
	}
	countDecision(v)
	if !v.Allowed {
		next.Message = fmt.Sprintf("%s: restarts waiting: %s", plan.Zone, v.Message)
		return ctrl.Result{RequeueAfter: retryAfter(v)}, nil
	}
	fenced, cancel := budget.Fence(ctx, v)
	defer cancel()
	for _, p := range v.Intent.Pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: rg.Namespace, Name: p.Name}}
		err := r.Delete(fenced, pod, client.Preconditions{UID: &p.UID})
		switch {
		case err == nil:
			metrics.ResizeActions.WithLabelValues(rg.Namespace, rg.Name, plan.Zone, metrics.ResizePodRestarted).Inc()
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		default:
			return ctrl.Result{RequeueAfter: pollInterval}, fmt.Errorf("delete pod %s so that its filesystem grows: %w", p.Name, err)
		}
	}
	r.events.Eventf(rg, nil, corev1.EventTypeNormal, v1alpha1.ReasonResizeRestart, "RestartPods",
		"%s: restarted %d pods whose filesystems grow offline", plan.Zone, len(v.Intent.Pods))
	return ctrl.Result{RequeueAfter: pollInterval}, nil
}

// deleteOrphaning deletes the recorded StatefulSet, leaving its pods and
// their claims to be adopted by the one created in its place.
func (r *Reconciler) deleteOrphaning(ctx context.Context, rg *v1alpha1.RolloutGroup, plan resize.Plan) (ctrl.Result, error) {
	uid := types.UID(plan.Recreate.UID)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: rg.Namespace, Name: plan.Recreate.Name}}
	err := r.Delete(ctx, sts, client.PropagationPolicy(metav1.DeletePropagationOrphan), client.Preconditions{UID: &uid})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return ctrl.Result{RequeueAfter: pollInterval}, fmt.Errorf("delete StatefulSet %s, orphaning its pods: %w", plan.Recreate.Name, err)
	}
	// The garbage collector orphans the pods, then removes it; the next
	// pass creates it again.
	return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
}

// create creates the recorded StatefulSet again; its controller adopts the
// orphaned pods, whose template is unchanged, without restarting them.
func (r *Reconciler) create(ctx context.Context, rg *v1alpha1.RolloutGroup, plan resize.Plan, next *v1alpha1.VolumeResizeStatus) (ctrl.Result, error) {
	obj := plan.RecreateObject.DeepCopy()
	if err := r.Create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return ctrl.Result{RequeueAfter: pollInterval}, fmt.Errorf("create StatefulSet %s again: %w", obj.Name, err)
	}
	metrics.ResizeActions.WithLabelValues(rg.Namespace, rg.Name, plan.Zone, metrics.ResizeStatefulSetReplaced).Inc()
	r.events.Eventf(rg, obj, corev1.EventTypeNormal, v1alpha1.ReasonStatefulSetReplaced, "ReplaceStatefulSet",
		"%s: StatefulSet replaced with the new volume sizes; its pods are adopted again", plan.Zone)
	return ctrl.Result{RequeueAfter: 200 * time.Millisecond}, nil
}

// writeStatus writes next over what the group holds, as a merge patch of
// status.volumeResize alone.
func (r *Reconciler) writeStatus(ctx context.Context, rg *v1alpha1.RolloutGroup, next *v1alpha1.VolumeResizeStatus) error {
	err := patch.Status(ctx, r.Client, rg, rg.Status.VolumeResize, next,
		func(o *v1alpha1.RolloutGroup, s *v1alpha1.VolumeResizeStatus) { o.Status.VolumeResize = s })
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}

// tell sends the Events and sets the metrics of a pass whose phase or zone
// changed.
func (r *Reconciler) tell(rg *v1alpha1.RolloutGroup, next *v1alpha1.VolumeResizeStatus) {
	if next == nil {
		metrics.SetResizePhase(rg.Namespace, rg.Name, "")
		return
	}
	metrics.SetResizePhase(rg.Namespace, rg.Name, string(next.Phase))
	for _, z := range next.Zones {
		counts := map[v1alpha1.ClaimPhase]int{}
		for _, c := range z.Claims {
			counts[c.Phase]++
		}
		for _, p := range []v1alpha1.ClaimPhase{v1alpha1.ClaimPending, v1alpha1.ClaimExpanding, v1alpha1.ClaimFileSystemResizePending, v1alpha1.ClaimResized} {
			metrics.ResizeClaims.WithLabelValues(rg.Namespace, rg.Name, z.Name, string(p)).Set(float64(counts[p]))
		}
	}
	for _, e := range events(rg.Status.VolumeResize, next) {
		r.events.Eventf(rg, nil, e.kind, e.reason, "VolumeResize", "%s", e.message)
	}
}

func countDecision(v disruption.Verdict) {
	if v.Allowed {
		metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterResize, "allowed", "").Inc()
		return
	}
	metrics.DisruptionDecisions.WithLabelValues(metrics.RequesterResize, "denied", v.Code).Inc()
}

// retryAfter is when a refused hold or restart is asked again: when time
// alone may change the answer; after a rollout's pass when a rollout is
// open (they take minutes); soon otherwise (a zone becoming whole again,
// such as the last zone's pods being adopted by its new StatefulSet).
func retryAfter(v disruption.Verdict) time.Duration {
	switch {
	case v.RetryAfter > 0 && v.RetryAfter < renewInterval:
		return v.RetryAfter
	case v.Code == disruption.CodeRolloutInProgress:
		return rolloutWaitInterval
	}
	return deniedInterval
}
