package rolloutgroup

import (
	"context"
	"errors"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// errStaleView marks a deletion the API server refused because the pod was not
// what the plan saw: already gone (NotFound) or replaced by a pod with a new UID
// (Conflict on the UID precondition). The plan was made on a stale view, so the
// batch ends there and the group is planned again from fresh state.
var errStaleView = errors.New("stale view")

// removePods deletes or evicts the planned pods of the current member, one
// batch. The batch ends at the first pod that is not removed: a stale view
// (NotFound, Conflict), an eviction a PodDisruptionBudget refuses, or any other
// error. The pods not yet removed wait for the next plan.
//
// The group's beforePodRemoval hook has called the batch's pods before
// (hooks.go) and left out of the plan those it holds.
func (r *Reconciler) removePods(ctx context.Context, rg *v1alpha1.RolloutGroup, plan rollout.Plan, now time.Time) (actionResult, error) {
	var res actionResult
	if plan.CurrentPartitioned() {
		return res, nil // released by its partition: writePartitions
	}
	key := types.NamespacedName{Namespace: rg.Namespace, Name: rg.Name}
	evict := rg.Spec.PodDeletion == v1alpha1.PodDeletionEvict
	var removed []*corev1.Pod
	var stopErr error
batch:
	for _, pod := range plan.Delete {
		var err error
		if evict {
			err = r.evictPod(ctx, pod)
		} else {
			err = r.deletePod(ctx, pod)
		}
		if err != nil {
			switch {
			case apierrors.IsNotFound(err) || apierrors.IsConflict(err):
				stopErr = fmt.Errorf("remove pod %s: %w: %s", pod.Name, errStaleView, kube.APIMessage(err))
			case evict && apierrors.IsTooManyRequests(err):
				res.refused = fmt.Sprintf("eviction of pod %s refused (PodDisruptionBudget): %s", pod.Name, kube.APIMessage(err))
				r.events.Eventf(rg, pod, corev1.EventTypeWarning, v1alpha1.ReasonEvictionRefused, "Evict", res.refused)
			default:
				stopErr = fmt.Errorf("remove pod %s: %w", pod.Name, err)
			}
			break batch
		}
		r.deletions.Expect(key, pod, now)
		removed = append(removed, pod)
	}
	res.deleted = int32(len(removed))
	if len(removed) > 0 && plan.Rotation {
		r.recordRestarts(rg, plan, removed, evict)
	} else if len(removed) > 0 {
		metrics.PodsRolled.WithLabelValues(rg.Namespace, rg.Name, plan.Current).Add(float64(len(removed)))
		verb := "deleted"
		if evict {
			verb = "evicted"
		}
		r.tellRolled(rg, rolledBatch{member: plan.Current, action: removalAction(evict), verb: verb,
			revision: updateRevisionOf(plan), pods: removed}, now)
	}
	return res, stopErr
}

func removalAction(evict bool) string {
	if evict {
		return "Evict"
	}
	return "Delete"
}

// deletePod deletes exactly the pod that was planned: the UID precondition stops a
// recreated pod with the same name from being deleted by mistake.
func (r *Reconciler) deletePod(ctx context.Context, pod *corev1.Pod) error {
	return r.Delete(ctx, pod, client.Preconditions{UID: &pod.UID})
}

// evictPod asks the Eviction API to remove the pod, so that PodDisruptionBudgets
// are honoured.
func (r *Reconciler) evictPod(ctx context.Context, pod *corev1.Pod) error {
	eviction := &policyv1.Eviction{
		ObjectMeta:    metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace},
		DeleteOptions: &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &pod.UID}},
	}
	return r.SubResource("eviction").Create(ctx, pod, eviction)
}

// advanceRevisions sets status.currentRevision to status.updateRevision on each
// member the plan names: with OnDelete Kubernetes never does it itself, and
// tools that judge a StatefulSet's health compare the two. currentReplicas is
// set with it so the status stays consistent until the StatefulSet controller
// next recomputes it.
func (r *Reconciler) advanceRevisions(ctx context.Context, rg *v1alpha1.RolloutGroup, plan rollout.Plan, members []rollout.Member) error {
	var errs []error
	for _, name := range plan.AdvanceRevision {
		var sts *appsv1.StatefulSet
		for _, m := range members {
			if m.Name == name {
				sts = m.StatefulSet
			}
		}
		if sts == nil || !r.revisions.needsAdvance(sts) {
			continue
		}
		patched := sts.DeepCopy()
		patched.Status.CurrentRevision = sts.Status.UpdateRevision
		patched.Status.CurrentReplicas = sts.Status.UpdatedReplicas
		if err := r.Status().Patch(ctx, patched, client.MergeFrom(sts)); err != nil {
			errs = append(errs, fmt.Errorf("set status.currentRevision of StatefulSet %s: %w", name, err))
			continue
		}
		r.revisions.advanced(sts)
		r.events.Eventf(rg, sts, corev1.EventTypeNormal, "CurrentRevisionSet", "SetCurrentRevision",
			"StatefulSet %s: status.currentRevision set to %s (was %s): every pod runs it", name, sts.Status.UpdateRevision, sts.Status.CurrentRevision)
	}
	return errors.Join(errs...)
}

func updateRevisionOf(plan rollout.Plan) string {
	for _, m := range plan.Members {
		if m.Name == plan.Current {
			return m.UpdateRevision
		}
	}
	return ""
}
