package rolloutgroup

import (
	"context"
	"encoding/json"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// +kubebuilder:rbac:groups=apps,resources=controllerrevisions,verbs=get
// +kubebuilder:rbac:groups=apps,resources=statefulsets,verbs=patch

// restoreTemplates puts back, on each member of the rollback whose StatefulSet
// still has the revision rolled back from as its update revision, the pod
// template of its stable revision, as `kubectl rollout undo` does: the
// ControllerRevision named by the stable revision (<statefulset>-<hash>)
// stores the template as a strategic merge patch that replaces spec.template,
// and is applied as it is. The StatefulSet controller then finds the restored template equal to
// that revision and makes it the update revision again, and the planner rolls
// the moved pods back.
//
// It returns the members not restored yet (patched and not yet observed by
// their StatefulSet controller, or patched now) and, when a template cannot be
// restored (its revision is gone), why; nothing is deleted until every member
// is restored. Each patch is conditional on the StatefulSet as checked (its
// resourceVersion): a template changed since, that the cache does not show
// yet, is left alone and the error wraps errStaleView, so that the group is
// planned again soon.
func (r *Reconciler) restoreTemplates(ctx context.Context, rg *v1alpha1.RolloutGroup, rb *v1alpha1.RollbackStatus, members []rollout.Member) (pending []string, failed string, err error) {
	for _, m := range rb.Members {
		var sts *appsv1.StatefulSet
		for _, member := range members {
			if member.Name == m.Name {
				sts = member.StatefulSet
			}
		}
		switch {
		case sts == nil:
			return nil, fmt.Sprintf("cannot roll back StatefulSet %s: it does not exist", m.Name), nil
		case sts.Status.ObservedGeneration < sts.Generation:
			pending = append(pending, m.Name) // a patch (ours or not) not yet observed
			continue
		case sts.Status.UpdateRevision == m.To:
			continue // restored
		case sts.Status.UpdateRevision != m.From:
			// Someone changed the template since: not ours to overwrite. The
			// failure is released by the next pass (releaseOnNewTemplate).
			continue
		}
		rev, msg, err := r.stableRevision(ctx, sts, m.To)
		if err != nil || msg != "" {
			return nil, msg, err
		}
		restore, err := conditionalOn(sts, rev.Data.Raw)
		if err == nil && rollout.IsPartitioned(sts) {
			restore, err = holdingPartition(restore, kube.Replicas(sts))
		}
		if err != nil {
			return nil, "", fmt.Errorf("restore the template of StatefulSet %s from ControllerRevision %s: %w", sts.Name, rev.Name, err)
		}
		if err := r.Patch(ctx, sts, client.RawPatch(types.StrategicMergePatchType, restore)); err != nil {
			if apierrors.IsConflict(err) {
				// The StatefulSet changed since the cache showed it, perhaps a
				// fix-forward: not ours to overwrite. Plan again on what it is
				// now; a new template releases the failure.
				return nil, "", fmt.Errorf("restore the template of StatefulSet %s: %w: it changed since it was read", sts.Name, errStaleView)
			}
			return nil, "", fmt.Errorf("restore the template of StatefulSet %s from ControllerRevision %s: %w", sts.Name, rev.Name, err)
		}
		r.events.Eventf(rg, sts, corev1.EventTypeNormal, "TemplateRestored", "Rollback",
			"StatefulSet %s: template of revision %s restored from ControllerRevision %s (was revision %s)", sts.Name, m.To, rev.Name, m.From)
		pending = append(pending, m.Name)
	}
	return pending, "", nil
}

// conditionalOn returns the restore patch with sts's resourceVersion as a
// precondition: the check that the template is still the one rolled back
// from was made on the cached StatefulSet, so the API server must refuse the
// patch (Conflict) if the StatefulSet changed since.
func conditionalOn(sts *appsv1.StatefulSet, patch []byte) ([]byte, error) {
	var fields map[string]any
	if err := json.Unmarshal(patch, &fields); err != nil {
		return nil, err
	}
	meta, _ := fields["metadata"].(map[string]any)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["resourceVersion"] = sts.ResourceVersion
	fields["metadata"] = meta
	return json.Marshal(fields)
}

// stableRevision reads the ControllerRevision of sts named revision (a
// StatefulSet's revisions, in its status and in its pods'
// controller-revision-hash label, are the names of its ControllerRevisions,
// <sts>-<hash>), checks that sts owns it and that it holds a pod template.
// The string says why there is none to restore.
func (r *Reconciler) stableRevision(ctx context.Context, sts *appsv1.StatefulSet, revision string) (*appsv1.ControllerRevision, string, error) {
	rev := &appsv1.ControllerRevision{}
	err := r.apiReader.Get(ctx, types.NamespacedName{Namespace: sts.Namespace, Name: revision}, rev)
	switch {
	case apierrors.IsNotFound(err) || (err == nil && !ownedBy(rev, sts)):
		return nil, fmt.Sprintf("cannot roll back StatefulSet %s: its ControllerRevision %s (the stable revision) is gone; restore the template by hand or set echelon.dev/retry",
			sts.Name, revision), nil
	case err != nil:
		return nil, "", fmt.Errorf("get ControllerRevision %s: %w", revision, err)
	}
	var patch struct {
		Spec struct {
			Template *json.RawMessage `json:"template"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(rev.Data.Raw, &patch); err != nil || patch.Spec.Template == nil {
		return nil, fmt.Sprintf("cannot roll back StatefulSet %s: ControllerRevision %s holds no pod template", sts.Name, rev.Name), nil
	}
	return rev, "", nil
}

func ownedBy(obj metav1.Object, sts *appsv1.StatefulSet) bool {
	ref := metav1.GetControllerOf(obj)
	return ref != nil && ref.UID == sts.UID
}

// holdingPartition adds to a RollingUpdate member's restore patch its
// partition raised to its replicas: in the same write as the template, so
// that the StatefulSet controller does not roll the pods released for the
// rollout back on its own, all at once, before Echelon releases them again
// one batch at a time.
func holdingPartition(patch []byte, replicas int32) ([]byte, error) {
	var fields map[string]any
	if err := json.Unmarshal(patch, &fields); err != nil {
		return nil, err
	}
	spec, _ := fields["spec"].(map[string]any)
	if spec == nil {
		spec = map[string]any{}
	}
	spec["updateStrategy"] = map[string]any{"rollingUpdate": map[string]any{"partition": replicas}}
	fields["spec"] = spec
	return json.Marshal(fields)
}
