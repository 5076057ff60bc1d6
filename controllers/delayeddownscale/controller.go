package delayeddownscale

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/patch"
	"github.com/echelon-operator/echelon/controllers/internal/source"
	"github.com/echelon-operator/echelon/internal/delayed"
	"github.com/echelon-operator/echelon/internal/egress"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podcall"
)

const (
	controllerName = "delayeddownscale"
	// defaultPodCallTimeout applies when spec.timeout is not set (the CRD
	// defaults it, so only objects stored before that default lack it).
	defaultPodCallTimeout = 5 * time.Second
)

// Reconciler asks the pods a downscale removes to prepare,
// and tells the target's ScalingPolicy how far it may shrink the StatefulSet.
type Reconciler struct {
	client.Client
	// tlsObjects reads the Secrets and ConfigMaps of
	// spec.prepareEndpoint.tls: the process's httptls.Objects, which watches
	// each one read (the manager's cache holds none).
	tlsObjects client.Reader
	events     recorder.EventRecorder
	pods       *podcall.Client
	config     podcall.Addressing
	now        func() time.Time
}

// +kubebuilder:rbac:groups=echelon.dev,resources=delayeddownscales,verbs=list;watch
// +kubebuilder:rbac:groups=echelon.dev,resources=delayeddownscales/status,verbs=patch
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch

