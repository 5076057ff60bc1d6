package controllertest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/internal/podname"
)

// SyncPods makes a StatefulSet's pods match its spec.replicas, as its
// controller and kubelets would once a scale is done: the missing ordinals
// get a pod, Ready at once, on the StatefulSet's update revision; the pods
// above go at once; then its status counts them all Ready.
func (e *Env) SyncPods(name string) {
	e.T.Helper()
	sts := e.GetSTS(name)
	var list corev1.PodList
	if err := e.Admin.List(e.Ctx, &list, client.InNamespace(e.NS), client.MatchingLabels{"app": name}); err != nil {
		e.T.Fatal(err)
	}
	lo, hi := podname.Kept(podname.Start(sts), *sts.Spec.Replicas)
	have := map[int]bool{}
	for i := range list.Items {
		pod := &list.Items[i]
		ord, ok := podname.Ordinal(name, pod.Name)
		if ok && ord >= lo && ord < hi {
			have[ord] = true
			continue
		}
		if err := e.Admin.Delete(e.Ctx, pod, client.GracePeriodSeconds(0)); err != nil && !apierrors.IsNotFound(err) {
			e.T.Fatal(fmt.Errorf("delete %s: %w", pod.Name, err))
		}
	}
	for ord := lo; ord < hi; ord++ {
		if !have[ord] {
			e.Pod(sts, ord, sts.Status.UpdateRevision, PodSpec{})
		}
	}
	e.MarkReady(name)
}
