package webhooks

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// Reasons of the hold-partition webhook's decisions (metric label).
const (
	reasonNotRollingUpdate = "not-rolling-update"
	reasonTemplateSame     = "template-unchanged"
	reasonNotHeld          = "not-held"
	reasonAlreadyHeld      = "already-held"
	reasonPartitionHeld    = "partition-held"
)

// HoldPartition is the mutating webhook that raises the partition of a
// RollingUpdate StatefulSet whose partition a RolloutGroup holds
// (v1alpha1.PartitionHolderLabel) to its replicas, in the same write that
// changes its pod template.
//
// Between a member's last batch and the group's next pass, its partition
// is 0: every pod is on the update revision, so the StatefulSet controller
// has nothing to do. A template change landing then (a `helm upgrade`, a
// revert, `kubectl rollout restart`) would have the StatefulSet controller
// roll the whole member at once, on its own, while the budget may be
// admitting a disruption of another zone; the same holds for a template
// change in the middle of a batch, over the pods the batch released. With
// the partition raised in the write itself, no pod moves to the new
// revision until the group decides, through the budget, to release it.
// Nothing is lowered: a partition at or above the replicas stays.
type HoldPartition struct{}

func (HoldPartition) decide(_ context.Context, req *admissionv1.AdmissionRequest) verdict {
	if req.Operation != admissionv1.Update || req.SubResource != "" ||
		req.Resource.Group != appsv1.GroupName || req.Resource.Version != "v1" || req.Resource.Resource != "statefulsets" {
		return unhandled(metrics.WebhookHoldPartition, describe(req))
	}
	gvk := appsv1.SchemeGroupVersion.WithKind("StatefulSet")
	sts, old := &appsv1.StatefulSet{}, &appsv1.StatefulSet{}
	if err := decodeObject("object", req.Object, gvk, sts); err != nil {
		return failed(reasonMalformed, http.StatusBadRequest, err)
	}
	if err := decodeObject("oldObject", req.OldObject, gvk, old); err != nil {
		return failed(reasonMalformed, http.StatusBadRequest, err)
	}
	patch, reason, err := holdPartitionPatch(old, sts)
	if err != nil {
		return failed(reasonMalformed, http.StatusBadRequest, err)
	}
	v := allow(reason)
	if patch != nil {
		v.patch = patch
		v.warnings = []string{fmt.Sprintf("a RolloutGroup holds the partition of StatefulSet %s: it was raised from %d to %d with this template change; the group rolls the new revision zone by zone",
			sts.Name, rollout.PartitionOf(sts), heldPartition(sts))}
	}
	return v
}

// holdPartitionPatch is the JSON patch that raises sts's partition to
// heldPartition when its template differs from old's, and the reason of
// the decision; nil when nothing is to change.
func holdPartitionPatch(old, sts *appsv1.StatefulSet) ([]byte, string, error) {
	switch {
	case !rollout.IsPartitioned(sts):
		return nil, reasonNotRollingUpdate, nil
	case equality.Semantic.DeepEqual(old.Spec.Template, sts.Spec.Template):
		return nil, reasonTemplateSame, nil
	case sts.Labels[v1alpha1.PartitionHolderLabel] == "":
		return nil, reasonNotHeld, nil
	}
	want := heldPartition(sts)
	if rollout.PartitionOf(sts) >= want {
		return nil, reasonAlreadyHeld, nil
	}
	op := map[string]any{"op": "add", "path": "/spec/updateStrategy/rollingUpdate/partition", "value": want}
	if sts.Spec.UpdateStrategy.RollingUpdate == nil {
		op["path"], op["value"] = "/spec/updateStrategy/rollingUpdate", appsv1.RollingUpdateStatefulSetStrategy{Partition: &want}
	}
	patch, err := json.Marshal([]any{op})
	return patch, reasonPartitionHeld, err
}

// heldPartition is the partition that holds every pod of sts: its replicas,
// or its partition when that is higher.
func heldPartition(sts *appsv1.StatefulSet) int32 {
	return max(kube.Replicas(sts), rollout.PartitionOf(sts))
}
