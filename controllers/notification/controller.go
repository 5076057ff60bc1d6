// Package notification tells the receivers of spec.notifications about
// what RolloutGroups, ScalingPolicies and DelayedDownscales do, and calls a
// RolloutGroup's spec.callback once a rollout ends. One reconciler, generic
// over the kind (kinds.go), runs beside each kind's controller, never in its
// path: it reads the status that controller writes, derives the events
// (internal/notify), records them in status.notifications before sending,
// sends with a timeout, and records each delivery, so that a restart neither
// loses nor repeats a notification (at least once; receivers drop a delivery
// id they have seen). A receiver that fails or hangs delays only its own
// notifications.
package notification

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/recorder"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/notify"
)

const (
	controllerName = "notification"
	// maxConcurrentReconciles lets one group's slow receiver not hold
	// another group's notifications.
	maxConcurrentReconciles = 2
	// maxMessagesPerPass bounds the messages one pass sends to one receiver,
	// so that a long backlog is sent over several passes, each writing its
	// progress.
	maxMessagesPerPass = 20
	// backlogRequeue is how soon a pass that stopped at maxMessagesPerPass
	// goes on with the rest.
	backlogRequeue = 100 * time.Millisecond
	// defaultTimeout bounds a request when the spec sets none.
	defaultTimeout = 10 * time.Second
)

// Reconciler sends the notifications (and callbacks) of one kind of
// object, T.
type Reconciler[T client.Object] struct {
	client.Client
	// apiReader reads the object live before sending: the cache may not
	// show the delivery this process recorded a moment ago, and sending from
	// it would repeat the message.
	apiReader client.Reader
	events    recorder.EventRecorder
	sender    *sender
	now       func() time.Time
	kind      Kind[T]
}

// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups;scalingpolicies;delayeddownscales,verbs=get;list;watch
// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups/status;scalingpolicies/status;delayeddownscales/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile derives the object's new events, records them, then sends what
// is due to each receiver and callback, recording each outcome.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	k := r.kind
	cached := k.New()
	if err := r.Get(ctx, req.NamespacedName, cached); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !k.wants(cached) && k.Status(cached) == nil {
		return ctrl.Result{}, nil
	}
	obj := k.New()
	if err := r.apiReader.Get(ctx, req.NamespacedName, obj); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	p := &pass[T]{r: r, obj: obj, now: r.now()}
	if st := k.Status(obj); st != nil {
		p.written = st.DeepCopy()
	}
	if !k.wants(obj) {
		return ctrl.Result{}, p.write(ctx, nil)
	}
	ns := v1alpha1.NotificationStatus{}
	if p.written != nil {
		ns = *p.written.DeepCopy()
	}
	receivers := k.Receivers(obj)
	notify.SyncReceivers(&ns, receivers)
	dropped := ns.CallbacksDropped
	ns = k.Derive(ns, obj, len(receivers) > 0, p.now)
	if k.callback(obj) == nil {
		ns.Callbacks = nil
	}
	notify.Prune(&ns)
	// Recorded before anything is sent: a restart then sends them, and
	// derives nothing twice.
	if err := p.write(ctx, &ns); err != nil {
		return ctrl.Result{}, err
	}
	if n := ns.CallbacksDropped - dropped; n > 0 {
		metrics.Notifications.WithLabelValues(obj.GetNamespace(), obj.GetName(), metrics.ReceiverCallback, "Queued", metrics.NotificationDropped).Add(float64(n))
		p.r.events.Eventf(obj, nil, corev1.EventTypeWarning, "CallbackDropped", eventAction(metrics.ReceiverCallback),
			"status.notifications.callbacks: %d callbacks dropped before delivery, the oldest first: more than %d rollouts ended while the callback was failing (%d dropped so far)", n, notify.MaxCallbacks, ns.CallbacksDropped)
	}
	backlog := false
	for i := range receivers {
		more, err := p.deliver(ctx, &ns, receivers[i], i)
		if err != nil {
			return ctrl.Result{}, err
		}
		backlog = backlog || more
	}
	if err := p.callbacks(ctx, &ns); err != nil {
		return ctrl.Result{}, err
	}
	notify.Prune(&ns)
	notify.PruneCallbacks(&ns)
	if err := p.write(ctx, &ns); err != nil {
		return ctrl.Result{}, err
	}
	after := nextAttempt(ns, r.now())
	if backlog {
		after = backlogRequeue
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

// pass carries one object through one reconcile.
type pass[T client.Object] struct {
	r   *Reconciler[T]
	obj T
	now time.Time
	// written is status.notifications as the API server holds it.
	written *v1alpha1.NotificationStatus
}

// deliver sends the receiver i what is due, message by message, recording
// each outcome, until it has had every event, one fails, or the pass's
// bound is reached; more says a message is due still.
func (p *pass[T]) deliver(ctx context.Context, ns *v1alpha1.NotificationStatus, spec v1alpha1.NotificationReceiver, i int) (more bool, _ error) {
	rs := &ns.Receivers[i]
	uid := string(p.obj.GetUID())
	if !notify.Due(rs.NextAttemptTime, p.now) {
		return false, nil
	}
	field := fmt.Sprintf("spec.notifications[%s]", spec.Name)
	var t *target
	for range maxMessagesPerPass {
		next, m, ok := notify.Next(*rs, spec, uid, ns.Events)
		*rs = next
		if !ok {
			return false, nil
		}
		var reason, why string
		if t == nil {
			var err error
			if t, reason, err = p.r.sender.resolve(ctx, p.obj.GetNamespace(), field, spec.SecretRef.Name, timeoutOf(spec.Timeout)); err != nil {
				why = err.Error()
			}
		}
		if why == "" {
			body, err := notify.Body(spec.Format, p.object(), m)
			if err != nil {
				return false, fmt.Errorf("%s: build the body: %w", field, err)
			}
			headers := map[string]string{
				notify.HeaderDeliveryID: m.DeliveryID, notify.HeaderMessageKey: m.MessageKey, notify.HeaderEvent: string(m.Event.Type),
			}
			if err := p.send(ctx, t, spec.Name, body, headers); err != nil {
				reason, why = v1alpha1.ReasonDeliveryFailing, fmt.Sprintf("%s: %v", field, err)
			}
		}
		event := string(m.Event.Type)
		if why != "" {
			var dropped bool
			*rs, dropped = notify.Failed(*rs, m, reason, why, p.now)
			p.failed(spec.Name, event, m.DeliveryID, why, dropped)
			if dropped {
				// Given up: the next message is due now.
				_, _, more = notify.Next(*rs, spec, uid, ns.Events)
			}
			return more, p.write(ctx, ns)
		}
		*rs = notify.Delivered(*rs, m)
		metrics.Notifications.WithLabelValues(p.obj.GetNamespace(), p.obj.GetName(), spec.Name, event, metrics.NotificationDelivered).Inc()
		recordSent(p.r.events, p.obj, spec.Name, m)
		if err := p.write(ctx, ns); err != nil {
			return false, err
		}
	}
	_, _, more = notify.Next(*rs, spec, uid, ns.Events)
	return more, nil
}

// callbacks makes the pending completion callbacks, oldest first, while
// they are due and accepted: a later rollout's callback waits for an
// earlier one being retried.
func (p *pass[T]) callbacks(ctx context.Context, ns *v1alpha1.NotificationStatus) error {
	spec := p.r.kind.callback(p.obj)
	if spec == nil {
		return nil
	}
	const field = "spec.callback"
	var t *target
	for {
		i := notify.PendingCallback(*ns)
		if i < 0 || !notify.Due(ns.Callbacks[i].NextAttemptTime, p.now) {
			return nil
		}
		c := &ns.Callbacks[i]
		why, reason := "", ""
		if t == nil {
			var err error
			if t, reason, err = p.r.sender.resolve(ctx, p.obj.GetNamespace(), field, spec.SecretRef.Name, timeoutOf(spec.Timeout)); err != nil {
				why = err.Error()
			}
		}
		if why == "" {
			body, err := notify.CallbackBody(p.object().Group(), *c)
			if err != nil {
				return fmt.Errorf("%s: build the body: %w", field, err)
			}
			if err := p.send(ctx, t, metrics.ReceiverCallback, body, map[string]string{notify.HeaderDeliveryID: c.DeliveryID, notify.HeaderEvent: string(c.Outcome)}); err != nil {
				reason, why = v1alpha1.ReasonDeliveryFailing, fmt.Sprintf("%s: %v", field, err)
			}
		}
		if why != "" {
			var dropped bool
			*c, dropped = notify.CallbackFailed(*c, reason, why, p.now)
			p.failed(metrics.ReceiverCallback, string(c.Outcome), c.DeliveryID, why, dropped)
			if err := p.write(ctx, ns); err != nil || !dropped {
				return err
			}
			continue // given up: the next one is due now
		}
		*c = notify.CallbackDelivered(*c)
		metrics.Notifications.WithLabelValues(p.obj.GetNamespace(), p.obj.GetName(), metrics.ReceiverCallback, string(c.Outcome), metrics.NotificationDelivered).Inc()
		p.r.events.Eventf(p.obj, nil, corev1.EventTypeNormal, "CallbackSent", deliveryAction(metrics.ReceiverCallback, c.DeliveryID),
			"callback: rollout %s ended %s (delivery %s)", rolloutName(c.RolloutID, c.Rollout), c.Outcome, c.DeliveryID)
		if err := p.write(ctx, ns); err != nil {
			return err
		}
	}
}

// send posts body to t and times the answer.
func (p *pass[T]) send(ctx context.Context, t *target, receiver string, body []byte, headers map[string]string) error {
	start := time.Now()
	err := p.r.sender.post(ctx, t, body, headers)
	metrics.NotificationDuration.WithLabelValues(p.obj.GetNamespace(), p.obj.GetName(), receiver).Observe(time.Since(start).Seconds())
	return err
}

// failed counts and reports a failed attempt.
func (p *pass[T]) failed(receiver, event, deliveryID, why string, dropped bool) {
	metrics.Notifications.WithLabelValues(p.obj.GetNamespace(), p.obj.GetName(), receiver, event, metrics.NotificationFailed).Inc()
	if dropped {
		metrics.Notifications.WithLabelValues(p.obj.GetNamespace(), p.obj.GetName(), receiver, event, metrics.NotificationDropped).Inc()
		p.r.events.Eventf(p.obj, nil, corev1.EventTypeWarning, "NotificationDropped", eventAction(receiver),
			"%s given up after %d attempts (delivery %s): %s", event, notify.MaxAttempts, deliveryID, why)
		return
	}
	p.r.events.Eventf(p.obj, nil, corev1.EventTypeWarning, "NotificationFailed", eventAction(receiver),
		"%s not delivered, retried with backoff (delivery %s): %s", event, deliveryID, why)
}

// eventSink records Events; the manager's recorder is one, and so is
// client-go's.
type eventSink interface {
	Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any)
}

