package rolloutgroup

import (
	"slices"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/internal/rollout/gate"
)

// statusAfterAct is the status this pass will compute once plan's batch has
// gone as decided. The write that records the batch's intent carries it, so
// a pass whose act goes as decided has nothing left to write at once: the
// first batch of each member changes the phase, the member rolled and the
// members' phases, which would otherwise cost a second status write right
// after the intent's (issue 29: writes per pod rolled).
//
// pre is the before-act record (the batch's removals for the leak report).
// It returns nil, and the intent's write carries pre alone as before, when
// the group has analysis (the batch's AfterBatch gate is opened in pre and
// judged after the act), when the pass is the first over a new generation of
// the spec (observedGeneration says a pass over it succeeded: it is written
// after the act, as before), or when the pass finds a leak (announced, and
// then written, after the act). When the act falls short of the decision
// (a refused eviction, a failed deletion, a decision overtaken), the
// controller writes what it computes after the act at once.
func statusAfterAct(rg *v1alpha1.RolloutGroup, in rollout.Input, plan rollout.Plan, ap *gate.Pass, hp hookPass, pre v1alpha1.RolloutGroupStatus, now time.Time) *v1alpha1.RolloutGroupStatus {
	if rg.Spec.Analysis != nil || len(plan.Delete) == 0 || pre.ObservedGeneration != rg.Generation {
		return nil
	}
	// As the pass after the act sees it: the group with the record the
	// intent's write leaves (controller.go sets rg.Status's hold and leak
	// records from it).
	old := rg.DeepCopy()
	old.Status.Disruption, old.Status.LeakRecords = pre.Disruption.DeepCopy(), pre.LeakRecords
	plan.Members = slices.Clone(plan.Members)
	up := computeStatus(old, plan, actionResult{deleted: int32(len(plan.Delete))}, ap, now)
	applyHooks(&up.status, rg.Generation, hp, now)
	if leaks := leakRecordsOf(old.Status, in, plan, &up.status, now); len(leaks) > 0 {
		return nil
	}
	return &up.status
}
