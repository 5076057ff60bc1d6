package controllertest

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

// Policy creates a ScalingPolicy of target, shaped by mutate.
func (e *Env) Policy(name, target string, mutate func(*v1alpha1.ScalingPolicySpec)) *v1alpha1.ScalingPolicy {
	e.T.Helper()
	sp := builders.MakeScalingPolicy(e.NS, name).Target("", target).Obj()
	mutate(&sp.Spec)
	if err := e.Admin.Create(e.Ctx, sp); err != nil {
		e.T.Fatal(err)
	}
	return sp
}

func (e *Env) GetPolicy(name string) *v1alpha1.ScalingPolicy {
	e.T.Helper()
	sp := &v1alpha1.ScalingPolicy{}
	if err := e.Admin.Get(e.Ctx, client.ObjectKey{Namespace: e.NS, Name: name}, sp); err != nil {
		e.T.Fatal(err)
	}
	return sp
}

// SetReplicas changes a StatefulSet's spec.replicas and reports, as its
// controller would, that it has them all Ready.
func (e *Env) SetReplicas(name string, n int32) {
	e.T.Helper()
	sts := e.GetSTS(name)
	sts.Spec.Replicas = ptr.To(n)
	if err := e.Admin.Update(e.Ctx, sts); err != nil {
		e.T.Fatal(err)
	}
	e.MarkReady(name)
}

// MarkReady writes a StatefulSet's status as its controller would once every
// wanted pod exists, is Ready and runs the update revision.
func (e *Env) MarkReady(name string) {
	e.T.Helper()
	sts := e.GetSTS(name)
	sts.Status.ObservedGeneration = sts.Generation
	sts.Status.Replicas, sts.Status.ReadyReplicas, sts.Status.UpdatedReplicas = *sts.Spec.Replicas, *sts.Spec.Replicas, *sts.Spec.Replicas
	if err := e.Admin.Status().Update(e.Ctx, sts); err != nil {
		e.T.Fatal(err)
	}
}

// WaitReplicas waits until the StatefulSet wants n replicas.
func (e *Env) WaitReplicas(name string, n int32, timeout time.Duration) *appsv1.StatefulSet {
	e.T.Helper()
	var sts *appsv1.StatefulSet
	e.Eventually(timeout, fmt.Sprintf("%s at %d replicas", name, n), func() (bool, error) {
		sts = e.GetSTS(name)
		return *sts.Spec.Replicas == n, nil
	})
	return sts
}
