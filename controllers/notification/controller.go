// Package notification tells the receivers of a RolloutGroup's
// spec.notifications about its rollouts, and calls its spec.callback once a
// rollout ends. It runs beside the RolloutGroup controller, never in its
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

// Reconciler sends the notifications and callbacks of RolloutGroups.
type Reconciler struct {
	client.Client
	// apiReader reads the group live before sending: the cache may not show
	// the delivery this process recorded a moment ago, and sending from it
	// would repeat the message.
	apiReader client.Reader
	events    recorder.EventRecorder
	sender    *sender
	now       func() time.Time
}

// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconcile derives the group's new events, records them, then sends what
// is due to each receiver and the callback, recording each outcome.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cached := &v1alpha1.RolloutGroup{}
	if err := r.Get(ctx, req.NamespacedName, cached); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !wantsNotifications(cached) && cached.Status.Notifications == nil {
		return ctrl.Result{}, nil
	}
	rg := &v1alpha1.RolloutGroup{}
	if err := r.apiReader.Get(ctx, req.NamespacedName, rg); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	p := &pass{r: r, rg: rg, now: r.now()}
	if rg.Status.Notifications != nil {
		p.written = rg.Status.Notifications.DeepCopy()
	}
	if !wantsNotifications(rg) {
		return ctrl.Result{}, p.write(ctx, nil)
	}
	ns := v1alpha1.NotificationStatus{}
	if p.written != nil {
		ns = *p.written.DeepCopy()
	}
	notify.SyncReceivers(&ns, rg.Spec.Notifications)
	ns = notify.Derive(ns, rg.Status, string(rg.UID), len(rg.Spec.Notifications) > 0, p.now)
	if rg.Spec.Callback == nil {
		ns.Callback = nil
	}
	notify.Prune(&ns)
	// Recorded before anything is sent: a restart then sends them, and
	// derives nothing twice.
	if err := p.write(ctx, &ns); err != nil {
		return ctrl.Result{}, err
	}
	backlog := false
	for i := range rg.Spec.Notifications {
		more, err := p.deliver(ctx, &ns, i)
		if err != nil {
			return ctrl.Result{}, err
		}
		backlog = backlog || more
	}
	if err := p.callback(ctx, &ns); err != nil {
		return ctrl.Result{}, err
	}
	notify.Prune(&ns)
	if err := p.write(ctx, &ns); err != nil {
		return ctrl.Result{}, err
	}
	after := nextAttempt(ns, r.now())
	if backlog {
		after = backlogRequeue
	}
	return ctrl.Result{RequeueAfter: after}, nil
}

func wantsNotifications(rg *v1alpha1.RolloutGroup) bool {
	return len(rg.Spec.Notifications) > 0 || rg.Spec.Callback != nil
}

// pass carries one group through one reconcile.
type pass struct {
	r   *Reconciler
	rg  *v1alpha1.RolloutGroup
	now time.Time
	// written is status.notifications as the API server holds it.
	written *v1alpha1.NotificationStatus
}

// deliver sends the receiver i what is due, message by message, recording
// each outcome, until it has had every event, one fails, or the pass's
// bound is reached; more says a message is due still.
func (p *pass) deliver(ctx context.Context, ns *v1alpha1.NotificationStatus, i int) (more bool, _ error) {
	spec := p.rg.Spec.Notifications[i]
	rs := &ns.Receivers[i]
	if !notify.Due(rs.NextAttemptTime, p.now) {
		return false, nil
	}
	field := fmt.Sprintf("spec.notifications[%s]", spec.Name)
	var t *target
	for range maxMessagesPerPass {
		next, m, ok := notify.Next(*rs, spec, string(p.rg.UID), ns.Events)
		*rs = next
		if !ok {
			return false, nil
		}
		var reason, why string
		if t == nil {
			var err error
			if t, reason, err = p.r.sender.resolve(ctx, p.rg.Namespace, field, spec.SecretRef.Name, timeoutOf(spec.Timeout)); err != nil {
				why = err.Error()
			}
		}
		if why == "" {
			body, err := notify.Body(spec.Format, p.group(), m)
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
				_, _, more = notify.Next(*rs, spec, string(p.rg.UID), ns.Events)
			}
			return more, p.write(ctx, ns)
		}
		*rs = notify.Delivered(*rs, m)
		metrics.Notifications.WithLabelValues(p.rg.Namespace, p.rg.Name, spec.Name, event, metrics.NotificationDelivered).Inc()
		p.r.events.Eventf(p.rg, nil, corev1.EventTypeNormal, "NotificationSent", eventAction(spec.Name),
			"receiver %s: %s of rollout %s (page %d of %d, delivery %s)", spec.Name, event, rolloutName(m.Event.RolloutID, m.Event.Rollout), m.Page, m.Pages, m.DeliveryID)
		if err := p.write(ctx, ns); err != nil {
			return false, err
		}
	}
	_, _, more = notify.Next(*rs, spec, string(p.rg.UID), ns.Events)
	return more, nil
}

