package controllertest

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

// StatefulSet creates an OnDelete StatefulSet and reports, as its controller
// would, that it observed its spec with update revision rev.
func (e *Env) StatefulSet(name string, replicas int32, rev string) *appsv1.StatefulSet {
	e.T.Helper()
	sts := builders.MakeStatefulSet(e.NS, name).Replicas(replicas).OnDelete().Image("app:" + rev).Obj()
	if err := e.Admin.Create(e.Ctx, sts); err != nil {
		e.T.Fatal(err)
	}
	e.SetRevisions(name, rev, rev)
	return e.GetSTS(name)
}

// SetRevisions writes the StatefulSet's status as its controller would after
// observing a template whose revision is update, its pods counted by revision.
func (e *Env) SetRevisions(name, current, update string) {
	e.T.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := e.GetSTS(name)
		sts.Status.ObservedGeneration = sts.Generation
		sts.Status.CurrentRevision = current
		sts.Status.UpdateRevision = update
		if err := e.Recount(sts); err != nil {
			return err
		}
		return e.Admin.Status().Update(e.Ctx, sts)
	}); err != nil {
		e.T.Fatal(err)
	}
}

func (e *Env) GetSTS(name string) *appsv1.StatefulSet {
	e.T.Helper()
	sts := &appsv1.StatefulSet{}
	if err := e.Admin.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: name}, sts); err != nil {
		e.T.Fatal(err)
	}
	return sts
}

// Group creates a RolloutGroup of the named members.
func (e *Env) Group(name string, maxUnavailable int32, members ...string) *v1alpha1.RolloutGroup {
	e.T.Helper()
	rg := builders.MakeRolloutGroup(e.NS, name).MaxUnavailable(maxUnavailable).Members(members...).Obj()
	if err := e.Admin.Create(e.Ctx, rg); err != nil {
		e.T.Fatal(err)
	}
	return rg
}

func (e *Env) GetGroup(name string) *v1alpha1.RolloutGroup {
	e.T.Helper()
	rg := &v1alpha1.RolloutGroup{}
	if err := e.Admin.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: name}, rg); err != nil {
		e.T.Fatal(err)
	}
	return rg
}

// PodSpec says how the test's stand-in kubelet treats a pod.
type PodSpec struct {
	// Bound pods have a node: deleting one leaves it terminating (no kubelet
	// confirms it) until the test removes it. Unbound pods go at once.
	Bound bool
	// NotReady leaves the pod Running but not Ready.
	NotReady bool
	// IP is the pod's IP, if any.
	IP string
}

// Pod creates the StatefulSet's pod at ordinal on revision rev, Running and
// (unless spec says not) Ready, as its controller and a kubelet would.
func (e *Env) Pod(sts *appsv1.StatefulSet, ordinal int, rev string, spec PodSpec) *corev1.Pod {
	e.T.Helper()
	b := builders.MakePod(e.NS, sts.Name, ordinal).ControlledBy(sts).Container("app", "app:"+rev).Ready(time.Now())
	if spec.IP != "" {
		b.IP(spec.IP)
	}
	if rev != "" {
		b.Revision(rev)
	}
	if spec.Bound {
		b.NodeName("node-that-no-kubelet-runs")
	}
	if spec.NotReady {
		b.NotReady()
	}
	pod := b.Obj()
	status := pod.Status
	if err := e.Admin.Create(e.Ctx, pod); err != nil {
		e.T.Fatal(err)
	}
	// The API server drops status on create: write it as the kubelet would.
	pod.Status = status
	if err := e.Admin.Status().Update(e.Ctx, pod); err != nil {
		e.T.Fatal(err)
	}
	return pod
}

// RecreatePod deletes the StatefulSet's pod at ordinal, waits until it is
// gone, and creates it again as Pod does: same name, another UID (an
// eviction, a node drain).
func (e *Env) RecreatePod(sts *appsv1.StatefulSet, ordinal int, rev string, spec PodSpec) *corev1.Pod {
	e.T.Helper()
	old := &corev1.Pod{}
	if err := e.Admin.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: fmt.Sprintf("%s-%d", sts.Name, ordinal)}, old); err != nil {
		e.T.Fatal(err)
	}
	if err := e.Admin.Delete(e.Ctx, old, client.GracePeriodSeconds(0)); err != nil {
		e.T.Fatal(err)
	}
	e.Eventually(10*time.Second, old.Name+" gone", func() (bool, error) {
		err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(old), &corev1.Pod{})
		return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
	})
	return e.Pod(sts, ordinal, rev, spec)
}

// Pods creates the StatefulSet's pods [0, n) on rev.
func (e *Env) Pods(sts *appsv1.StatefulSet, n int, rev string, spec PodSpec) {
	e.T.Helper()
	for i := range n {
		e.Pod(sts, i, rev, spec)
	}
}

// Terminating counts the StatefulSet's pods that have a deletionTimestamp.
func (e *Env) Terminating(sts string) int {
	e.T.Helper()
	var list corev1.PodList
	if err := e.Admin.List(e.Ctx, &list, client.InNamespace(e.NS), client.MatchingLabels{"app": sts}); err != nil {
		e.T.Fatal(err)
	}
	n := 0
	for _, p := range list.Items {
		if p.DeletionTimestamp != nil {
			n++
		}
	}
	return n
}
