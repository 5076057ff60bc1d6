package controllers

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// removePods deletes or evicts the planned pods of the current member. It stops at
// the first eviction a PodDisruptionBudget refuses: the rest wait for the retry.
func (r *RolloutGroupReconciler) removePods(ctx context.Context, rg *v1alpha1.RolloutGroup, plan rollout.Plan, now time.Time) (actionResult, error) {
	var res actionResult
	key := types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}
	evict := rg.Spec.PodDeletion == v1alpha1.PodDeletionEvict
	var errs []error
	for _, pod := range plan.Delete {
		var err error
		if evict {
			err = r.evictPod(ctx, pod)
		} else {
			err = r.deletePod(ctx, pod)
		}
		switch {
		case err == nil:
		case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
			continue // already gone, or replaced by a pod with a new UID
		case evict && apierrors.IsTooManyRequests(err):
			res.refused = fmt.Sprintf("eviction of pod %s refused (PodDisruptionBudget): %s", pod.Name, apiMessage(err))
			r.events.Eventf(rg, pod, corev1.EventTypeWarning, "EvictionRefused", "Evict", res.refused)
			return res, errors.Join(errs...)
		default:
			errs = append(errs, fmt.Errorf("remove pod %s: %w", pod.Name, err))
			continue
		}
		r.deletions.Record(key, pod, now)
		res.deleted++
		metrics.PodsRolled.WithLabelValues(rg.Namespace, rg.Name, plan.Current).Inc()
		verb, action := "deleted", "Delete"
		if evict {
			verb, action = "evicted", "Evict"
		}
		r.events.Eventf(rg, pod, corev1.EventTypeNormal, "PodRolled", action,
			"%s pod %s of StatefulSet %s: revision %s, rolling to %s", verb, pod.Name, plan.Current, pod.Labels["controller-revision-hash"], updateRevisionOf(plan))
	}
	return res, errors.Join(errs...)
}

// deletePod deletes exactly the pod that was planned: the UID precondition stops a
// recreated pod with the same name from being deleted by mistake.
func (r *RolloutGroupReconciler) deletePod(ctx context.Context, pod *corev1.Pod) error {
	return r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
}

// evictPod asks the Eviction API to remove the pod, so that PodDisruptionBudgets
// are honoured.
func (r *RolloutGroupReconciler) evictPod(ctx context.Context, pod *corev1.Pod) error {
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	}
	return r.SubResource("eviction").Create(ctx, pod, eviction)
}

func updateRevisionOf(plan rollout.Plan) string {
	for _, m := range plan.Members {
		if m.Name == plan.Current {
			return m.UpdateRevision
		}
	}
	return ""
}

func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}
