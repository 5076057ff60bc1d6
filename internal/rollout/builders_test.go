package rollout

import (
	"fmt"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// testNow is the planner's clock in tests; pods built without Ready(...) have
// been Ready since an hour before it, so they are available under any
// reasonable minReadySeconds.
var testNow = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

const testNamespace = "default"

// stsBuilder builds StatefulSets the way the API server returns them: defaulted,
// with a status whose observedGeneration matches the generation unless asked
// otherwise.
type stsBuilder struct{ sts appsv1.StatefulSet }

// makeSTS starts a settled StatefulSet with one replica and the API's default
// update strategy (RollingUpdate).
func makeSTS(name string) *stsBuilder {
	return &stsBuilder{sts: appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{
			Name:       name,
			Namespace:  testNamespace,
			UID:        types.UID("sts-" + name),
			Generation: 1,
		},
		Spec: appsv1.StatefulSetSpec{
			Replicas:       ptr.To[int32](1),
			UpdateStrategy: appsv1.StatefulSetUpdateStrategy{Type: appsv1.RollingUpdateStatefulSetStrategyType},
		},
		Status: appsv1.StatefulSetStatus{ObservedGeneration: 1},
	}}
}

func (b *stsBuilder) Replicas(n int32) *stsBuilder {
	b.sts.Spec.Replicas = ptr.To(n)
	return b
}

// NilReplicas leaves spec.replicas unset, which the API defaults to 1.
func (b *stsBuilder) NilReplicas() *stsBuilder {
	b.sts.Spec.Replicas = nil
	return b
}

func (b *stsBuilder) OnDelete() *stsBuilder {
	return b.Strategy(appsv1.OnDeleteStatefulSetStrategyType)
}

func (b *stsBuilder) RollingUpdate() *stsBuilder {
	return b.Strategy(appsv1.RollingUpdateStatefulSetStrategyType)
}

// Strategy sets the update strategy type verbatim; "" is what an object that
// bypassed defaulting looks like.
func (b *stsBuilder) Strategy(t appsv1.StatefulSetUpdateStrategyType) *stsBuilder {
	b.sts.Spec.UpdateStrategy.Type = t
	return b
}

// Revision sets status.updateRevision, the revision every pod should run.
func (b *stsBuilder) Revision(update string) *stsBuilder {
	b.sts.Status.UpdateRevision = update
	return b
}

// CurrentRevision sets status.currentRevision, which with OnDelete Kubernetes
// does not advance by itself.
func (b *stsBuilder) CurrentRevision(current string) *stsBuilder {
	b.sts.Status.CurrentRevision = current
	return b
}

// OrdinalsStart sets spec.ordinals.start.
func (b *stsBuilder) OrdinalsStart(start int32) *stsBuilder {
	b.sts.Spec.Ordinals = &appsv1.StatefulSetOrdinals{Start: start}
	return b
}

// Generation sets metadata.generation and an up-to-date status.observedGeneration.
func (b *stsBuilder) Generation(g int64) *stsBuilder {
	b.sts.Generation = g
	b.sts.Status.ObservedGeneration = g
	return b
}

// NotObserved makes the status lag one generation behind the spec, as right
// after a template change.
func (b *stsBuilder) NotObserved() *stsBuilder {
	b.sts.Status.ObservedGeneration = b.sts.Generation - 1
	return b
}

// StatusReplicas sets the StatefulSet controller's counts: status.replicas
// (pods that exist, terminating ones included) and status.readyReplicas.
func (b *stsBuilder) StatusReplicas(replicas, ready int32) *stsBuilder {
	b.sts.Status.Replicas = replicas
	b.sts.Status.ReadyReplicas = ready
	return b
}

// Deleting sets a deletionTimestamp, as the API server does on delete while a
// finalizer (orphan, foreground) holds the object.
func (b *stsBuilder) Deleting() *stsBuilder {
	b.sts.DeletionTimestamp = ptr.To(metav1.NewTime(testNow.Add(-time.Second)))
	return b
}

func (b *stsBuilder) Obj() *appsv1.StatefulSet {
	return b.sts.DeepCopy()
}

// podUIDs makes every built pod's UID unique, even for two pods of the same name
// (a pod and its replacement).
var podUIDs atomic.Int64

// podBuilder builds a StatefulSet pod named "<sts>-<ordinal>".
type podBuilder struct{ pod corev1.Pod }

// makePod starts a Running pod that has been Ready since an hour before testNow.
func makePod(sts string, ordinal int) *podBuilder {
	name := fmt.Sprintf("%s-%d", sts, ordinal)
	b := &podBuilder{pod: corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: testNamespace,
			UID:       types.UID(fmt.Sprintf("%s-uid-%d", name, podUIDs.Add(1))),
			Labels: map[string]string{
				appsv1.StatefulSetPodNameLabel: name,
				appsv1.PodIndexLabel:           fmt.Sprint(ordinal),
			},
		},
	}}
	return b.Ready(testNow.Add(-time.Hour))
}

