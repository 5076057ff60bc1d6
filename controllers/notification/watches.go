package notification

import (
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/predicates"
)

// groupChanged passes RolloutGroup updates that change what the notifier
// reads: the spec (receivers, callback, rolloutId) and the status the
// events come from. Its own writes of status.notifications alone are not
// passed: retries come with RequeueAfter.
var groupChanged = predicates.UpdatedWhen(func(o, n *v1alpha1.RolloutGroup) bool {
	if o.Generation != n.Generation {
		return true
	}
	os, ns := o.Status, n.Status
	os.Notifications, ns.Notifications = nil, nil
	return !equality.Semantic.DeepEqual(os, ns)
})

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.RolloutGroup{}, builder.WithPredicates(groupChanged)).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles}).
		Named(controllerName).
		Complete(r)
}

func equalStatus(a, b *v1alpha1.NotificationStatus) bool {
	return equality.Semantic.DeepEqual(a, b)
}

func withGeneration(c metav1.Condition, gen int64) metav1.Condition {
	c.ObservedGeneration = gen
	return c
}
