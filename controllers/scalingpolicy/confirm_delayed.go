package scalingpolicy

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/podname"
	"github.com/echelon-operator/echelon/internal/scaling"
)

// +kubebuilder:rbac:groups=echelon.dev,resources=delayeddownscales,verbs=get
// +kubebuilder:rbac:groups="",resources=pods,verbs=list

// confirmDelayed checks, right before a downscale that a DelayedDownscale
// allowed, that every pod it removes is still the pod that was prepared: the
// DelayedDownscale and the target's pods are read from the API server, and each
// removed pod must have a record of its current UID, without error, eligible
// now, in a status written for its current spec. A pod recreated since it was
// prepared (a restart, an eviction) is not prepared, whatever a status written
// before says. The floor goes up to the lowest pod confirmed; what it held
// back is returned, "" when nothing.
func (r *Reconciler) confirmDelayed(ctx context.Context, obs observation, plan scaling.Plan) (scaling.Input, string, error) {
	in := obs.In
	target := obs.Target
	dd := &v1alpha1.DelayedDownscale{}
	if err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: target.Namespace, Name: in.FloorSource}, dd); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone since the cache saw it: the next pass, on a cache that
			// shows it gone, decides without it.
			return holdAt(in, plan.Current), fmt.Sprintf("DelayedDownscale %s is gone", in.FloorSource), nil
		}
		return in, "", fmt.Errorf("live read of DelayedDownscale %s: %w", in.FloorSource, err)
	}
	selector, err := metav1.LabelSelectorAsSelector(target.Spec.Selector)
	if err != nil {
		return in, "", fmt.Errorf("StatefulSet %s: spec.selector: %w", target.Name, err)
	}
	var pods corev1.PodList
	if err := r.apiReader.List(ctx, &pods, client.InNamespace(target.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		return in, "", fmt.Errorf("live read of the pods of StatefulSet %s: %w", target.Name, err)
	}
	confirmed, held := confirmedFloor(dd, target, kube.ControlledBy(pods.Items, target), plan, in.Now)
	if held == "" {
		return in, "", nil
	}
	return holdAt(in, confirmed), held, nil
}

// holdAt raises the input's floor to replicas.
func holdAt(in scaling.Input, replicas int32) scaling.Input {
	if in.Floor == nil || *in.Floor < replicas {
		in.Floor = &replicas
	}
	return in
}

// confirmedFloor walks the pods the plan removes, highest ordinal first, and
// stops at the first one whose preparation the DelayedDownscale's status does
// not vouch for: it returns how far the target may shrink and why no further.
// A status not yet written for the current spec vouches for none, and none
// vouches past the status's own eligibleReplicas.
func confirmedFloor(dd *v1alpha1.DelayedDownscale, target *appsv1.StatefulSet, pods []*corev1.Pod, plan scaling.Plan, now time.Time) (int32, string) {
	if dd.Status.ObservedGeneration != dd.Generation {
		// Its records were written under an earlier spec: eligibleAt under
		// another delay, preparations on another endpoint.
		return plan.Current, fmt.Sprintf("DelayedDownscale %s has not caught up with its spec (generation %d, status of %d)",
			dd.Name, dd.Generation, dd.Status.ObservedGeneration)
	}
	// Nor past what its status allows: Blocked since (another
	// DelayedDownscale of the StatefulSet), it keeps its records but allows
	// nothing.
	if dd.Status.EligibleReplicas == nil {
		return plan.Current, fmt.Sprintf("DelayedDownscale %s allows no downscale now (%s)", dd.Name, dd.Status.Message)
	}
	allowed := *dd.Status.EligibleReplicas
	records := map[string]v1alpha1.PreparedPod{}
	for _, p := range dd.Status.PreparedPods {
		records[p.Name] = p
	}
	live := map[string]*corev1.Pod{}
	for _, p := range pods {
		live[p.Name] = p
	}
	lo, hi := podname.Removed(podname.Start(target), plan.Current, *plan.Scale)
	floor := plan.Current
	for ord := hi - 1; ord >= lo; ord-- {
		if floor <= allowed {
			return floor, fmt.Sprintf("DelayedDownscale %s allows no further than %d", dd.Name, allowed)
		}
		name := fmt.Sprintf("%s-%d", target.Name, ord)
		rec, recorded := records[name]
		pod, exists := live[name]
		var why string
		switch {
		case !exists || pod.DeletionTimestamp != nil:
			why = "does not exist"
		case !recorded:
			why = "has no record of being prepared"
		case rec.UID != string(pod.UID):
			why = "was recreated since it was prepared"
		case rec.Error != "":
			why = "answered an error: " + rec.Error
		case rec.EligibleAt == nil || now.Before(rec.EligibleAt.Time):
			why = "has not been prepared for the delay"
		}
		if why != "" {
			return floor, strings.Join([]string{"pod", name, why}, " ")
		}
		floor--
	}
	return floor, ""
}
