package volumeresize

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/budget"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/lookup"
	"github.com/echelon-operator/echelon/internal/resize"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// observe reads what the planner decides on: the members' StatefulSets
// and the namespace's claims live (the cache strips volumeClaimTemplates,
// and a claim's capacity must not be judged on a lagging view), their pods
// from the cache, the claims' StorageClasses, and the group's hold.
func (r *Reconciler) observe(ctx context.Context, rg *v1alpha1.RolloutGroup) (resize.Input, error) {
	in := resize.Input{Now: r.now(), Sizes: rg.Spec.VolumeClaimSizes, Status: rg.Status.VolumeResize, Expandable: map[string]bool{}}
	members, _, err := lookup.ResolveMembers(ctx, r.apiReader, rg)
	if err != nil {
		return in, err
	}
	var claims corev1.PersistentVolumeClaimList
	if err := r.apiReader.List(ctx, &claims, client.InNamespace(rg.Namespace)); err != nil {
		return in, fmt.Errorf("list PersistentVolumeClaims: %w", err)
	}
	for _, m := range members {
		z, err := r.zoneOf(ctx, m, claims.Items)
		if err != nil {
			return in, err
		}
		for _, c := range z.Claims {
			if _, seen := in.Expandable[c.Class]; seen || c.Class == "" {
				continue
			}
			sc := &storagev1.StorageClass{}
			switch err := r.apiReader.Get(ctx, types.NamespacedName{Name: c.Class}, sc); {
			case err == nil:
				in.Expandable[c.Class] = sc.AllowVolumeExpansion != nil && *sc.AllowVolumeExpansion
			case !apierrors.IsNotFound(err):
				return in, fmt.Errorf("get StorageClass %s: %w", c.Class, err)
			}
		}
		in.Zones = append(in.Zones, z)
	}
	if in.HeldZone, in.HeldUntil, err = budget.ReadResizeHold(ctx, r.apiReader, rg); err != nil {
		return in, err
	}
	return in, nil
}

// zoneOf is member m as the planner sees it: its claims of every template,
// its pods and its maxUnavailable. A member whose StatefulSet is gone (its
// replacement under way) keeps the claims named after it.
func (r *Reconciler) zoneOf(ctx context.Context, m rollout.Member, claims []corev1.PersistentVolumeClaim) (resize.Zone, error) {
	z := resize.Zone{Name: m.Name, StatefulSet: m.StatefulSet, Pods: map[string]resize.Pod{}}
	if m.StatefulSet == nil {
		return z, nil
	}
	z.MaxUnavailable = rollout.ResolveMaxUnavailable(m.MaxUnavailable, kube.Replicas(m.StatefulSet))
	for i := range claims {
		if c, ok := resize.ClaimOf(&claims[i], m.StatefulSet); ok {
			z.Claims = append(z.Claims, c)
		}
	}
	pods, err := lookup.IndexedReads{}.PodsOf(ctx, r.Client, m.StatefulSet)
	if err != nil {
		return z, err
	}
	for _, p := range pods {
		z.Pods[p.Name] = resize.Pod{Name: p.Name, UID: p.UID, Created: p.CreationTimestamp.Time,
			Terminating: p.DeletionTimestamp != nil, Ready: kube.PodReady(p)}
	}
	return z, nil
}
