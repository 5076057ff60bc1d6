package webhooks

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	ctrlhandler "sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/delayed"
	"github.com/echelon-operator/echelon/internal/egress"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podcall"
)

// EventReasonPreparedDownscaleCancelled is the reason of the Warning Event on
// a StatefulSet whose downscale the prepare-downscale webhook admitted but
// the API server did not store: its prepared pods were told to cancel.
const EventReasonPreparedDownscaleCancelled = "PreparedDownscaleCancelled"

// settlement is what becomes of a pending downscale.
type settlement int

const (
	// settleWait: the StatefulSet does not show it yet, and the deadline has
	// not passed.
	settleWait settlement = iota
	// settleConfirm: the StatefulSet shows it (or less): the record stays
	// in lastDownscaleTime, the pending record goes.
	settleConfirm
	// settleCancel: the deadline passed without it: the pods are told to
	// cancel, lastDownscaleTime goes back.
	settleCancel
)

// settle decides a pending downscale from the StatefulSet's spec.replicas
// (nil when it is gone or unset).
func settle(now time.Time, p *v1alpha1.PendingDownscale, replicas *int32) settlement {
	switch {
	case replicas != nil && *replicas <= p.Replicas:
		return settleConfirm
	case now.Before(p.Deadline.Time):
		return settleWait
	default:
		return settleCancel
	}
}

// pendingDownscales settles the prepare-downscale webhook's provisional
// records (status.pendingDownscale): it confirms one once the StatefulSet
// shows the new size, and after the deadline without it tells the prepared
// pods to cancel and restores lastDownscaleTime, so that a downscale the API
// server refused after the webhook admitted it (a conflict, a later webhook)
// leaves neither prepared pods nor a zone delay behind. The record is in
// status, so a restarted operator, or a new leader, settles what the last
// one left.
type pendingDownscales struct {
	client client.Client
	// live reads the StatefulSet before a confirm or a cancel: the cache
	// may lag behind the downscale, or behind an upscale before it.
	live client.Reader
	// tlsObjects reads the Secrets and ConfigMaps of the prepare endpoint's
	// tls block (Config.TLSObjects).
	tlsObjects client.Reader
	pods       *podcall.Client
	events     events.EventRecorder
	now        func() time.Time
}

// setupPendingDownscales adds the controller (leader only: one replica
// settles each record).
func setupPendingDownscales(mgr ctrl.Manager, r *pendingDownscales) error {
	hasPending := predicate.NewPredicateFuncs(func(o client.Object) bool {
		sp, ok := o.(*v1alpha1.ScalingPolicy)
		return ok && (sp.Status.PendingDownscale != nil || len(sp.Status.PendingCancels) > 0)
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("prepared-downscale").
		For(&v1alpha1.ScalingPolicy{}, builder.WithPredicates(hasPending)).
		Watches(&appsv1.StatefulSet{}, ctrlhandler.EnqueueRequestsFromMapFunc(r.policiesWithPending),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			})).
		Complete(r)
}

// policiesWithPending maps a StatefulSet to its policies that wait for it.
func (r *pendingDownscales) policiesWithPending(ctx context.Context, o client.Object) []reconcile.Request {
	policies, err := lookup.PoliciesForTarget(ctx, r.client, o.GetNamespace(), v1alpha1.TargetKindStatefulSet, o.GetName())
	if err != nil {
		logr.FromContextOrDiscard(ctx).Error(err, "list the policies of a StatefulSet", "statefulSet", o.GetName())
		return nil
	}
	var out []reconcile.Request
	for _, p := range policies {
		if p.Status.PendingDownscale != nil {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: p.Namespace, Name: p.Name}})
		}
	}
	return out
}