// recordSent records the NotificationSent Event of a delivery.
func recordSent(events eventSink, obj runtime.Object, receiver string, m notify.Message) {
	events.Eventf(obj, nil, corev1.EventTypeNormal, "NotificationSent", deliveryAction(receiver, m.DeliveryID),
		"receiver %s: %s%s (page %d of %d, delivery %s)", receiver, m.Event.Type, ofRollout(m.Event.RolloutID, m.Event.Rollout), m.Page, m.Pages, m.DeliveryID)
}

// eventAction is the action of a receiver's Events. The Events API folds
// Events of one object, reason and action into one series that keeps the
// first message: one action a receiver keeps one receiver's failure from
// hiding another's.
func eventAction(receiver string) string {
	if receiver == metrics.ReceiverCallback {
		return "Callback"
	}
	return "Notify/" + receiver
}

// deliveryAction is the action of the Event of one delivery: the
// receiver's action and the delivery id. Client-go's recorder folds Events
// alike but for their message (object, reason, action) into one series that
// keeps the first message, however far apart within minutes, so two
// deliveries a second apart would show as one Event; the id keeps each its
// own. At most 7+63+1+32 characters, within the action's 128.
func deliveryAction(receiver, deliveryID string) string {
	return eventAction(receiver) + "/" + deliveryID
}

// write records ns (with its condition) as status.notifications when it
// differs from what the API server holds: a merge patch of that field alone,
// which only this controller writes.
func (p *pass[T]) write(ctx context.Context, ns *v1alpha1.NotificationStatus) error {
	if ns != nil {
		meta.SetStatusCondition(&ns.Conditions, withGeneration(notify.Condition(*ns), p.obj.GetGeneration()))
	}
	if equalStatus(p.written, ns) {
		return nil
	}
	base := p.obj.DeepCopyObject().(T)
	p.r.kind.SetStatus(base, p.written)
	patched := p.obj.DeepCopyObject().(T)
	p.r.kind.SetStatus(patched, ns.DeepCopy())
	if err := p.r.Status().Patch(ctx, patched, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("%s %s: record status.notifications: %w", p.r.kind.Name, p.obj.GetName(), err)
	}
	p.written = ns.DeepCopy()
	return nil
}

func (p *pass[T]) object() notify.Object {
	return notify.Object{Kind: p.r.kind.Name, Namespace: p.obj.GetNamespace(), Name: p.obj.GetName(), UID: string(p.obj.GetUID())}
}

// nextAttempt is how long until the earliest retry, 0 for none.
func nextAttempt(ns v1alpha1.NotificationStatus, now time.Time) time.Duration {
	var after time.Duration
	consider := func(t *metav1.Time) {
		if t == nil {
			return
		}
		d := max(t.Sub(now), time.Millisecond)
		if after == 0 || d < after {
			after = d
		}
	}
	for _, r := range ns.Receivers {
		consider(r.NextAttemptTime)
	}
	if i := notify.PendingCallback(ns); i >= 0 {
		consider(ns.Callbacks[i].NextAttemptTime)
	}
	return after
}

func timeoutOf(d *metav1.Duration) time.Duration {
	if d == nil || d.Duration <= 0 {
		return defaultTimeout
	}
	return d.Duration
}

func rolloutName(id, key string) string {
	if id != "" {
		return id
	}
	return key
}

// ofRollout names the rollout an event belongs to, for an Event's message;
// nothing for the events of kinds without rollouts.
func ofRollout(id, key string) string {
	if id == "" && key == "" {
		return ""
	}
	return " of rollout " + rolloutName(id, key)
}
