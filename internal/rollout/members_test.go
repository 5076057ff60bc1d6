package rollout

import (
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/test/builders"
)

// testNow is the planner's clock in tests. Pods built without Ready(...) have
// been Ready since the zero time, so they are available under any
// minReadySeconds; the StatefulSets and pods come from test/builders.
var testNow = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

const testNamespace = "default"

// readyPods returns long-Ready pods of sts at the given ordinals, all on rev.
func readyPods(sts, rev string, ordinals ...int) []*corev1.Pod {
	pods := make([]*corev1.Pod, 0, len(ordinals))
	for _, o := range ordinals {
		pods = append(pods, builders.MakePod(testNamespace, sts, o).Revision(rev).Obj())
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

// partitioned is a RollingUpdate member updating to newRev whose replicas
// pods all run podRev, its partition at partition and its
// status.currentRevision cur.
func partitioned(name string, replicas, partition int, podRev, cur string) *memberBuilder {
	sts := builders.MakeStatefulSet(testNamespace, name).Replicas(int32(replicas)).RollingUpdate().Partition(int32(partition)).
		Revision(newRev).CurrentRevision(cur)
	return makeMember(sts.Obj()).Pods(readyPods(name, podRev, ords(0, replicas)...))
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
