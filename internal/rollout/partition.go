package rollout

import (
	"cmp"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/echelon-operator/echelon/internal/podname"
)

// A member of updateStrategy RollingUpdate is rolled by its partition: the
// StatefulSet controller replaces, highest ordinal first, the pods at or above
// spec.updateStrategy.rollingUpdate.partition that are not on the update
// revision, and (re)creates the pods below it on the current revision. Echelon
// never deletes such a member's pods to roll them: it releases the next pods by
// lowering the partition, as far as the member's maxUnavailable allows, and
// holds it everywhere else:
//   - a member not being rolled, or one the group stops (paused, a failed gate,
//     a rollback), has its partition raised over every live pod not yet on
//     the update revision, so that a template change it did not plan rolls
//     nothing (a pod on the update revision below them, rare, would come back
//     on the old revision if deleted, and be rolled again: a wasted restart
//     rather than a second member rolling);
//   - the member being rolled keeps what it released, cut back to what its
//     maxUnavailable allows when more was released (a partition lowered by
//     hand, or a StatefulSet adopted mid-rollout);
//   - a complete member whose status.currentRevision is its update revision
//     has its partition raised to its replicas: the next template change then
//     rolls no pod until Echelon releases it, and a pod that is deleted comes
//     back on the revision it ran.
// Raising the partition never touches a pod: it only decides which revision a
// pod gets when it is next created, and which pods the StatefulSet controller
// may replace.

// controlledStrategy reports whether Echelon can roll a StatefulSet of this
// update strategy: OnDelete by deleting pods, RollingUpdate (the API's
// default, also when the type is empty) by its partition.
func controlledStrategy(sts *appsv1.StatefulSet) bool {
	switch sts.Spec.UpdateStrategy.Type {
	case appsv1.OnDeleteStatefulSetStrategyType, appsv1.RollingUpdateStatefulSetStrategyType, "":
		return true
	}
	return false
}

// IsPartitioned reports whether Echelon rolls the StatefulSet by its partition.
func IsPartitioned(sts *appsv1.StatefulSet) bool {
	return sts != nil && controlledStrategy(sts) && sts.Spec.UpdateStrategy.Type != appsv1.OnDeleteStatefulSetStrategyType
}

// PartitionOf is the StatefulSet's rollingUpdate.partition, 0 when unset.
func PartitionOf(sts *appsv1.StatefulSet) int32 {
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		return *ru.Partition
	}
	return 0
}

// PartitionChange is a partition the controller must write.
type PartitionChange struct {
	Member   string
	From, To int32
	// Release is true when the change releases the plan's batch (Plan.Delete).
	Release bool
}

// PartitionChanges are the partitions to write for this plan: the current
// member's lowered to release the batch, when there is one, and every
// member's hold.
func (p *Plan) PartitionChanges() []PartitionChange {
	var out []PartitionChange
	for i := range p.Members {
		ms := &p.Members[i]
		if !ms.Partitioned || !ms.partitionPlanned {
			continue
		}
		to, release := ms.HoldPartition, false
		if ms.Name == p.Current && len(p.Delete) > 0 && !p.Rotation { // a rotation deletes its pods
			to, release = ms.ReleasePartition, true
		}
		if to != ms.Partition {
			out = append(out, PartitionChange{Member: ms.Name, From: ms.Partition, To: to, Release: release})
		}
	}
	return out
}

// CurrentPartitioned reports whether the plan's batch, if any, is released
// by a partition rather than deleted.
func (p *Plan) CurrentPartitioned() bool {
	if p.Rotation {
		return false // a rotation deletes pods of every member kind
	}
	for i := range p.Members {
		if p.Members[i].Name == p.Current {
			return p.Members[i].Partitioned
		}
	}
	return false
}

// HoldBack takes the pods held reports (a beforePodRemoval hook refused
// them, failurePolicy Fail) out of the plan's batch. A batch deleted pod by
// pod loses just those pods. A batch released by a partition cannot skip a
// pod: the StatefulSet controller replaces every outdated pod at or above the
// partition. It keeps only the pods above the highest held one, and the
// partition that releases them is the lowest of their ordinals, as
// planRelease sets it; nothing is released when the highest pod of the batch
// is held (the partition stays where it is, PartitionChanges then holds it).
func (p *Plan) HoldBack(held func(*corev1.Pod) bool) {
	if !p.CurrentPartitioned() {
		p.Delete = slices.DeleteFunc(slices.Clone(p.Delete), held)
		return
	}
	var ms *MemberState
	for i := range p.Members {
		if p.Members[i].Name == p.Current {
			ms = &p.Members[i]
		}
	}
	highest := -1
	for _, pod := range p.Delete {
		if ord, _ := podname.Ordinal(ms.Name, pod.Name); held(pod) {
			highest = max(highest, ord)
		}
	}
	if highest < 0 {
		return
	}
	p.Delete = slices.DeleteFunc(slices.Clone(p.Delete), func(pod *corev1.Pod) bool {
		ord, _ := podname.Ordinal(ms.Name, pod.Name)
		return ord <= highest
	})
	if len(p.Delete) == 0 {
		p.Delete = nil
		return
	}
	lowest := -1
	for _, pod := range p.Delete {
		if ord, _ := podname.Ordinal(ms.Name, pod.Name); lowest < 0 || ord < lowest {
			lowest = ord
		}
	}
	ms.ReleasePartition = int32(lowest) - ms.start
}