func (r *pendingDownscales) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	sp := &v1alpha1.ScalingPolicy{}
	if err := r.client.Get(ctx, req.NamespacedName, sp); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	p := sp.Status.PendingDownscale
	if p == nil {
		return r.retryCancels(ctx, sp)
	}
	key := types.NamespacedName{Namespace: sp.Namespace, Name: sp.Spec.TargetRef.Name}
	sts, err := r.statefulSet(ctx, r.client, key)
	if err != nil {
		return ctrl.Result{}, err
	}
	now := r.now()
	decision := settle(now, p, replicasOf(sts))
	if decision != settleWait {
		// Settle on the API server's word: the cache may lag behind the
		// downscale (prepared pods told to cancel and then removed are what
		// the webhook prevents), or behind an upscale before it, and show
		// the new size when the downscale was not stored (its pods would
		// stay prepared, its zone delay in place).
		if sts, err = r.statefulSet(ctx, r.live, key); err != nil {
			return ctrl.Result{}, err
		}
		decision = settle(now, p, replicasOf(sts))
	}
	switch decision {
	case settleWait:
		return ctrl.Result{RequeueAfter: p.Deadline.Sub(now)}, nil
	case settleConfirm:
		if err := r.clear(ctx, sp, false, nil); err != nil {
			return ctrl.Result{}, err
		}
		metrics.WebhookPendingDownscales.WithLabelValues(metrics.PendingDownscaleConfirmed).Inc()
		return ctrl.Result{}, nil
	}
	note, failed := r.cancel(ctx, sp, p)
	if err := r.clear(ctx, sp, true, failed); err != nil {
		return ctrl.Result{}, err
	}
	metrics.WebhookPendingDownscales.WithLabelValues(metrics.PendingDownscaleCancelled).Inc()
	if sts != nil {
		r.events.Eventf(sts, sp, corev1.EventTypeWarning, EventReasonPreparedDownscaleCancelled, "Cancel",
			"downscale of StatefulSet %s to %d admitted at %s was not stored by %s%s; status.lastDownscaleTime of ScalingPolicy %s restored",
			sts.Name, p.Replicas, p.AdmittedAt.UTC().Format(time.RFC3339), p.Deadline.UTC().Format(time.RFC3339), note, sp.Name)
	}
	return ctrl.Result{RequeueAfter: cancelRetryAfter(failed, now)}, nil
}

// cancel sends DELETE to every prepared pod, and says so for the Event. The
// pods whose DELETE failed are returned, to be told again with backoff
// (status.pendingCancels) until they answer or are gone; the zone delay is
// not held on them.
func (r *pendingDownscales) cancel(ctx context.Context, sp *v1alpha1.ScalingPolicy, p *v1alpha1.PendingDownscale) (string, []v1alpha1.PendingCancel) {
	if len(p.Pods) == 0 {
		return "", nil
	}
	var note strings.Builder
	targets := make([]podcall.Target, 0, len(p.Pods))
	for _, pod := range p.Pods {
		targets = append(targets, podcall.Target{Pod: pod.Name, URL: pod.URL})
	}
	fmt.Fprintf(&note, "; told the prepared pods %s to cancel", podList(targets))
	results, tlsNote := r.sendCancels(ctx, sp, targets)
	note.WriteString(tlsNote)
	var failed []v1alpha1.PendingCancel
	for _, t := range targets {
		if err := results[t.Pod].Err; err != nil {
			fmt.Fprintf(&note, "; cancelling pod %s failed, told again with backoff: %v", t.Pod, err)
			failed = append(failed, failedCancel(v1alpha1.PendingCancel{Name: t.Pod, URL: t.URL}, err, r.now()))
		}
	}
	return note.String(), failed
}

// sendCancels sends DELETE to targets with the policy's prepare timeout and
// tls block; a tls block that cannot be read now is reported in the note,
// and the cancels still sent, with the webhook's own transport.
func (r *pendingDownscales) sendCancels(ctx context.Context, sp *v1alpha1.ScalingPolicy, targets []podcall.Target) (map[string]podcall.Result, string) {
	timeout := defaultPrepareTimeout
	var note string
	if d := sp.Spec.Downscale; d != nil && d.Prepare != nil {
		if d.Prepare.Timeout != nil && d.Prepare.Timeout.Duration > 0 {
			timeout = d.Prepare.Timeout.Duration
		}
		endpointTLS, err := httptls.Load(ctx, r.tlsObjects, sp.Namespace, d.Prepare.TLS, "spec.downscale.prepare.tls")
		if err != nil {
			note = fmt.Sprintf("; %v", err)
		}
		for i := range targets {
			targets[i].TLS = endpointTLS
		}
	}
	return r.pods.Cancel(egress.WithField(ctx, "spec.downscale.prepare"), targets, timeout), note
}

// failedCancel is c after one more failed DELETE at now: told again after
// the backoff of its attempts.
func failedCancel(c v1alpha1.PendingCancel, err error, now time.Time) v1alpha1.PendingCancel {
	c.Attempts++
	c.Error = err.Error()
	if len(c.Error) > maxCancelError {
		c.Error = c.Error[:maxCancelError-3] + "..."
	}
	next := metav1.NewTime(now.Add(delayed.CancelBackoff(c.Attempts)))
	c.NextAttemptTime = &next
	return c
}

// maxCancelError bounds status.pendingCancels[].error (its CRD limit).
const maxCancelError = 1024

