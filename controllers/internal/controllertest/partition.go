package controllertest

import (
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/util/retry"

	"github.com/echelon-operator/echelon/internal/podname"
)

// ReplaceReleased plays, once, the StatefulSet controller of a RollingUpdate
// StatefulSet: each pod at or above its partition (counted from
// spec.ordinals.start) not on status.updateRevision is deleted and created
// again on it, Ready, and the status counts follow. It returns the pods it
// replaced, highest ordinal first, as that controller goes, and marks the
// StatefulSet's generation observed.
func (e *Env) ReplaceReleased(name string) []string {
	e.T.Helper()
	sts := e.GetSTS(name)
	var partition int32
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = *ru.Partition
	}
	pods, err := e.listPods(name)
	if err != nil {
		e.T.Fatal(err)
	}
	start, top := int(podname.Start(sts)), -1
	outdated := map[int]bool{}
	for i := range pods {
		ord, ok := podname.Ordinal(name, pods[i].Name)
		if ok && ord >= start+int(partition) && pods[i].Labels[appsv1.ControllerRevisionHashLabelKey] != sts.Status.UpdateRevision {
			outdated[ord], top = true, max(top, ord)
		}
	}
	var replaced []string
	for ord := top; ord >= start; ord-- {
		if outdated[ord] {
			replaced = append(replaced, e.RecreatePod(sts, ord, sts.Status.UpdateRevision, PodSpec{}).Name)
		}
	}
	e.observe(name)
	return replaced
}

// observe writes the StatefulSet's status as its controller does on each
// pass: the generation observed (a partition write changes it), the pods
// counted, and, once every pod runs the update revision, that revision
// current.
func (e *Env) observe(name string) {
	e.T.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sts := e.GetSTS(name)
		sts.Status.ObservedGeneration = sts.Generation
		if err := e.Recount(sts); err != nil {
			return err
		}
		if sts.Spec.Replicas != nil && sts.Status.UpdatedReplicas == *sts.Spec.Replicas {
			sts.Status.CurrentRevision = sts.Status.UpdateRevision
		}
		return e.Admin.Status().Update(e.Ctx, sts)
	}); err != nil {
		e.T.Fatal(err)
	}
}
