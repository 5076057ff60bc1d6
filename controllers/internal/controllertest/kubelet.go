package controllertest

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/lookup"
)

// The test plays the StatefulSet controller and the kubelet.

// PlayStatefulSetController recreates each deleted pod of the StatefulSets on
// their update revision and makes it Ready after readyAfter, and keeps each
// StatefulSet's status.replicas and readyReplicas current, until the test ends:
// what kube-controller-manager and a kubelet do, with the timing in the test's
// hands. The status updates reach the operator through its StatefulSet watch,
// which no test slows down.
func (e *Env) PlayStatefulSetController(timing KubeletTiming, names ...string) {
	e.T.Helper()
	wc, err := client.NewWithWatch(APIServer(e.T).Config(), client.Options{Scheme: Scheme()})
	if err != nil {
		e.T.Fatal(err)
	}
	w, err := wc.Watch(e.Ctx, &corev1.PodList{}, client.InNamespace(e.NS))
	if err != nil {
		e.T.Fatal(err)
	}
	finishing := map[types.UID]bool{}
	owned := map[string]bool{}
	for _, n := range names {
		owned[n] = true
	}
	done := make(chan struct{})
	e.T.Cleanup(func() { w.Stop(); <-done })
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			pod, ok := ev.Object.(*corev1.Pod)
			if !ok || !owned[lookup.OwnerStatefulSet(pod)] {
				continue
			}
			switch {
			case ev.Type == watch.Deleted:
				if err := e.recreate(pod, timing.ReadyAfter); err != nil && e.Ctx.Err() == nil {
					e.T.Errorf("recreate %s: %v", pod.Name, err)
				}
			case pod.DeletionTimestamp != nil && !finishing[pod.UID]:
				finishing[pod.UID] = true
				go e.finishTermination(pod, timing.TerminateAfter)
			}
			if err := e.CountPods(lookup.OwnerStatefulSet(pod)); err != nil && e.Ctx.Err() == nil {
				e.T.Errorf("count pods of %s: %v", lookup.OwnerStatefulSet(pod), err)
			}
		}
	}()
}

// KubeletTiming is how fast the stand-in kubelet acts.
type KubeletTiming struct {
	// ReadyAfter is how long a recreated pod takes to become Ready.
	ReadyAfter time.Duration
	// TerminateAfter is how long a deleted pod bound to a node stays
	// Terminating before the kubelet confirms it is gone.
	TerminateAfter time.Duration
}

// finishTermination removes a terminating pod after d, as its kubelet would
// once the containers stopped.
func (e *Env) finishTermination(pod *corev1.Pod, d time.Duration) {
	select {
	case <-time.After(d):
	case <-e.Ctx.Done():
		return
	}
	err := e.Admin.Delete(e.Ctx, pod, client.GracePeriodSeconds(0), client.Preconditions{UID: &pod.UID})
	if err != nil && e.Ctx.Err() == nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		e.T.Errorf("finish termination of %s: %v", pod.Name, err)
	}
}

// CountPods writes status.replicas, readyReplicas, currentReplicas and
// updatedReplicas of a StatefulSet from its pods, as its controller does.
func (e *Env) CountPods(name string) error {
	pods, err := e.listPods(name)
	if err != nil {
		return err
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := &appsv1.StatefulSet{}
		if err := e.Admin.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: name}, sts); err != nil {
			return err
		}
		before := sts.Status.DeepCopy()
		countPods(sts, pods)
		if equality.Semantic.DeepEqual(before, &sts.Status) {
			return nil
		}
		return e.Admin.Status().Update(e.Ctx, sts)
	})
}

// Recount sets sts's status counts from its pods as they are now, as the
// StatefulSet controller does on each pass (a new update revision included).
func (e *Env) Recount(sts *appsv1.StatefulSet) error {
	pods, err := e.listPods(sts.Name)
	if err != nil {
		return err
	}
	countPods(sts, pods)
	return nil
}

// countPods sets a StatefulSet's status.replicas (its pods, terminating ones
// included), readyReplicas, currentReplicas and updatedReplicas (its pods,
// terminating ones aside, Ready, on its current and on its update revision).
func countPods(sts *appsv1.StatefulSet, pods []corev1.Pod) {
	st := &sts.Status
	st.Replicas, st.ReadyReplicas, st.CurrentReplicas, st.UpdatedReplicas = 0, 0, 0, 0
	for i := range pods {
		st.Replicas++
		if pods[i].DeletionTimestamp != nil {
			continue
		}
		if kube.PodReady(&pods[i]) {
			st.ReadyReplicas++
		}
		rev := pods[i].Labels[appsv1.ControllerRevisionHashLabelKey]
		if rev == st.CurrentRevision {
			st.CurrentReplicas++
		}
		if rev == st.UpdateRevision {
			st.UpdatedReplicas++
		}
	}
}

// listPods lists the pods of the StatefulSet name (label app=name).
func (e *Env) listPods(name string) ([]corev1.Pod, error) {
	var list corev1.PodList
	err := e.Admin.List(e.Ctx, &list, client.InNamespace(e.NS), client.MatchingLabels{"app": name})
	return list.Items, err
}

func (e *Env) recreate(gone *corev1.Pod, readyAfter time.Duration) error {
	sts := &appsv1.StatefulSet{}
	if err := e.Admin.Get(e.Ctx, types.NamespacedName{Namespace: e.NS, Name: lookup.OwnerStatefulSet(gone)}, sts); err != nil {
		return err
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: gone.Name, Namespace: e.NS, Labels: map[string]string{}, OwnerReferences: gone.OwnerReferences},
		Spec: corev1.PodSpec{NodeName: gone.Spec.NodeName,
			Containers: []corev1.Container{{Name: "app", Image: "app:" + sts.Status.UpdateRevision}}},
	}
	for k, v := range gone.Labels {
		pod.Labels[k] = v
	}
	pod.Labels[appsv1.ControllerRevisionHashLabelKey] = sts.Status.UpdateRevision
	if err := e.Admin.Create(e.Ctx, pod); err != nil {
		return err
	}
	pod.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
		{Type: corev1.PodReady, Status: corev1.ConditionFalse, LastTransitionTime: metav1.Now()},
	}}
	if err := e.Admin.Status().Update(e.Ctx, pod); err != nil {
		return err
	}
	go func() {
		select {
		case <-time.After(readyAfter):
		case <-e.Ctx.Done():
			return
		}
		pod.Status.Conditions[0] = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: metav1.Now()}
		if err := e.Admin.Status().Update(e.Ctx, pod); err != nil && e.Ctx.Err() == nil && !apierrors.IsNotFound(err) {
			e.T.Errorf("make %s Ready: %v", pod.Name, err)
		}
	}()
	return nil
}
