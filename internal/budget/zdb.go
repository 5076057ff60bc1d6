package budget

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/lookup"
)

// zdbDefaultMaxUnavailable is a ZoneDisruptionBudget's maxUnavailable when
// it sets none (ZoneBudget's doc).
const zdbDefaultMaxUnavailable = 1

// errEmptySelector refuses a ZoneDisruptionBudget selector that would select
// every pod of the namespace. CEL refuses it at admission; this covers
// objects stored before that rule.
var errEmptySelector = errors.New("must not be empty: set matchLabels or matchExpressions")

// ZDBSelector is the budget's spec.selector as a label selector; an error
// when it is invalid or empty.
func ZDBSelector(zdb *v1alpha1.ZoneDisruptionBudget) (labels.Selector, error) {
	sel, err := metav1.LabelSelectorAsSelector(&zdb.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	if sel.Empty() {
		return nil, fmt.Errorf("spec.selector: %w", errEmptySelector)
	}
	return sel, nil
}

// PartitionOf is the partition function of a zone budget (nil when it is
// not partition-aware, or b is nil); an error names the field at fault.
func PartitionOf(b *v1alpha1.ZoneBudget) (func(string) string, error) {
	if b == nil {
		return nil, nil
	}
	group := int32(1)
	if b.PodNamePartitionGroup != nil {
		group = *b.PodNamePartitionGroup
	}
	return disruption.PartitionFunc(b.PodNamePartitionRegex, group)
}

// ZDBZone is one zone of a ZoneDisruptionBudget: a StatefulSet that owns a
// selected pod, with every pod it controls.
type ZDBZone struct {
	StatefulSet *appsv1.StatefulSet
	Pods        []*corev1.Pod
}

// ZDBView reads from r (the API server, for a decision that admits an
// eviction) the pods zdb selects, the StatefulSets that own them and every
// pod of those, and builds the view an eviction is judged on (ViewOfZDB).
// A StatefulSet for which skip is true is left out: its pods are judged by
// the RolloutGroup that claims it. A selected pod that no StatefulSet owns is
// in no zone.
func ZDBView(ctx context.Context, r client.Reader, zdb *v1alpha1.ZoneDisruptionBudget, now time.Time,
	skip func(context.Context, *appsv1.StatefulSet) (bool, error)) (disruption.View, error) {
	zones, err := zdbZones(ctx, r, func(string) client.Reader { return r }, zdb, skip)
	if err != nil {
		return disruption.View{}, err
	}
	return ViewOfZDB(zdb, zones, now)
}

// zdbZones reads from r the pods zdb selects and the StatefulSets that own
// them, and from podsOf(name) every pod of each StatefulSet, but those
// skip is true for.
func zdbZones(ctx context.Context, r client.Reader, podsOf func(statefulSet string) client.Reader, zdb *v1alpha1.ZoneDisruptionBudget,
	skip func(context.Context, *appsv1.StatefulSet) (bool, error)) ([]ZDBZone, error) {
	sel, err := ZDBSelector(zdb)
	if err != nil {
		return nil, err
	}
	var selected corev1.PodList
	if err := r.List(ctx, &selected, client.InNamespace(zdb.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("read the pods ZoneDisruptionBudget %s selects: %w", zdb.Name, err)
	}
	var owners []string
	for i := range selected.Items {
		if name := lookup.OwnerStatefulSet(&selected.Items[i]); name != "" && !slices.Contains(owners, name) {
			owners = append(owners, name)
		}
	}
	slices.Sort(owners)
	zones := make([]ZDBZone, 0, len(owners))
	for _, name := range owners {
		sts := &appsv1.StatefulSet{}
		err := r.Get(ctx, types.NamespacedName{Namespace: zdb.Namespace, Name: name}, sts)
		if apierrors.IsNotFound(err) {
			// Its pods are orphans about to be collected: no zone to judge.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("read StatefulSet %s: %w", name, err)
		}
		if skip != nil {
			skipped, err := skip(ctx, sts)
			if err != nil {
				return nil, err
			}
			if skipped {
				continue
			}
		}
		pods, err := statefulSetPods(ctx, podsOf(name), sts)
		if err != nil {
			return nil, err
		}
		zones = append(zones, ZDBZone{StatefulSet: sts, Pods: pods})
	}
	return zones, nil
}

// ViewOfZDB builds the view of a ZoneDisruptionBudget from its zones, read
// already: each StatefulSet a zone whose budget is spec.maxUnavailable (1 by
// default, a percentage of the StatefulSet's replicas) and whose pods are
// available once Ready for the StatefulSet's own minReadySeconds; the
// budget's recorded intents and crossZoneDelay. No rollout is ever open: a
// ZoneDisruptionBudget judges only evictions.
func ViewOfZDB(zdb *v1alpha1.ZoneDisruptionBudget, zones []ZDBZone, now time.Time) (disruption.View, error) {
	v := disruption.View{Now: now, Intents: disruption.IntentsOf(zdb.Status.Disruption)}
	if d := zdb.Spec.CrossZoneDelay; d != nil {
		v.CrossZoneDelay = d.Duration
	}
	partition, err := PartitionOf(&zdb.Spec.ZoneBudget)
	if err != nil {
		return v, fmt.Errorf("spec.%w", err)
	}
	zones = slices.Clone(zones)
	slices.SortFunc(zones, func(a, b ZDBZone) int { return strings.Compare(a.StatefulSet.Name, b.StatefulSet.Name) })
	for _, z := range zones {
		sts := z.StatefulSet
		opts := disruption.ZoneOptions{
			MaxUnavailable:  disruption.ResolveBudget(zdb.Spec.MaxUnavailable, kube.Replicas(sts), zdbDefaultMaxUnavailable),
			MinReadySeconds: sts.Spec.MinReadySeconds,
			Now:             now,
			Partition:       partition,
		}
		v.Zones = append(v.Zones, disruption.ZoneOf(sts, z.Pods, opts))
	}
	return v, nil
}

// statefulSetPods lists, from r, the pods sts controls.
func statefulSetPods(ctx context.Context, r client.Reader, sts *appsv1.StatefulSet) ([]*corev1.Pod, error) {
	sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector)
	if err != nil {
		return nil, fmt.Errorf("selector of StatefulSet %s: %w", sts.Name, err)
	}
	var list corev1.PodList
	if err := r.List(ctx, &list, client.InNamespace(sts.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return nil, fmt.Errorf("live read of the pods of StatefulSet %s: %w", sts.Name, err)
	}
	return kube.ControlledBy(list.Items, sts), nil
}