// Reconcile observes the target and its ScalingPolicy, calls the pods the plan
// names (only when something changed or a pod became eligible), and writes
// status once: the pods' answers and how far the StatefulSet may shrink.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	dd := &v1alpha1.DelayedDownscale{}
	if err := r.Get(ctx, req.NamespacedName, dd); err != nil {
		if apierrors.IsNotFound(err) {
			metrics.ForgetDelayed(req.Namespace, req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get DelayedDownscale: %w", err)
	}
	obs, err := r.observe(ctx, dd)
	if err != nil {
		return ctrl.Result{}, err
	}
	var plan delayed.Plan
	if obs.problem == "" {
		if plan, err = r.callAndDecide(ctx, dd, obs); err != nil {
			return ctrl.Result{}, err
		}
	}
	st := computeStatus(dd, obs, plan)
	r.recordTransition(dd, st, plan)
	metrics.SetDelayed(dd.Namespace, dd.Name, st.Phase, st.PreparedCount, st.EarliestDownscaleTime, obs.in.Now)
	if err := patch.Status(ctx, r, dd, dd.Status, st, func(o *v1alpha1.DelayedDownscale, s v1alpha1.DelayedDownscaleStatus) { o.Status = s }); err != nil {
		return ctrl.Result{}, fmt.Errorf("DelayedDownscale: %w", err)
	}
	// A missing target or ScalingPolicy needs no polling: their creation is
	// watched. Pods in error are retried on the plan's own clock.
	return ctrl.Result{RequeueAfter: plan.RequeueAfter}, nil
}

// callAndDecide makes the calls the planner asks for and decides from the
// answers. Before any POST, status names the pods about to be asked: a pod may
// prepare and the process die before its answer is written, and only what
// status names is cancelled after a restart. The pods about to be told to
// cancel stay named in it until they are.
func (r *Reconciler) callAndDecide(ctx context.Context, dd *v1alpha1.DelayedDownscale, obs observation) (delayed.Plan, error) {
	calls := delayed.Calls(obs.in)
	timeout := defaultPodCallTimeout
	if dd.Spec.Timeout != nil && dd.Spec.Timeout.Duration > 0 {
		timeout = dd.Spec.Timeout.Duration
	}
	if intent := delayed.Intent(obs.in, calls); intent != nil {
		before := delayed.Decide(obs.in, intent)
		before.Records = append(before.Records, delayed.Cancelling(obs.in, calls)...)
		before.Cancelling = obs.in.Cancelling
		st := computeStatus(dd, obs, before)
		if err := patch.Status(ctx, r, dd, dd.Status, st, func(o *v1alpha1.DelayedDownscale, s v1alpha1.DelayedDownscaleStatus) { o.Status = s }); err != nil {
			return delayed.Plan{}, fmt.Errorf("DelayedDownscale: record the pods about to be asked: %w", err)
		}
		dd.Status = st
	}
	var endpointTLS *httptls.Material
	var tlsErr error
	if len(calls.Prepare)+len(calls.Cancel) > 0 {
		// Read live on each pass that calls, so that a rotated CA is used.
		endpointTLS, tlsErr = httptls.Load(ctx, r.tlsObjects, dd.Namespace, dd.Spec.PrepareEndpoint.TLS, "spec.prepareEndpoint.tls")
	}
	answers := map[string]delayed.Record{}
	ctx = egress.WithField(ctx, "spec.prepareEndpoint")
	if len(calls.Prepare) > 0 {
		targets, results := obs.targets(calls.Prepare, endpointTLS, tlsErr)
		for pod, res := range r.pods.Prepare(ctx, targets, timeout) {
			results[pod] = res
		}
		for pod, res := range results {
			rec := delayed.Record{Name: pod, UID: obs.in.Pods[pod].UID, PreparedAt: res.PreparedAt}
			if res.Err != nil {
				rec.Err = res.Err.Error()
			}
			answers[pod] = rec
			metrics.CountPodCall(dd.Namespace, dd.Name, "POST", res.Err)
		}
	}
	failedCancels := map[string]string{}
	if len(calls.Cancel) > 0 {
		targets, results := obs.targets(calls.Cancel, endpointTLS, tlsErr)
		for pod, res := range r.pods.Cancel(ctx, targets, timeout) {
			results[pod] = res
		}
		var failed []error
		for pod, res := range results {
			metrics.CountPodCall(dd.Namespace, dd.Name, "DELETE", res.Err)
			if res.Err != nil {
				failed = append(failed, fmt.Errorf("%s: %w", pod, res.Err))
				failedCancels[pod] = res.Err.Error()
			}
		}
		if len(failed) > 0 {
			r.events.Eventf(dd, nil, corev1.EventTypeWarning, "CancelFailed", "Cancel",
				"cancelling the preparation failed on %d pods (they may stay prepared; told again with backoff, see status.cancellingPods): %v", len(failed), errors.Join(failed...))
		}
	}
	plan := delayed.Decide(obs.in, answers)
	plan.Cancelling = delayed.Retries(obs.in, calls, failedCancels)
	if d := delayed.RetryAfter(plan.Cancelling, obs.in.Now); d > 0 && (plan.RequeueAfter == 0 || d < plan.RequeueAfter) {
		plan.RequeueAfter = d
	}
	return plan, nil
}

// recordTransition emits an Event when the phase changes, and a Warning
// for pod errors when they start or change.
func (r *Reconciler) recordTransition(dd *v1alpha1.DelayedDownscale, st v1alpha1.DelayedDownscaleStatus, plan delayed.Plan) {
	if dd.Status.Phase == st.Phase && dd.Status.Message == st.Message {
		return
	}
	if st.Phase == v1alpha1.DelayedPhaseBlocked {
		if dd.Status.Phase != st.Phase || len(plan.Errors) > 0 {
			r.events.Eventf(dd, nil, corev1.EventTypeWarning, "DownscaleHeld", "Hold", "%s", st.Message)
		}
		return
	}
	// A new DelayedDownscale with nothing to do is not news.
	if dd.Status.Phase != st.Phase && !(dd.Status.Phase == "" && st.Phase == v1alpha1.DelayedPhaseIdle) {
		r.events.Eventf(dd, nil, corev1.EventTypeNormal, string(st.Phase), "Downscale", "%s", st.Message)
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
// manager's cache and calling pods as addressing says.
func New(mgr ctrl.Manager, addressing podcall.Addressing) *Reconciler {
	return &Reconciler{
		Client:     mgr.GetClient(),
		tlsObjects: mgr.GetAPIReader(),
		events:     source.Recorder(mgr.GetEventRecorder("echelon")),
		// The per-call timeout bounds each call; this one only bounds a call
		// whose context lost its deadline.
		pods:   &podcall.Client{HTTP: httptls.NewClient(5 * time.Minute)},
		config: addressing,
		now:    time.Now,
	}
}
