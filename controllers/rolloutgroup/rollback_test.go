package rolloutgroup

// Controller-tier tests of what a rollback must survive: a process dying
// between its template writes, and a template changed by someone else that
// the cache has not shown yet.

import (
	"context"
	"errors"
	"fmt"
	"strings"
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

// errCrashed is what a dead process's writes return.
var errCrashed = errors.New("the process died")

// crashingClient stands for a process that dies at the first write crash
// picks: that write and every later one fail, so nothing more this process
// computed reaches the API server.
type crashingClient struct {
	client.Client
	crash func(obj client.Object, patch client.Patch) bool

	mu   sync.Mutex
	dead bool
}

func (c *crashingClient) died(obj client.Object, patch client.Patch) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.dead && patch != nil && c.crash(obj, patch) {
		c.dead = true
	}
	return c.dead
}

func (c *crashingClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	if c.died(obj, patch) {
		return errCrashed
	}
	return c.Client.Patch(ctx, obj, patch, opts...)
}

func (c *crashingClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if c.died(obj, nil) {
		return errCrashed
	}
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *crashingClient) Status() client.SubResourceWriter { return c.SubResource("status") }

func (c *crashingClient) SubResource(name string) client.SubResourceClient {
	return &crashingSubResource{SubResourceClient: c.Client.SubResource(name), c: c}
}

type crashingSubResource struct {
	client.SubResourceClient
	c *crashingClient
}

func (s *crashingSubResource) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	if s.c.died(obj, nil) {
		return errCrashed
	}
	return s.SubResourceClient.Patch(ctx, obj, patch, opts...)
}

func (s *crashingSubResource) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	if s.c.died(obj, nil) {
		return errCrashed
	}
	return s.SubResourceClient.Update(ctx, obj, opts...)
}

func (s *crashingSubResource) Create(ctx context.Context, obj, sub client.Object, opts ...client.SubResourceCreateOption) error {
	if s.c.died(obj, nil) {
		return errCrashed
	}
	return s.SubResourceClient.Create(ctx, obj, sub, opts...)
}

// restarted is a new process's reconciler over the same API server and
// cache: nothing of the old one's memory.
func (e *env) restarted() *Reconciler {
	r := New(e.Manager)
	r.apiReader = e.Manager.GetAPIReader()
	return r
}

// reconcileUntil reconciles group with r (a test's own process, not the
// manager's) until done holds, failing at once when done returns an error.
func (e *env) reconcileUntil(r *Reconciler, group string, timeout time.Duration, what string, done func(*v1alpha1.RolloutGroup) (bool, error)) {
	e.T.Helper()
	e.Eventually(timeout, what, func() (bool, error) {
		if _, err := r.Reconcile(e.Ctx, reconcileRequest(e, group)); err != nil {
			e.T.Logf("Reconcile: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
		return done(e.GetGroup(group))
	})
}

// The process dies during a rollback, after restoring zone-b's template and
// before zone-a's. The rollback was recorded before the first template write,
// so the next leader finds it, restores zone-a and rolls both back: it does
// not take zone-b's restored template for a new rollout and report Complete
// with zone-a on the failed revision.
func TestRollbackSurvivesACrashBetweenTemplateWrites(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true, wrapClient: func(c client.Client) client.Client {
		return &crashingClient{Client: c, crash: func(obj client.Object, patch client.Patch) bool {
			return isTemplateRestore(obj, patch) && obj.GetName() == "zone-a"
		}}
	}})
	prom := newPromStub(t, func(q string) string {
		if strings.Contains(q, "zone-b") {
			return "7"
		}
		return "0"
	})
	mon := e.analyzedMembers(prom, v1alpha1.FailureRollback, errorsBelowOne(v1alpha1.GateAfterMember, 1, 1), 2, "zone-a", "zone-b")
	e.rollTo("r2", "zone-a", "zone-b")
	e.Eventually(60*time.Second, "zone-b's template restored by the process that then dies", func() (bool, error) {
		return e.GetSTS("zone-b").Spec.Template.Spec.Containers[0].Image == "app:"+revisionName("zone-b", "r1"), nil
	})

	e.reconcileUntil(e.restarted(), "ingester", 60*time.Second, "the new leader to complete the rollback", func(rg *v1alpha1.RolloutGroup) (bool, error) {
		zoneA := e.GetSTS("zone-a").Spec.Template.Spec.Containers[0].Image
		if rg.Status.Phase == v1alpha1.PhaseComplete {
			return false, fmt.Errorf("the new leader reports Complete with zone-a's template %s, analysis %+v", zoneA, rg.Status.Analysis)
		}
		an := rg.Status.Analysis
		return an != nil && an.Rollback != nil && an.Rollback.CompletionTime != nil && rg.Status.Phase == v1alpha1.PhaseFailed, nil
	})
	expectNoBreaches(t, mon)
	rg := e.GetGroup("ingester")
	if f := rg.Status.Analysis.Failure; f == nil || f.Reason != v1alpha1.ReasonAnalysisFailed {
		t.Errorf("failure %+v after the rollback, want zone-b's gate failed", f)
	}
	for _, m := range []string{"zone-a", "zone-b"} {
		if img := e.GetSTS(m).Spec.Template.Spec.Containers[0].Image; img != "app:"+revisionName(m, "r1") {
			t.Errorf("StatefulSet %s template %s after the rollback, want revision r1", m, img)
		}
		if got := e.podRevisions(m); got["r1"] != 2 {
			t.Errorf("StatefulSet %s pods by revision %v, want both on r1", m, got)
		}
	}
}
