package notification

import (
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/predicates"
	"github.com/echelon-operator/echelon/internal/notify"
)

// Kind is what the notifier needs of one kind of object: its receivers
// and callback, its status.notifications, and how its events are derived
// from the rest of its status.
type Kind[T client.Object] struct {
	// Name is the kind, as bodies and errors name it.
	Name string
	New  func() T
	// Receivers is spec.notifications.
	Receivers func(T) []v1alpha1.NotificationReceiver
	// Callback is spec.callback; nil for kinds without one.
	Callback func(T) *v1alpha1.RolloutCallback
	// Status is status.notifications; SetStatus sets it.
	Status    func(T) *v1alpha1.NotificationStatus
	SetStatus func(T, *v1alpha1.NotificationStatus)
	// Derive appends the events since prev.Observed (pure: internal/notify).
	Derive func(prev v1alpha1.NotificationStatus, obj T, record bool, now time.Time) v1alpha1.NotificationStatus
	// Observed is the status the events come from: status without
	// status.notifications. A change of it (or of the spec) wakes the
	// notifier; its own writes do not.
	Observed func(T) any
}

func (k Kind[T]) callback(obj T) *v1alpha1.RolloutCallback {
	if k.Callback == nil {
		return nil
	}
	return k.Callback(obj)
}

func (k Kind[T]) wants(obj T) bool {
	return len(k.Receivers(obj)) > 0 || k.callback(obj) != nil
}

// RolloutGroups: events of rollouts and of volume resizes, and the
// completion callback.
var rolloutGroups = Kind[*v1alpha1.RolloutGroup]{
	Name:      notify.KindRolloutGroup,
	New:       func() *v1alpha1.RolloutGroup { return &v1alpha1.RolloutGroup{} },
	Receivers: func(rg *v1alpha1.RolloutGroup) []v1alpha1.NotificationReceiver { return rg.Spec.Notifications },
	Callback:  func(rg *v1alpha1.RolloutGroup) *v1alpha1.RolloutCallback { return rg.Spec.Callback },
	Status:    func(rg *v1alpha1.RolloutGroup) *v1alpha1.NotificationStatus { return rg.Status.Notifications },
	SetStatus: func(rg *v1alpha1.RolloutGroup, ns *v1alpha1.NotificationStatus) { rg.Status.Notifications = ns },
	Derive: func(prev v1alpha1.NotificationStatus, rg *v1alpha1.RolloutGroup, record bool, now time.Time) v1alpha1.NotificationStatus {
		next := notify.Derive(prev, rg.Status, string(rg.UID), record, now)
		return notify.DeriveResize(next, rg.Status.VolumeResize, rg.Status.Phase, record, now)
	},
	Observed: func(rg *v1alpha1.RolloutGroup) any {
		st := rg.Status
		st.Notifications = nil
		return st
	},
}

// ScalingPolicies: Scaled, ScaleHeld, ScaleFailed.
var scalingPolicies = Kind[*v1alpha1.ScalingPolicy]{
	Name:      notify.KindScalingPolicy,
	New:       func() *v1alpha1.ScalingPolicy { return &v1alpha1.ScalingPolicy{} },
	Receivers: func(sp *v1alpha1.ScalingPolicy) []v1alpha1.NotificationReceiver { return sp.Spec.Notifications },
	Status:    func(sp *v1alpha1.ScalingPolicy) *v1alpha1.NotificationStatus { return sp.Status.Notifications },
	SetStatus: func(sp *v1alpha1.ScalingPolicy, ns *v1alpha1.NotificationStatus) { sp.Status.Notifications = ns },
	Derive: func(prev v1alpha1.NotificationStatus, sp *v1alpha1.ScalingPolicy, record bool, now time.Time) v1alpha1.NotificationStatus {
		leader := ""
		if from := sp.Spec.ReplicasFrom; from != nil && from.Leader != nil {
			leader = from.Leader.Name
		}
		return notify.DeriveScaling(prev, sp.Status, sp.Spec.TargetRef.Name, leader, record, now)
	},
	Observed: func(sp *v1alpha1.ScalingPolicy) any {
		st := sp.Status
		st.Notifications = nil
		return st
	},
}

// DelayedDownscales: DownscaleRequested, DownscaleDelayed, DownscaleDone,
// DownscaleCancelled, DownscaleFailed.
var delayedDownscales = Kind[*v1alpha1.DelayedDownscale]{
	Name:      notify.KindDelayedDownscale,
	New:       func() *v1alpha1.DelayedDownscale { return &v1alpha1.DelayedDownscale{} },
	Receivers: func(dd *v1alpha1.DelayedDownscale) []v1alpha1.NotificationReceiver { return dd.Spec.Notifications },
	Status:    func(dd *v1alpha1.DelayedDownscale) *v1alpha1.NotificationStatus { return dd.Status.Notifications },
	SetStatus: func(dd *v1alpha1.DelayedDownscale, ns *v1alpha1.NotificationStatus) { dd.Status.Notifications = ns },
	Derive: func(prev v1alpha1.NotificationStatus, dd *v1alpha1.DelayedDownscale, record bool, now time.Time) v1alpha1.NotificationStatus {
		return notify.DeriveDelayed(prev, dd.Status, dd.Spec.TargetRef.Name, record, now)
	},
	Observed: func(dd *v1alpha1.DelayedDownscale) any {
		st := dd.Status
		st.Notifications = nil
		return st
	},
}

// newReconciler returns the notifier of kind k.
func newReconciler[T client.Object](mgr ctrl.Manager, k Kind[T]) *Reconciler[T] {
	return &Reconciler[T]{
		Client:    mgr.GetClient(),
		apiReader: mgr.GetAPIReader(),
		events:    mgr.GetEventRecorder("echelon"),
		sender:    newSender(mgr.GetAPIReader()),
		now:       time.Now,
		kind:      k,
	}
}

// setup registers the notifier of kind k under name.
func setup[T client.Object](mgr ctrl.Manager, name string, k Kind[T]) error {
	changed := predicates.UpdatedWhen(func(o, n T) bool {
		return o.GetGeneration() != n.GetGeneration() || !equality.Semantic.DeepEqual(k.Observed(o), k.Observed(n))
	})
	return ctrl.NewControllerManagedBy(mgr).
		For(k.New(), builder.WithPredicates(changed)).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles}).
		Named(name).
		Complete(newReconciler(mgr, k))
}

// Setup registers the notifiers of RolloutGroups, ScalingPolicies and
// DelayedDownscales.
func Setup(mgr ctrl.Manager) error {
	if err := setup(mgr, controllerName, rolloutGroups); err != nil {
		return err
	}
	if err := setup(mgr, controllerName+"-scalingpolicy", scalingPolicies); err != nil {
		return err
	}
	return setup(mgr, controllerName+"-delayeddownscale", delayedDownscales)
}