// Revision sets the controller-revision-hash label.
func (b *podBuilder) Revision(rev string) *podBuilder {
	b.pod.Labels[appsv1.ControllerRevisionHashLabelKey] = rev
	return b
}

// NoRevision removes the controller-revision-hash label, as on a pod made by
// hand (or by another tool) that a StatefulSet adopted.
func (b *podBuilder) NoRevision() *podBuilder {
	delete(b.pod.Labels, appsv1.ControllerRevisionHashLabelKey)
	return b
}

// Ready makes the pod Running and Ready since the given time.
func (b *podBuilder) Ready(since time.Time) *podBuilder {
	b.pod.Status.Phase = corev1.PodRunning
	return b.readyCondition(corev1.ConditionTrue, since)
}

// NotReady keeps the pod Running with a Ready condition that is False.
func (b *podBuilder) NotReady() *podBuilder {
	return b.readyCondition(corev1.ConditionFalse, testNow.Add(-time.Minute))
}

// Phase sets status.phase; a pod that is not Running is never Ready.
func (b *podBuilder) Phase(phase corev1.PodPhase) *podBuilder {
	b.pod.Status.Phase = phase
	return b
}

// Terminating sets a deletionTimestamp, as the API server does on delete.
func (b *podBuilder) Terminating() *podBuilder {
	b.pod.DeletionTimestamp = ptr.To(metav1.NewTime(testNow.Add(-time.Second)))
	return b
}

func (b *podBuilder) readyCondition(status corev1.ConditionStatus, since time.Time) *podBuilder {
	cond := corev1.PodCondition{Type: corev1.PodReady, Status: status, LastTransitionTime: metav1.NewTime(since)}
	for i, c := range b.pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			b.pod.Status.Conditions[i] = cond
			return b
		}
	}
	b.pod.Status.Conditions = append(b.pod.Status.Conditions, cond)
	return b
}

func (b *podBuilder) Obj() *corev1.Pod {
	return b.pod.DeepCopy()
}

// readyPods returns long-Ready pods of sts at the given ordinals, all on rev.
func readyPods(sts, rev string, ordinals ...int) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, len(ordinals))
	for _, o := range ordinals {
		pods = append(pods, makePod(sts, o).Revision(rev).Obj())
	}
	return pods
}

// ords returns the ordinals [from, to).
func ords(from, to int) []int {
	var out []int
	for i := from; i < to; i++ {
		out = append(out, i)
	}
	return out
}

// memberBuilder builds a planner Member around a StatefulSet.
type memberBuilder struct{ m Member }

// makeMember starts a member for an existing StatefulSet.
func makeMember(sts *appsv1.StatefulSet) *memberBuilder {
	return &memberBuilder{m: Member{Name: sts.Name, StatefulSet: sts}}
}

// makeMissingMember starts a member whose StatefulSet does not exist.
func makeMissingMember(name string) *memberBuilder {
	return &memberBuilder{m: Member{Name: name}}
}

// Pods appends pods; each argument is a pod or a slice of pods.
func (b *memberBuilder) Pods(pods ...any) *memberBuilder {
	for _, p := range pods {
		switch p := p.(type) {
		case *corev1.Pod:
			b.m.Pods = append(b.m.Pods, p)
		case []*corev1.Pod:
			b.m.Pods = append(b.m.Pods, p...)
		default:
			panic(fmt.Sprintf("memberBuilder.Pods: unexpected %T", p))
		}
	}
	return b
}

// MaxUnavailable sets the member's resolved maxUnavailable: 2 or "25%".
func (b *memberBuilder) MaxUnavailable(v any) *memberBuilder {
	b.m.MaxUnavailable = ptr.To(intOrPercent(v))
	return b
}

func (b *memberBuilder) ClaimedBy(groups ...string) *memberBuilder {
	b.m.ClaimedBy = groups
	return b
}

// Stable sets the revision the member's pods ran when the rollout began.
func (b *memberBuilder) Stable(rev string) *memberBuilder {
	b.m.StableRevision = rev
	return b
}

// GatePassed records that the member passed its AfterMember gate for rev.
func (b *memberBuilder) GatePassed(rev string) *memberBuilder {
	b.m.GatePassedRevision = rev
	return b
}

func (b *memberBuilder) Obj() Member {
	return b.m
}

func intOrPercent(v any) intstr.IntOrString {
	switch v := v.(type) {
	case int:
		return intstr.FromInt32(int32(v))
	case string:
		return intstr.FromString(v)
	default:
		panic(fmt.Sprintf("intOrPercent: unexpected %T", v))
	}
}
