package rolloutgroup

// Controller-tier tests of what a rollback must survive: a process dying
// between its template writes, and a template changed by someone else that
// the cache has not shown yet.

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// patchHook calls before ahead of each of the reconciler's patches; a non-nil
// error from it is returned instead of the patch.
type patchHook struct {
	client.Client
	before func(ctx context.Context, obj client.Object, patch client.Patch) error
}

func (h *patchHook) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if err := h.before(ctx, obj, patch); err != nil {
		return err
	}
	return h.Client.Patch(ctx, obj, patch, opts...)
}

// isTemplateRestore reports whether a patch is a rollback's template restore:
// a strategic merge patch of a StatefulSet.
func isTemplateRestore(obj client.Object, patch client.Patch) bool {
	_, ok := obj.(*appsv1.StatefulSet)
	return ok && patch.Type() == types.StrategicMergePatchType
}

// A fix-forward (a person, a GitOps tool) that the cache does not show yet,
// made just before the rollback restores the template, is not overwritten:
// the restore is conditional on the StatefulSet the reconciler checked, the
// Conflict makes it plan again, and the new template releases the failure.
func TestRollbackRestoreKeepsATemplateTheCacheHasNotSeen(t *testing.T) {
	var fixedForward sync.Once
	var e *env
	e = newEnv(t, envOptions{eventDriven: true, wrapClient: func(c client.Client) client.Client {
		return &patchHook{Client: c, before: func(ctx context.Context, obj client.Object, patch client.Patch) error {
			if !isTemplateRestore(obj, patch) {
				return nil
			}
			fixedForward.Do(func() {
				err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
					sts := &appsv1.StatefulSet{}
					if err := e.Admin.Get(ctx, client.ObjectKeyFromObject(obj), sts); err != nil {
						return err
					}
					sts.Spec.Template.Spec.Containers[0].Image = "app:" + revisionName(sts.Name, "r3")
					return e.Admin.Update(ctx, sts)
				})
				if err != nil {
					t.Errorf("fix forward: %v", err)
				}
			})
			return nil
		}}
	}})
	prom := newPromStub(t, constant("5"))
	mon := e.analyzedMembers(prom, v1alpha1.FailureRollback, errorsBelowOne(v1alpha1.GateAfterBatch, 1, 1), 2, "zone-a")
	e.rollTo("r2", "zone-a")

	e.waitEvent("ingester", "RollbackStarted", 30*time.Second)
	e.Eventually(30*time.Second, "the fix-forward to release the failure", func() (bool, error) {
		if img := e.GetSTS("zone-a").Spec.Template.Spec.Containers[0].Image; img != "app:"+revisionName("zone-a", "r3") {
			return false, fmt.Errorf("template of zone-a is %s after the rollback's restore, want the user's app:zone-a-r3", img)
		}
		rg := e.GetGroup("ingester")
		return rg.Status.Analysis.Failure == nil && rg.Status.Analysis.Rollback == nil, nil
	})
	prom.setValue(constant("0"))
	e.waitRolledToTag("ingester", "r3", 60*time.Second)
	expectNoBreaches(t, mon)
}
