package rolloutgroup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// A RollingUpdate member's partition is Echelon's while the StatefulSet is a
// member: it releases pods by lowering it and holds it everywhere else
// (package rollout, partition.go). A StatefulSet whose partition Echelon
// wrote carries the label partitionHolderLabel (the group's UID: names may be
// longer than a label value), and the group the finalizer partitionFinalizer,
// so that the partition is handed back, set to 0, when the group is deleted or
// the StatefulSet leaves it: the StatefulSet controller then rolls the
// StatefulSet on its own again, and no StatefulSet is left frozen.
const (
	partitionHolderLabel = v1alpha1.PartitionHolderLabel
	partitionFinalizer   = v1alpha1.PartitionsFinalizer
)

// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups,verbs=patch
// +kubebuilder:rbac:groups=echelon.dev,resources=rolloutgroups/finalizers,verbs=update

// writePartitions writes the partitions the plan holds, and, when the plan's
// batch is released by a partition, the one that releases it. The group gets
// its finalizer before the first partition is written. It returns how many
// pods the release let go (0 when none, or when it failed).
func (r *Reconciler) writePartitions(ctx context.Context, rg *v1alpha1.RolloutGroup, plan rollout.Plan, members []rollout.Member) (int32, error) {
	changes := plan.PartitionChanges()
	if len(changes) == 0 {
		return 0, nil
	}
	if err := r.ensureFinalizer(ctx, rg); err != nil {
		return 0, err
	}
	var released int32
	var errs []error
	for _, c := range changes {
		sts := memberStatefulSet(members, c.Member)
		if sts == nil {
			continue
		}
		if err := r.setPartition(ctx, rg, sts, c.To); err != nil {
			if apierrors.IsConflict(err) {
				err = fmt.Errorf("%w: %s", errStaleView, kube.APIMessage(err))
			}
			errs = append(errs, fmt.Errorf("set the partition of StatefulSet %s from %d to %d: %w", c.Member, c.From, c.To, err))
			continue
		}
		if c.Release {
			released = int32(len(plan.Delete))
			metrics.PodsRolled.WithLabelValues(rg.Namespace, rg.Name, plan.Current).Add(float64(released))
			r.tellRolled(rg, rolledBatch{member: c.Member, action: "Release", verb: "released", partition: true, from: c.From, to: c.To,
				revision: updateRevisionOf(plan), pods: plan.Delete}, r.now())
			continue
		}
		r.events.Eventf(rg, sts, corev1.EventTypeNormal, "PartitionHeld", "HoldPartition",
			"StatefulSet %s: partition raised from %d to %d, over every pod not on revision %s that Echelon has not released",
			c.Member, c.From, c.To, sts.Status.UpdateRevision)
	}
	return released, errors.Join(errs...)
}

func podRevisionLabel(pod *corev1.Pod) string {
	if rev := pod.Labels[appsv1.ControllerRevisionHashLabelKey]; rev != "" {
		return rev
	}
	return "no revision label"
}

// setPartition writes the StatefulSet's partition and labels it as held by
// rg, only if its spec is still the one the plan saw: a JSON patch whose
// first operation tests metadata.generation, which a template change moves
// and the StatefulSet controller's status writes do not. An optimistic lock
// on the resourceVersion would lose to every status write of a StatefulSet
// that is rolling (issue 29: 34 of 66 partition writes answered 409). A
// failed test is answered 422 and taken as a stale view.
func (r *Reconciler) setPartition(ctx context.Context, rg *v1alpha1.RolloutGroup, sts *appsv1.StatefulSet, to int32) error {
	ops := []map[string]any{{"op": "test", "path": "/metadata/generation", "value": sts.Generation}}
	if sts.Labels == nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels", "value": map[string]string{}})
	}
	ops = append(ops, map[string]any{"op": "add", "path": "/metadata/labels/" + jsonPointerEscape(partitionHolderLabel), "value": string(rg.UID)})
	if sts.Spec.UpdateStrategy.RollingUpdate == nil {
		ops = append(ops, map[string]any{"op": "add", "path": "/spec/updateStrategy/rollingUpdate", "value": map[string]any{}})
	}
	ops = append(ops, map[string]any{"op": "add", "path": "/spec/updateStrategy/rollingUpdate/partition", "value": to})
	body, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	written := sts.DeepCopy()
	err = r.Patch(ctx, written, client.RawPatch(types.JSONPatchType, body))
	if status, ok := err.(apierrors.APIStatus); ok && status.Status().Code == http.StatusUnprocessableEntity {
		return fmt.Errorf("%w: its spec changed since it was read (%s)", errStaleView, kube.APIMessage(err))
	}
	if err == nil {
		r.partitions.wrote(written, to)
	}
	return err
}

