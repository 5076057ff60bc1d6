package controllertest

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// holdFinalizer keeps a deleted pod terminating until the test lets it go.
const holdFinalizer = "test.echelon.dev/hold"

// DeleteHeld deletes pod and keeps it terminating (a finalizer no one else
// removes) until the function returned is called or the test ends: a pod
// whose containers take long to stop, which the StatefulSet's status may
// still count Ready.
func (e *Env) DeleteHeld(pod *corev1.Pod) (release func()) {
	e.T.Helper()
	held := pod.DeepCopy()
	held.Finalizers = append(held.Finalizers, holdFinalizer)
	if err := e.Admin.Patch(e.Ctx, held, client.MergeFrom(pod)); err != nil {
		e.T.Fatal(err)
	}
	if err := e.Admin.Delete(e.Ctx, held); err != nil {
		e.T.Fatal(err)
	}
	e.Eventually(10*time.Second, held.Name+" terminating", func() (bool, error) {
		cur := &corev1.Pod{}
		err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(held), cur)
		return err == nil && cur.DeletionTimestamp != nil, err
	})
	released := false
	release = func() {
		if released {
			return
		}
		released = true
		// Also at cleanup, when the test's context is done already.
		ctx := context.Background()
		cur := &corev1.Pod{}
		err := e.Admin.Get(ctx, client.ObjectKeyFromObject(held), cur)
		if apierrors.IsNotFound(err) {
			return
		}
		if err != nil {
			e.T.Errorf("release %s: %v", held.Name, err)
			return
		}
		next := cur.DeepCopy()
		next.Finalizers = nil
		if err := e.Admin.Patch(ctx, next, client.MergeFrom(cur)); err != nil && !apierrors.IsNotFound(err) {
			e.T.Errorf("release %s: %v", held.Name, err)
		}
	}
	e.T.Cleanup(release)
	return release
}
