package rolloutgroup

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/internal/rollout"
)

// TestPartitionWritesOverlay: a StatefulSet the cache shows older than this
// process's last partition write is seen with that write's generation and
// partition (so its controller's observedGeneration lags, and the member
// waits); once the cache shows the write, or a newer spec, it is seen as
// cached and the write forgotten.
func TestPartitionWritesOverlay(t *testing.T) {
	sts := func(gen int64, partition int32) *appsv1.StatefulSet {
		s := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "zone-a", UID: "a", Generation: gen}}
		s.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{Partition: ptr.To(partition)}
		s.Status.ObservedGeneration = gen
		return s
	}
	seen := func(p *partitionWrites, cached *appsv1.StatefulSet) (int64, int32) {
		m := p.overlay([]rollout.Member{{Name: "zone-a", StatefulSet: cached}, {Name: "gone"}})
		return m[0].StatefulSet.Generation, *m[0].StatefulSet.Spec.UpdateStrategy.RollingUpdate.Partition
	}
	p := newPartitionWrites()
	if gen, part := seen(p, sts(3, 10)); gen != 3 || part != 10 {
		t.Fatalf("nothing written: seen generation %d partition %d, want the cache's 3, 10", gen, part)
	}
	p.wrote(sts(4, 5), 5)
	cached := sts(3, 10)
	if gen, part := seen(p, cached); gen != 4 || part != 5 {
		t.Errorf("cache behind the write: seen generation %d partition %d, want the write's 4, 5", gen, part)
	}
	if cached.Generation != 3 || *cached.Spec.UpdateStrategy.RollingUpdate.Partition != 10 {
		t.Errorf("the cache's object was changed: generation %d partition %d", cached.Generation, *cached.Spec.UpdateStrategy.RollingUpdate.Partition)
	}
	if gen, part := seen(p, sts(4, 5)); gen != 4 || part != 5 {
		t.Errorf("cache caught up: seen generation %d partition %d, want 4, 5", gen, part)
	}
	if _, ok := p.byUID.Load(cached.UID); ok {
		t.Errorf("the write is still remembered once the cache shows it")
	}
	if gen, part := seen(p, sts(3, 10)); gen != 3 || part != 10 {
		t.Errorf("forgotten: seen generation %d partition %d, want the cache's 3, 10", gen, part)
	}
}