// jsonPointerEscape escapes a map key for a JSON pointer (RFC 6901).
func jsonPointerEscape(key string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(key)
}

// ensureFinalizer adds partitionFinalizer to the group, once.
func (r *Reconciler) ensureFinalizer(ctx context.Context, rg *v1alpha1.RolloutGroup) error {
	if controllerutil.ContainsFinalizer(rg, partitionFinalizer) {
		return nil
	}
	patched := rg.DeepCopy()
	controllerutil.AddFinalizer(patched, partitionFinalizer)
	if err := r.Patch(ctx, patched, client.MergeFrom(rg)); err != nil {
		return fmt.Errorf("add finalizer %s to RolloutGroup: %w", partitionFinalizer, err)
	}
	rg.Finalizers = patched.Finalizers
	return nil
}

// handBackPartitions hands the partition back (sets it to 0 and removes the
// label) on every StatefulSet the group holds that is not in keep: all of
// them when the group is being deleted, after which the finalizer goes. A
// group's pass calls it only for a group with an explicit member list,
// whose members are keep: a selector group hands back nothing until it is
// deleted.
func (r *Reconciler) handBackPartitions(ctx context.Context, rg *v1alpha1.RolloutGroup, keep []rollout.Member) error {
	var held appsv1.StatefulSetList
	if err := r.List(ctx, &held, client.InNamespace(rg.Namespace), client.MatchingLabels{partitionHolderLabel: string(rg.UID)}); err != nil {
		return fmt.Errorf("list the StatefulSets whose partition RolloutGroup %s holds: %w", rg.Name, err)
	}
	var errs []error
	for i := range held.Items {
		sts := &held.Items[i]
		if m := memberStatefulSet(keep, sts.Name); m != nil && rollout.IsPartitioned(m) {
			continue
		}
		if err := r.handBack(ctx, rg, sts); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 || rg.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(rg, partitionFinalizer) {
		return errors.Join(errs...)
	}
	patched := rg.DeepCopy()
	controllerutil.RemoveFinalizer(patched, partitionFinalizer)
	if err := r.Patch(ctx, patched, client.MergeFrom(rg)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("remove finalizer %s from RolloutGroup: %w", partitionFinalizer, err)
	}
	return nil
}

// handBack sets one StatefulSet's partition to 0 (when it still rolls by one)
// and removes the label that says the group holds it.
func (r *Reconciler) handBack(ctx context.Context, rg *v1alpha1.RolloutGroup, sts *appsv1.StatefulSet) error {
	patched := sts.DeepCopy()
	delete(patched.Labels, partitionHolderLabel)
	from := rollout.PartitionOf(sts)
	if rollout.IsPartitioned(sts) && patched.Spec.UpdateStrategy.RollingUpdate != nil {
		patched.Spec.UpdateStrategy.RollingUpdate.Partition = nil
	}
	if err := r.Patch(ctx, patched, client.MergeFrom(sts)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("hand back the partition of StatefulSet %s: %w", sts.Name, err)
	}
	why := "it left the group"
	if rg.DeletionTimestamp != nil {
		why = "the group is being deleted"
	}
	r.events.Eventf(rg, sts, corev1.EventTypeNormal, "PartitionHandedBack", "HandBackPartition",
		"StatefulSet %s: partition %d handed back (set to 0) as %s; the StatefulSet controller rolls it on its own again", sts.Name, from, why)
	return nil
}

func memberStatefulSet(members []rollout.Member, name string) *appsv1.StatefulSet {
	for _, m := range members {
		if m.Name == name {
			return m.StatefulSet
		}
	}
	return nil
}