// planRelease picks the pods of a partitioned member to release now: the
// next outdated pods below its partition, highest ordinal first (the order in
// which the StatefulSet controller replaces them), as long as the available
// ones fit in budget, and at most limit pods (a step's share; negative for no
// limit). It returns them and the partition that releases them.
func planRelease(in Input, ms *MemberState, budget, limit int) ([]*corev1.Pod, int32) {
	below := make([]*corev1.Pod, 0, len(ms.Outdated))
	for _, pod := range ms.Outdated {
		if ord, _ := podname.Ordinal(ms.Name, pod.Name); int32(ord) < ms.start+ms.Partition {
			below = append(below, pod)
		}
	}
	slices.SortFunc(below, func(a, b *corev1.Pod) int {
		oa, _ := podname.Ordinal(ms.Name, a.Name)
		ob, _ := podname.Ordinal(ms.Name, b.Name)
		return cmp.Compare(ob, oa)
	})
	var take []*corev1.Pod
	for _, pod := range below {
		cost := 0
		if isAvailable(pod, in.MinReadySeconds, in.Now) {
			cost = 1
		}
		if cost > budget || (limit >= 0 && len(take) >= limit) {
			break
		}
		budget -= cost
		take = append(take, pod)
	}
	if len(take) == 0 {
		return nil, ms.Partition
	}
	ord, _ := podname.Ordinal(ms.Name, take[len(take)-1].Name)
	return take, int32(ord) - ms.start
}

// planPartitions sets each partitioned member's hold (see the comment at the
// top of this file).
func planPartitions(p *Plan, in Input) {
	for i := range p.Members {
		ms := &p.Members[i]
		if !ms.Partitioned {
			continue
		}
		// The group stops what was released when paused, on a hold that says
		// so, and, rolling back, on a member whose template is not restored:
		// its released pods would roll forward.
		stop := in.Paused || (in.Hold != nil && in.Hold.Stop) ||
			(in.RollingBack && (ms.StableRevision == "" || ms.UpdateRevision != ms.StableRevision))
		ms.partitionPlanned = true
		ms.HoldPartition = ms.Partition
		switch {
		case len(ms.Outdated) == 0 && ms.ToRoll == 0 && ms.CurrentRevision == ms.UpdateRevision:
			ms.HoldPartition = max(ms.Partition, ms.Replicas)
		case ms.Name == p.Current && !stop:
			ms.HoldPartition = max(ms.Partition, ms.releaseCut)
		default:
			ms.HoldPartition = max(ms.Partition, ms.aboveOutdated)
		}
	}
}

// observePartition completes the observation of a partitioned member from its
// live pods by ordinal (start and end bound the wanted ordinals): the pods it
// released, where its updated pods begin, and how far the member being rolled
// must take back what it released beyond its maxUnavailable.
func observePartition(ms *MemberState, live map[int]*corev1.Pod, start, end int, in Input) {
	ms.Pending = int32(len(ms.Outdated))
	if !ms.Partitioned {
		return
	}
	for ord := end - 1; ord >= start; ord-- {
		if pod := live[ord]; pod != nil && podRevision(pod) != ms.UpdateRevision {
			ms.aboveOutdated = int32(ord+1) - ms.start
			break
		}
	}

	var released []int // ordinals of available released pods, highest first
	for ord := end - 1; ord >= start+int(ms.Partition) && ord >= start; ord-- {
		if pod := live[ord]; pod != nil && podRevision(pod) != ms.UpdateRevision {
			ms.Pending--
			if isAvailable(pod, in.MinReadySeconds, in.Now) {
				released = append(released, ord)
			}
		}
	}
	ms.Released = int32(len(released))
	if allowed := max(0, int(ms.MaxUnavailable-ms.Unavailable-ms.Leaving)); len(released) > allowed {
		ms.releaseCut = int32(released[allowed]+1) - ms.start
	}
}
