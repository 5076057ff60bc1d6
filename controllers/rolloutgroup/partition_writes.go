package rolloutgroup

import (
	"sync"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/internal/rollout"
)

// partitionWrites remembers, per StatefulSet (by UID), the generation and
// partition this process's last partition write left, until the cache
// shows that generation: the expectations of a partition write, as
// deletionExpectations are of a deletion. A pass that runs before the
// watch brings the write back would otherwise plan on the partition before
// it and write again with a generation test that fails (answered 422,
// withdrawn, planned again: four writes for nothing). Seen through them,
// the StatefulSet's generation is ahead of its controller's
// observedGeneration, and the member waits, as it would once the cache
// caught up, for the controller to act on the new partition.
type partitionWrites struct {
	byUID sync.Map // the StatefulSet's UID -> writtenPartition
}

type writtenPartition struct {
	generation int64
	partition  int32
}

func newPartitionWrites() *partitionWrites { return &partitionWrites{} }

// wrote notes the StatefulSet as the API server answered a partition write.
func (p *partitionWrites) wrote(sts *appsv1.StatefulSet, partition int32) {
	p.byUID.Store(sts.UID, writtenPartition{generation: sts.Generation, partition: partition})
}

// overlay returns members with each StatefulSet the cache shows older than
// this process's last partition write of it replaced by a copy carrying
// that write's generation and partition; entries the cache has caught up
// with are forgotten.
func (p *partitionWrites) overlay(members []rollout.Member) []rollout.Member {
	for i := range members {
		sts := members[i].StatefulSet
		if sts == nil {
			continue
		}
		v, ok := p.byUID.Load(sts.UID)
		if !ok {
			continue
		}
		w := v.(writtenPartition)
		if sts.Generation >= w.generation {
			p.byUID.CompareAndDelete(sts.UID, w)
			continue
		}
		sts = sts.DeepCopy()
		sts.Generation = w.generation
		if sts.Spec.UpdateStrategy.RollingUpdate == nil {
			sts.Spec.UpdateStrategy.RollingUpdate = &appsv1.RollingUpdateStatefulSetStrategy{}
		}
		sts.Spec.UpdateStrategy.RollingUpdate.Partition = ptr.To(w.partition)
		members[i].StatefulSet = sts
	}
	return members
}
