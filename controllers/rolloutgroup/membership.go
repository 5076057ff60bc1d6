package rolloutgroup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// The member label (v1alpha1.MemberLabel, the group's UID) is what keeps the
// downscale-budget webhook's reach to the StatefulSets a budget judges: the
// webhook configuration's objectSelector sends it the writes of labelled
// StatefulSets only, so an operator that is down or failing cannot block a
// write to any other StatefulSet. The label is derived from the groups at
// every pass (no finalizer): set on each member, taken off a StatefulSet that
// left the group, and taken off every StatefulSet of a namespace whose label
// names no group there once a group of the namespace is gone. A label that a
// GitOps tool or `kubectl replace` removes is put back by the next pass (the
// write that removes it wakes the group); until then the webhook is not
// asked, and the write that removes it is still judged, since the
// objectSelector matches the old object as well as the new one.

// syncMemberLabels labels every member of rg and unlabels the StatefulSets
// of its namespace that carry rg's UID but are members no more. A member
// labelled for another group that still exists keeps that label: two groups
// claiming one StatefulSet are reported Blocked, and either label asks the
// webhook, which reads the claiming group itself.
func (r *Reconciler) syncMemberLabels(ctx context.Context, rg *v1alpha1.RolloutGroup, members []rollout.Member) error {
	groups, err := r.groupUIDs(ctx, rg.Namespace)
	if err != nil {
		return err
	}
	uid := string(rg.UID)
	var errs []error
	isMember := map[string]bool{}
	for _, m := range members {
		isMember[m.Name] = true
		sts := m.StatefulSet
		if sts == nil {
			continue
		}
		if have, ok := sts.Labels[v1alpha1.MemberLabel]; ok && (have == uid || groups[have]) {
			continue
		}
		errs = append(errs, r.setMemberLabel(ctx, sts, &uid))
	}
	var labelled appsv1.StatefulSetList
	if err := r.List(ctx, &labelled, client.InNamespace(rg.Namespace), client.MatchingLabels{v1alpha1.MemberLabel: uid}); err != nil {
		return errors.Join(append(errs, fmt.Errorf("list the StatefulSets labelled members of RolloutGroup %s: %w", rg.Name, err))...)
	}
	for i := range labelled.Items {
		if sts := &labelled.Items[i]; !isMember[sts.Name] {
			errs = append(errs, r.setMemberLabel(ctx, sts, nil))
		}
	}
	return errors.Join(errs...)
}

// sweepMemberLabels unlabels the StatefulSets of namespace whose member
// label names no RolloutGroup there: those of a group just deleted.
func (r *Reconciler) sweepMemberLabels(ctx context.Context, namespace string) error {
	groups, err := r.groupUIDs(ctx, namespace)
	if err != nil {
		return err
	}
	var labelled appsv1.StatefulSetList
	if err := r.List(ctx, &labelled, client.InNamespace(namespace), client.HasLabels{v1alpha1.MemberLabel}); err != nil {
		return fmt.Errorf("list the StatefulSets labelled members of a RolloutGroup: %w", err)
	}
	var errs []error
	for i := range labelled.Items {
		if sts := &labelled.Items[i]; !groups[sts.Labels[v1alpha1.MemberLabel]] {
			errs = append(errs, r.setMemberLabel(ctx, sts, nil))
		}
	}
	return errors.Join(errs...)
}

// groupUIDs are the UIDs of the RolloutGroups of namespace.
func (r *Reconciler) groupUIDs(ctx context.Context, namespace string) (map[string]bool, error) {
	var groups v1alpha1.RolloutGroupList
	if err := r.List(ctx, &groups, client.InNamespace(namespace)); err != nil {
		return nil, fmt.Errorf("list RolloutGroups: %w", err)
	}
	uids := make(map[string]bool, len(groups.Items))
	for _, g := range groups.Items {
		uids[string(g.UID)] = true
	}
	return uids, nil
}

// setMemberLabel sets the member label of sts to uid, or removes it when
// uid is nil, with a merge patch of that one label: it cannot conflict with
// the StatefulSet controller's writes, and touches nothing else.
func (r *Reconciler) setMemberLabel(ctx context.Context, sts *appsv1.StatefulSet, uid *string) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]*string{v1alpha1.MemberLabel: uid}}})
	if err != nil {
		return err
	}
	if err := r.Patch(ctx, sts.DeepCopy(), client.RawPatch(types.MergePatchType, body)); err != nil && !apierrors.IsNotFound(err) {
		if uid == nil {
			return fmt.Errorf("remove the member label of StatefulSet %s: %w", sts.Name, err)
		}
		return fmt.Errorf("label StatefulSet %s a member: %w", sts.Name, err)
	}
	return nil
}