// callback makes the pending completion callback, once it is due.
func (p *pass) callback(ctx context.Context, ns *v1alpha1.NotificationStatus) error {
	c := ns.Callback
	spec := p.rg.Spec.Callback
	if c == nil || c.Delivered || spec == nil || !notify.Due(c.NextAttemptTime, p.now) {
		return nil
	}
	const field = "spec.callback"
	t, reason, err := p.r.sender.resolve(ctx, p.rg.Namespace, field, spec.SecretRef.Name, timeoutOf(spec.Timeout))
	why := ""
	if err != nil {
		why = err.Error()
	} else {
		body, err := notify.CallbackBody(p.group(), *c)
		if err != nil {
			return fmt.Errorf("%s: build the body: %w", field, err)
		}
		if err := p.send(ctx, t, metrics.ReceiverCallback, body, map[string]string{notify.HeaderDeliveryID: c.DeliveryID, notify.HeaderEvent: string(c.Outcome)}); err != nil {
			reason, why = v1alpha1.ReasonDeliveryFailing, fmt.Sprintf("%s: %v", field, err)
		}
	}
	if why != "" {
		var dropped bool
		*ns.Callback, dropped = notify.CallbackFailed(*c, reason, why, p.now)
		p.failed(metrics.ReceiverCallback, string(c.Outcome), c.DeliveryID, why, dropped)
		return p.write(ctx, ns)
	}
	c.Delivered, c.Attempts, c.NextAttemptTime, c.LastError, c.Reason = true, 0, nil, "", ""
	metrics.Notifications.WithLabelValues(p.rg.Namespace, p.rg.Name, metrics.ReceiverCallback, string(c.Outcome), metrics.NotificationDelivered).Inc()
	p.r.events.Eventf(p.rg, nil, corev1.EventTypeNormal, "CallbackSent", eventAction(metrics.ReceiverCallback),
		"callback: rollout %s ended %s (delivery %s)", rolloutName(c.RolloutID, c.Rollout), c.Outcome, c.DeliveryID)
	return p.write(ctx, ns)
}

// send posts body to t and times the answer.
func (p *pass) send(ctx context.Context, t *target, receiver string, body []byte, headers map[string]string) error {
	start := time.Now()
	err := p.r.sender.post(ctx, t, body, headers)
	metrics.NotificationDuration.WithLabelValues(p.rg.Namespace, p.rg.Name, receiver).Observe(time.Since(start).Seconds())
	return err
}

// failed counts and reports a failed attempt.
func (p *pass) failed(receiver, event, deliveryID, why string, dropped bool) {
	metrics.Notifications.WithLabelValues(p.rg.Namespace, p.rg.Name, receiver, event, metrics.NotificationFailed).Inc()
	if dropped {
		metrics.Notifications.WithLabelValues(p.rg.Namespace, p.rg.Name, receiver, event, metrics.NotificationDropped).Inc()
		p.r.events.Eventf(p.rg, nil, corev1.EventTypeWarning, "NotificationDropped", eventAction(receiver),
			"%s given up after %d attempts (delivery %s): %s", event, notify.MaxAttempts, deliveryID, why)
		return
	}
	p.r.events.Eventf(p.rg, nil, corev1.EventTypeWarning, "NotificationFailed", eventAction(receiver),
		"%s not delivered, retried with backoff (delivery %s): %s", event, deliveryID, why)
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

// write records ns (with its condition) as status.notifications when it
// differs from what the API server holds: a merge patch of that field alone,
// which only this controller writes.
func (p *pass) write(ctx context.Context, ns *v1alpha1.NotificationStatus) error {
	if ns != nil {
		meta.SetStatusCondition(&ns.Conditions, withGeneration(notify.Condition(*ns), p.rg.Generation))
	}
	if equalStatus(p.written, ns) {
		return nil
	}
	base := p.rg.DeepCopy()
	base.Status.Notifications = p.written
	patched := p.rg.DeepCopy()
	patched.Status.Notifications = ns.DeepCopy()
	if err := p.r.Status().Patch(ctx, patched, client.MergeFrom(base)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("RolloutGroup %s: record status.notifications: %w", p.rg.Name, err)
	}
	p.written = ns.DeepCopy()
	return nil
}

func (p *pass) group() notify.Group {
	return notify.Group{Namespace: p.rg.Namespace, Name: p.rg.Name, UID: string(p.rg.UID)}
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
	if c := ns.Callback; c != nil && !c.Delivered {
		consider(c.NextAttemptTime)
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

// New returns the reconciler.
func New(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{
		Client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		events:    mgr.GetEventRecorder("echelon"),
		sender:    newSender(mgr.GetAPIReader()),
		now:       time.Now,
	}
}
