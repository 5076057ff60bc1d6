package volumeresize

import (
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// maxConcurrentReconciles lets two groups' resizes progress at once.
const maxConcurrentReconciles = 2

// resizing keeps the groups that ask for sizes or have a resize recorded.
func resizing(o client.Object) bool {
	rg, ok := o.(*v1alpha1.RolloutGroup)
	return ok && (len(rg.Spec.VolumeClaimSizes) > 0 || rg.Status.VolumeResize != nil)
}

// SetupWithManager registers the reconciler: a group is looked at when it
// is created (or seen at start, so a new leader finishes a replacement its
// predecessor recorded) and when its spec changes; a resize under way then
// polls its claims (pollInterval) until it is done.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(controllerName).
		For(&v1alpha1.RolloutGroup{}, builder.WithPredicates(predicate.NewPredicateFuncs(resizing), predicate.GenerationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: maxConcurrentReconciles}).
		Complete(r)
}
