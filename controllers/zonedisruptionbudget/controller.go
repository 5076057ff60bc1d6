// Package zonedisruptionbudget reports what each ZoneDisruptionBudget
// judges: the zones (StatefulSets) of its selected pods, and those whose pods
// a RolloutGroup's own budget judges instead. The evictions themselves are
// judged by the eviction webhook, which alone writes the budget's hold.
package zonedisruptionbudget

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/patch"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/lookup"
)

const controllerName = "zonedisruptionbudget"

// Reconciler writes the status of ZoneDisruptionBudgets.
type Reconciler struct {
	client.Client
}

// +kubebuilder:rbac:groups=echelon.dev,resources=zonedisruptionbudgets,verbs=list;watch
// +kubebuilder:rbac:groups=echelon.dev,resources=zonedisruptionbudgets/status,verbs=patch

// Reconcile observes which zones a budget's pods fall in, and writes status
// once.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	zdb := &v1alpha1.ZoneDisruptionBudget{}
	if err := r.Get(ctx, req.NamespacedName, zdb); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	obs, err := r.observe(ctx, zdb)
	if err != nil {
		return ctrl.Result{}, err
	}
	st := computeStatus(zdb, obs)
	if err := patch.Status(ctx, r, zdb, zdb.Status, st, func(o *v1alpha1.ZoneDisruptionBudget, s v1alpha1.ZoneDisruptionBudgetStatus) { o.Status = s }); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("ZoneDisruptionBudget: %w", err)
	}
	return ctrl.Result{}, nil
}

// observe lists the selected pods from the cache, their owning StatefulSets
// and the RolloutGroups that claim them.
func (r *Reconciler) observe(ctx context.Context, zdb *v1alpha1.ZoneDisruptionBudget) (observation, error) {
	var obs observation
	sel, err := metav1.LabelSelectorAsSelector(&zdb.Spec.Selector)
	if err != nil {
		obs.invalid = fmt.Sprintf("spec.selector is invalid: %v", err)
		return obs, nil
	}
	if _, err := disruption.PartitionFunc(zdb.Spec.PodNamePartitionRegex, partitionGroup(zdb)); err != nil {
		obs.invalid = "spec." + err.Error()
		return obs, nil
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods, client.InNamespace(zdb.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return obs, fmt.Errorf("list the pods of ZoneDisruptionBudget %s: %w", zdb.Name, err)
	}
	for i := range pods.Items {
		if owner := lookup.OwnerStatefulSet(&pods.Items[i]); owner != "" && !slices.Contains(obs.zones, owner) {
			obs.zones = append(obs.zones, owner)
		}
	}
	slices.Sort(obs.zones)
	for _, zone := range obs.zones {
		sts := &appsv1.StatefulSet{}
		if err := r.Get(ctx, types.NamespacedName{Namespace: zdb.Namespace, Name: zone}, sts); err != nil {
			if !apierrors.IsNotFound(err) {
				return obs, fmt.Errorf("get StatefulSet %s: %w", zone, err)
			}
			sts = nil
		}
		groups, err := lookup.GroupsClaiming(ctx, r.Client, zdb.Namespace, zone, sts)
		if err != nil {
			return obs, err
		}
		if len(groups) > 0 {
			if obs.overlaps == nil {
				obs.overlaps = map[string]string{}
			}
			obs.overlaps[zone] = groups[0].Name
		}
	}
	return obs, nil
}

func partitionGroup(zdb *v1alpha1.ZoneDisruptionBudget) int32 {
	if zdb.Spec.PodNamePartitionGroup != nil {
		return *zdb.Spec.PodNamePartitionGroup
	}
	return 1
}

// New returns the reconciler, reading through the manager's cache.
func New(mgr ctrl.Manager) *Reconciler {
	return &Reconciler{Client: mgr.GetClient()}
}