// retryCancels tells the pods of status.pendingCancels that are due to
// cancel again: a pod that answers, or is gone, is dropped; one that fails
// again waits twice as long.
func (r *pendingDownscales) retryCancels(ctx context.Context, sp *v1alpha1.ScalingPolicy) (ctrl.Result, error) {
	now := r.now()
	var kept []v1alpha1.PendingCancel
	var due []podcall.Target
	for _, c := range sp.Status.PendingCancels {
		err := r.client.Get(ctx, types.NamespacedName{Namespace: sp.Namespace, Name: c.Name}, &corev1.Pod{})
		switch {
		case apierrors.IsNotFound(err):
			continue // gone: nothing left prepared
		case err != nil:
			return ctrl.Result{}, fmt.Errorf("get pod %s: %w", c.Name, err)
		case c.NextAttemptTime != nil && now.Before(c.NextAttemptTime.Time):
			kept = append(kept, c)
		default:
			due = append(due, podcall.Target{Pod: c.Name, URL: c.URL})
		}
	}
	if len(due) > 0 {
		results, _ := r.sendCancels(ctx, sp, due)
		for _, c := range sp.Status.PendingCancels {
			res, called := results[c.Name]
			if !called || res.Err == nil {
				continue
			}
			logr.FromContextOrDiscard(ctx).Info("cancel of a prepared pod failed again; told again with backoff", "pod", c.Name, "attempts", c.Attempts+1, "error", res.Err.Error())
			kept = append(kept, failedCancel(c, res.Err, now))
		}
	}
	slices.SortFunc(kept, func(a, b v1alpha1.PendingCancel) int { return strings.Compare(a.Name, b.Name) })
	if !equality.Semantic.DeepEqual(kept, sp.Status.PendingCancels) {
		patched := sp.DeepCopy()
		patched.Status.PendingCancels = kept
		if err := r.client.Status().Patch(ctx, patched, client.MergeFromWithOptions(sp, client.MergeFromWithOptimisticLock{}), client.FieldOwner(statusFieldManager)); err != nil {
			return ctrl.Result{}, fmt.Errorf("record ScalingPolicy %s status.pendingCancels: %w", sp.Name, err)
		}
	}
	return ctrl.Result{RequeueAfter: cancelRetryAfter(kept, now)}, nil
}

// cancelRetryAfter is how long until the first of cancels is due; 0 for none.
func cancelRetryAfter(cancels []v1alpha1.PendingCancel, now time.Time) time.Duration {
	var after time.Duration
	for _, c := range cancels {
		d := time.Millisecond
		if c.NextAttemptTime != nil {
			d = max(c.NextAttemptTime.Sub(now), time.Millisecond)
		}
		if after == 0 || d < after {
			after = d
		}
	}
	return after
}

// clear drops the pending record; cancelled, it also puts lastDownscaleTime
// back, unless another downscale was recorded since, and adds the pods whose
// cancel failed to status.pendingCancels. The patch carries the policy's
// resourceVersion: a record written meanwhile by another request is settled
// on the next pass, not overwritten.
func (r *pendingDownscales) clear(ctx context.Context, sp *v1alpha1.ScalingPolicy, cancelled bool, failed []v1alpha1.PendingCancel) error {
	patched := sp.DeepCopy()
	for _, c := range failed {
		patched.Status.PendingCancels = slices.DeleteFunc(patched.Status.PendingCancels, func(o v1alpha1.PendingCancel) bool { return o.Name == c.Name })
		patched.Status.PendingCancels = append(patched.Status.PendingCancels, c)
	}
	slices.SortFunc(patched.Status.PendingCancels, func(a, b v1alpha1.PendingCancel) int { return strings.Compare(a.Name, b.Name) })
	p := patched.Status.PendingDownscale
	patched.Status.PendingDownscale = nil
	if last := patched.Status.LastDownscaleTime; cancelled && last != nil && last.Equal(&p.AdmittedAt) {
		patched.Status.LastDownscaleTime = p.PreviousDownscaleTime
	}
	err := r.client.Status().Patch(ctx, patched, client.MergeFromWithOptions(sp, client.MergeFromWithOptimisticLock{}), client.FieldOwner(statusFieldManager))
	if err != nil {
		return fmt.Errorf("clear ScalingPolicy %s status.pendingDownscale: %w", sp.Name, err)
	}
	return nil
}

func (r *pendingDownscales) statefulSet(ctx context.Context, c client.Reader, key types.NamespacedName) (*appsv1.StatefulSet, error) {
	sts := &appsv1.StatefulSet{}
	if err := c.Get(ctx, key, sts); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("get StatefulSet %s: %w", key, err)
	}
	return sts, nil
}

func replicasOf(sts *appsv1.StatefulSet) *int32 {
	if sts == nil {
		return nil
	}
	return sts.Spec.Replicas
}
