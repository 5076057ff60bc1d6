package zonedisruptionbudget

import (
	"context"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/predicates"
)

// requestsForNamespace maps an event of a RolloutGroup, a StatefulSet or a
// pod to every ZoneDisruptionBudget of its namespace: which zones a budget
// judges changes when groups claim or release StatefulSets, and when pods
// of a new StatefulSet appear. Budgets are few per namespace.
func (r *Reconciler) requestsForNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var list v1alpha1.ZoneDisruptionBudgetList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "map to ZoneDisruptionBudgets", "namespace", o.GetNamespace())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, zdb := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: zdb.Namespace, Name: zdb.Name}})
	}
	return reqs
}

// onlyCreateDelete passes creations and deletions: a StatefulSet or pod that
// appears or goes may add or remove a zone; its updates do not.
var onlyCreateDelete = predicates.NoGeneric(predicates.UpdatedWhen(func(_, _ client.Object) bool { return false }))

func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ZoneDisruptionBudget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&v1alpha1.RolloutGroup{}, handler.EnqueueRequestsFromMapFunc(r.requestsForNamespace), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&appsv1.StatefulSet{}, handler.EnqueueRequestsFromMapFunc(r.requestsForNamespace), builder.WithPredicates(onlyCreateDelete)).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(r.requestsForNamespace), builder.WithPredicates(onlyCreateDelete)).
		Named(controllerName).
		Complete(r)
}
