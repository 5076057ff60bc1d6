// Package rollout decides, without any client, which pods of a RolloutGroup are
// replaced next. The controller observes the cluster into an Input, calls Plan and
// carries out the result; every safety guarantee lives here, where it is tested
// with tables and fuzzed.
package rollout

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/kube"
	"github.com/echelon-operator/echelon/internal/podname"
)

// Member is one member StatefulSet as observed.
type Member struct {
	// Name is the member's StatefulSet name.
	Name string
	// StatefulSet is nil when the StatefulSet does not exist.
	StatefulSet *appsv1.StatefulSet
	// Pods are the pods the StatefulSet owns, in any order.
	Pods []*corev1.Pod
	// MaxUnavailable is the member's own value, else the group's, else nil
	// (1); or the PodDisruptionBudget's, with spec.maxUnavailableFrom
	// PodDisruptionBudget.
	MaxUnavailable *intstr.IntOrString
	// MaxUnavailableFrom says which PodDisruptionBudget MaxUnavailable comes
	// from, or why the spec's value applies, with spec.maxUnavailableFrom
	// PodDisruptionBudget; "" otherwise.
	MaxUnavailableFrom string
	// ClaimedBy names the other RolloutGroups that also claim this StatefulSet.
	ClaimedBy []string
	// StableRevision is the revision every pod ran when the rollout began, ""
	// when unknown: the revision a rollback returns to. A member whose update
	// revision differs from it has moved in this rollout.
	StableRevision string
	// GatePassedRevision is the update revision whose AfterMember gate the
	// member passed in this rollout.
	GatePassedRevision string
}

// Hold stops every deletion and says why: an analysis gate is pending or
// failed, or a rollback waits for its templates.
type Hold struct {
	// Reason is a v1alpha1.Reason* constant.
	Reason string
	// Message explains the hold.
	Message string
	// Stop also takes back pods released but not yet replaced: a RollingUpdate
	// member's partition is raised over them (a failure, a rollback). Without
	// it, pods released within the budget are left to the StatefulSet
	// controller (a pending gate, a step's pause).
	Stop bool
}

// Input is everything the planner looks at.
type Input struct {
	// Members in rollout order.
	Members []Member
	// NoMembersReason explains an empty Members list (e.g. a selector matching nothing).
	NoMembersReason string
	// InvalidSpec, when set, says why the spec cannot be applied; nothing is touched.
	InvalidSpec string
	// GroupDeleting is true when the RolloutGroup has a deletionTimestamp
	// (foreground deletion, a finalizer): it deletes nothing more.
	GroupDeleting   bool
	Paused          bool
	MinReadySeconds int32
	BatchInterval   time.Duration
	// LastBatchTime is when the previous batch of pods was deleted (zero if never).
	LastBatchTime time.Time
	// Deleting holds the UIDs of pods this process deleted whose deletion the
	// cache has not shown yet (its deletion expectations); they count as
	// terminating.
	Deleting sets.Set[types.UID]
	Now      time.Time

	// Hold, when set, deletes nothing: an analysis gate is pending or failed.
	Hold *Hold
	// MemberGates turns on AfterMember gates: a member that moved (update
	// revision differs from its known stable revision) and is whole, but has not
	// passed its gate for that revision, holds every deletion until it does;
	// the plan names it in GateDue.
	MemberGates bool
	// RollingBack orders the members most recently rolled first, and deletes
	// pods only of members whose update revision is their stable revision
	// again (their template restored), so that nothing rolls forward.
	RollingBack bool

	// Intents are the intents recorded in the group's status.disruption:
	// the group's one disruption budget judges every batch against them
	// (disruption.Decide), so that pods another decision let go (a
	// downscale, an eviction) stop the rollout of any other zone until they
	// are seen replaced.
	Intents []disruption.Intent
	// Holder names the group in the intent a batch records.
	Holder string
	// Steps is spec.steps and where the rollout stands in them; nil without
	// steps and while rolling back.
	Steps *StepsInput

	// RestartAt is spec.restartAt, zero when unset: once it has come, pods
	// created before it are replaced (rotation.go).
	RestartAt time.Time
}

// MemberState is what the planner computed for one member.
type MemberState struct {
	Name           string
	Replicas       int32
	Ready          int32
	Available      int32
	Updated        int32
	MaxUnavailable int32
	// MaxUnavailableFrom is the member's Member.MaxUnavailableFrom.
	MaxUnavailableFrom string
	CurrentRevision    string
	UpdateRevision     string
	// Unavailable counts wanted ordinals without an available, non-terminating pod.
	Unavailable int32
	// Leaving counts pods above (or below) the wanted ordinals that still exist,
	// terminating or not: a scale-down in progress. They use availability too.
	Leaving int32
	// StatusReplicas and StatusReady are the StatefulSet controller's own counts
	// (status.replicas and status.readyReplicas). They include pods the cache may
	// not show, such as terminating pods of a scale-down.
	StatusReplicas int32
	StatusReady    int32
	// StatusUpdated is status.updatedReplicas: the pods on the update revision
	// the StatefulSet controller counted when it last wrote its status.
	StatusUpdated int32
	// Outdated are the live pods (not terminating) that need the update revision.
	Outdated []*corev1.Pod
	// ToRoll counts the wanted pods, terminating or not, not on the update revision.
	ToRoll int32
	// UniformRevision is the revision every wanted pod, terminating or not,
	// carries; "" when they differ or there is none.
	UniformRevision    string
	StableRevision     string
	GatePassedRevision string
	Phase              v1alpha1.MemberPhase
	Message            string

	// Partitioned is true for a member of updateStrategy RollingUpdate: its
	// pods are released by lowering its partition, never deleted.
	Partitioned bool
	// Partition is the StatefulSet's rollingUpdate.partition, 0 when unset.
	Partition int32
	// Released counts the outdated pods at or above the partition that are
	// still available: released to the StatefulSet controller, which may take
	// them down at any moment, so they use the member's maxUnavailable.
	Released int32
	// HoldPartition is the partition to hold when no batch is released, and
	// ReleasePartition the one that releases the plan's batch (partition.go).
	HoldPartition, ReleasePartition int32
	// Pending counts the outdated pods not yet rolled or released: the pods a
	// step of spec.steps still has to reach.
	Pending int32

	// ToRestart are the live wanted pods that spec.restartAt or the
	// echelon.dev/rotate annotation asks to replace (rotation.go).
	ToRestart []*corev1.Pod

	start            int32 // spec.ordinals.start
	aboveOutdated    int32 // lowest partition above every live outdated pod
	releaseCut       int32 // lowest partition that keeps Released within maxUnavailable
	partitionPlanned bool  // HoldPartition was planned
}

// Whole reports whether every wanted pod runs the update revision and is
// available, with nothing leaving and the StatefulSet's status agreeing.
func (ms *MemberState) Whole() bool {
	return len(ms.Outdated) == 0 && ms.ToRoll == 0 && ms.disruption() == ""
}

// Moved reports whether the member's update revision differs from its known
// stable revision: its template changed in this rollout.
func (ms *MemberState) Moved() bool {
	return ms.StableRevision != "" && ms.UpdateRevision != ms.StableRevision
}

// scaling reports whether the member is being scaled: pods above its wanted
// ordinals still leaving, its controller counting more pods than it wants, or
// (with every pod it has on the update revision) fewer.
func (ms *MemberState) scaling() bool {
	return ms.Leaving > 0 || ms.StatusReplicas > ms.Replicas ||
		(ms.StatusReplicas < ms.Replicas && ms.ToRoll == 0 && len(ms.Outdated) == 0)
}

// disruption says why a member uses availability now, or "" when it does not:
// pods that are missing, terminating or not available, pods leaving after a
// scale-down, pods released by its partition that the StatefulSet controller
// may take down at any moment, or a StatefulSet status showing fewer Ready pods than it has or
// than the member wants.
//
// The StatefulSet controller counts a pod it recreated a moment after the
// pod exists, and the cache may show the pod Ready first: its status reads
// 9 of 9 Ready for 10 wanted, then 9 of 10, then 10 of 10. A member judged
// whole at 9 of 9 would be complete, then waiting, then complete again (two
// MemberComplete Events); it waits until the status counts every wanted pod.
// The pod and StatefulSet caches are fed by separate watches, so the status
// may also be older than every pod the cache shows: read before the last pod
// was deleted, it counts 10 of 10 Ready while the cache already shows that
// pod's replacement Ready, and the next status to arrive (written while the
// replacement started) counts 9 of 10. Such a status counts fewer pods on the
// update revision than the cache shows, so a member whose pods are all
// updated also waits for its status to count them all.
// A status that counts no pod at all is left to the pods: every pod it has
// not counted is then missing, or was created since it was last written.
func (ms *MemberState) disruption() string {
	switch {
	case ms.Leaving > 0:
		return fmt.Sprintf("%s above the wanted ordinals still leaving (scale-down)", Plural(int(ms.Leaving), "pod"))
	case ms.Unavailable > 0 && ms.scaling():
		return fmt.Sprintf("%d/%d pods not available (%d of %d created so far)", ms.Unavailable, ms.Replicas, ms.StatusReplicas, ms.Replicas)
	case ms.Unavailable > 0:
		return fmt.Sprintf("%d/%d pods not available", ms.Unavailable, ms.Replicas)
	case ms.Released > 0:
		return fmt.Sprintf("%s released by the partition, not replaced yet", Plural(int(ms.Released), "available pod"))
	case ms.StatusReplicas > ms.StatusReady:
		return fmt.Sprintf("StatefulSet status shows %d of %d pods Ready", ms.StatusReady, ms.StatusReplicas)
	case ms.StatusReplicas > 0 && ms.StatusReplicas < ms.Replicas:
		return fmt.Sprintf("StatefulSet status shows %d of %d pods Ready", ms.StatusReady, ms.Replicas)
	case ms.StatusReplicas > 0 && ms.StatusUpdated < ms.Replicas && len(ms.Outdated) == 0 && ms.ToRoll == 0:
		return fmt.Sprintf("StatefulSet status shows %d of %d pods updated", ms.StatusUpdated, ms.Replicas)
	}
	return ""
}

// Blocker says why nothing of the group may be touched.
type Blocker struct {
	Reason  string
	Member  string
	Message string
}

// Plan is the planner's decision.
type Plan struct {
	Members []MemberState
	// Blocked is non-nil when the group must not be touched at all.
	Blocked *Blocker
	// Complete is true when every wanted pod runs the update revision and is available.
	Complete bool
	// Current is the member being rolled, or waited on; empty when none.
	Current string
	// Delete lists the pods to remove now, all from Current.
	Delete []*corev1.Pod
	// Message explains the decision in one line.
	Message string
	// Reason is the condition reason (a v1alpha1.Reason* constant) that names
	// what the group is doing or waiting for.
	Reason string
	// Settled is true when every member's StatefulSet controller has observed its
	// spec, so revisions and ToRoll can be trusted.
	Settled bool
	// ToRoll counts the wanted pods of every member not on their update revision.
	ToRoll int32
	// AdvanceRevision lists members whose pods all run the update revision and
	// are available but whose status.currentRevision still names an older one:
	// the controller sets it, as Kubernetes does itself for RollingUpdate.
	AdvanceRevision []string
	// RequeueAfter is non-zero when the decision changes with time alone
	// (minReadySeconds or batchInterval), so the controller must look again.
	RequeueAfter time.Duration
	// GateDue names the member whose AfterMember gate must open: it moved,
	// is whole and has not passed its gate for its update revision. Nothing is
	// deleted while it is set.
	GateDue string
	// Step is where the rollout stands in spec.steps after this plan, nil
	// without steps.
	Step *StepState
	// Rotation is true when the plan replaces (or waits to replace) pods that
	// need no new revision, only a restart: Delete is then deleted, also for a
	// RollingUpdate member (rotation.go).
	Rotation bool
	// ToRestart counts the live pods of every member still to restart.
	ToRestart int32
	// Budget is the group's disruption budget's answer to the batch planned,
	// nil when no batch was planned. When it refused, Delete is empty and the
	// reason is WaitingForDisruption; when Budget.Record(), the batch may go
	// only once its hold is recorded in status.disruption (budget.Acquire).
	Budget *BudgetDecision
}

// ResolveMaxUnavailable turns a maxUnavailable value into a pod count for a member
// of the given size: percentages round down, and the result is never below 1.
func ResolveMaxUnavailable(v *intstr.IntOrString, replicas int32) int32 {
	if v == nil {
		return 1
	}
	n, err := intstr.GetScaledValueFromIntOrPercent(v, int(replicas), false)
	if err != nil || n < 1 {
		return 1
	}
	return int32(min(n, 1<<30))
}

// Decide decides what to do next. It keeps these guarantees:
//  1. pods of at most one member are deleted, and only when no other member
//     uses availability: no pod missing, terminating or not available, no pod
//     leaving after a scale-down, and a StatefulSet status whose replicas are
//     all Ready;
//  2. nothing is deleted when any member is missing, being deleted, not
//     OnDelete, or shared with another group, or the group is being deleted;
//  3. deleting never takes the current member's not-available and leaving pods
//     above its maxUnavailable (pods already not available may be replaced: that
//     does not lower availability);
//  4. nothing is deleted while paused or before batchInterval has passed;
//  5. nothing is deleted while Hold is set or an AfterMember gate is due;
//  6. while rolling back, pods are deleted only from members whose update
//     revision is their stable revision, most recently rolled member first;
//  7. a batch is deleted only when the group's one disruption budget allows
//     it (disruption.Decide on Intents): no other zone holds an
//     unlapsed hold, no downscale holds one in any zone.
func Decide(in Input) Plan {
	var p Plan
	for _, m := range in.Members {
		ms := observeMember(m, in)
		p.Members = append(p.Members, ms)
		p.ToRoll += ms.ToRoll
		p.ToRestart += int32(len(ms.ToRestart))
	}
	if b := findBlocker(in); b != nil {
		p.Blocked = b
		p.Message = b.Message
		p.Reason = b.Reason
		for i, m := range in.Members {
			if mb := blocks(m); mb != nil {
				p.Members[i].Phase = v1alpha1.MemberBlocked
				p.Members[i].Message = mb.Message
			}
		}
		return p
	}
	p.RequeueAfter = MinPositive(nextAvailabilityChange(in), untilRestart(in))

	for i, m := range in.Members {
		if msg := unsettled(m.StatefulSet); msg != "" {
			p.Current = m.Name
			p.Members[i].Phase = v1alpha1.MemberWaiting
			p.Members[i].Message = msg
			p.Message = m.Name + ": " + msg
			p.Reason = v1alpha1.ReasonWaitingForStatefulSet
			return p
		}
	}
	p.Settled = true
	decideSettled(in, &p)
	planPartitions(&p, in)
	for _, ms := range p.Members {
		// The StatefulSet controller advances a RollingUpdate member itself.
		if ms.Phase == v1alpha1.MemberComplete && ms.CurrentRevision != ms.UpdateRevision && !ms.Partitioned {
			p.AdvanceRevision = append(p.AdvanceRevision, ms.Name)
		}
	}
	return p
}

// decideSettled is Decide for a group with no blocker whose StatefulSets have
// all been observed by their controller.
func decideSettled(in Input, p *Plan) {
	p.GateDue = gateDue(in, p.Members)
	limit := -1
	if in.Steps != nil && !in.RollingBack {
		var st StepState
		var hold *Hold
		st, limit, hold = decideStep(in, p.Members)
		p.Step = &st
		if hold != nil && in.Hold == nil {
			in.Hold = hold
		}
		if !st.Until.IsZero() {
			p.RequeueAfter = MinPositive(p.RequeueAfter, st.Until.Sub(in.Now))
		}
	}
	var disrupted []string
	for i := range p.Members {
		ms := &p.Members[i]
		if d := ms.disruption(); d != "" {
			disrupted = append(disrupted, ms.Name+" ("+d+")")
			if len(ms.Outdated) == 0 {
				ms.Phase = v1alpha1.MemberWaiting
				ms.Message = d
			}
		}
	}
	if len(disrupted) > 1 {
		p.Message = fmt.Sprintf("waiting: members %s all use availability; rolling resumes when at most one does", strings.Join(disrupted, ", "))
		p.Reason = v1alpha1.ReasonWaitingForMembers
		return
	}
	if decideRotation(in, p) {
		return
	}

	for _, i := range rollOrder(p.Members, in.RollingBack) {
		ms := &p.Members[i]
		if len(ms.Outdated) == 0 {
			if d := ms.disruption(); d != "" {
				p.Current = ms.Name
				p.Message = fmt.Sprintf("%s: %d/%d updated, waiting: %s", ms.Name, ms.Updated, ms.Replicas, d)
				switch {
				case ms.scaling():
					p.Reason = v1alpha1.ReasonWaitingForScale
				case ms.Unavailable > 0:
					p.Reason = v1alpha1.ReasonWaitingForPods
				default:
					p.Reason = v1alpha1.ReasonWaitingForMembers
				}
				return
			}
			continue
		}
		p.Current = ms.Name
		ms.Phase = v1alpha1.MemberRolling
		p.Delete, p.Message, p.Reason = planDeletions(in, ms, p.GateDue, limit)
		askBudget(in, p)
		if wait := in.LastBatchTime.Add(in.BatchInterval).Sub(in.Now); len(p.Delete) == 0 && !in.Paused && in.BatchInterval > 0 && wait > 0 {
			p.RequeueAfter = MinPositive(p.RequeueAfter, wait)
		}
		return
	}

	p.Complete = true
	p.Message = "all members updated and available"
	p.Reason = v1alpha1.ReasonUpToDate
	if p.GateDue != "" {
		p.Current = p.GateDue
		p.Message = fmt.Sprintf("all members updated and available, waiting for the AfterMember gate of %s", p.GateDue)
		p.Reason = v1alpha1.ReasonWaitingForAnalysis
	}
}

// gateDue is the first member, in list order, whose AfterMember gate must
// pass before any other pod is deleted: it moved in this rollout, is whole,
// and has not passed its gate for its update revision.
func gateDue(in Input, members []MemberState) string {
	if !in.MemberGates || in.RollingBack {
		return ""
	}
	for i := range members {
		ms := &members[i]
		if ms.Moved() && ms.Whole() && ms.GatePassedRevision != ms.UpdateRevision {
			return ms.Name
		}
	}
	return ""
}

// rollOrder is the order in which members are considered: a member that uses
// availability comes first, then a member already partly rolled (some pods
// updated, some not), then the rest in list order. The second rule makes a member
// that was started, for example because it had a not-Ready pod, finish before the
// next one starts. A rollback goes in reverse list order: a rollout rolls in list
// order, so the most recently rolled member comes back first.
func rollOrder(members []MemberState, rollingBack bool) []int {
	rank := func(ms MemberState) int {
		switch {
		case ms.disruption() != "":
			return 0
		case ms.Updated > 0 && len(ms.Outdated) > 0:
			return 1
		default:
			return 2
		}
	}
	order := make([]int, len(members))
	for i := range order {
		order[i] = i
	}
	if rollingBack {
		slices.Reverse(order)
	}
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(rank(members[a]), rank(members[b])) })
	return order
}

// planDeletions picks the pods of the current member to delete now, and says
// why in a message and a condition reason. gateDue names a member whose
// AfterMember gate must pass first.
func planDeletions(in Input, ms *MemberState, gateDue string, limit int) ([]*corev1.Pod, string, string) {
	progress := fmt.Sprintf("%s: %d/%d updated", ms.Name, ms.Updated, ms.Replicas)
	if msg, reason := waitBeforeBatch(in, ms, gateDue, progress); reason != "" {
		return nil, msg, reason
	}
	// Pods leaving after a scale-down use the member's budget as much as pods
	// that are not available, and so do pods released to the StatefulSet
	// controller that it has not replaced yet.
	used := ms.Unavailable + ms.Leaving + ms.Released
	budget := max(0, int(ms.MaxUnavailable-used))
	if ms.Partitioned {
		if ms.releaseCut > ms.Partition {
			return nil, fmt.Sprintf("%s, %s released beyond maxUnavailable %d, raising the partition from %d to %d",
				progress, Plural(int(ms.Released), "available pod"), ms.MaxUnavailable, ms.Partition, ms.releaseCut), v1alpha1.ReasonWaitingForPods
		}
		release, to := planRelease(in, ms, budget, limit)
		if len(release) == 0 {
			return nil, fmt.Sprintf("%s, %d/%d pods unavailable or released, waiting before releasing more", progress, used, ms.MaxUnavailable),
				v1alpha1.ReasonWaitingForPods
		}
		ms.ReleasePartition = to
		return release, fmt.Sprintf("%s, lowering the partition from %d to %d (%s)", progress, ms.Partition, to, Plural(len(release), "pod")),
			v1alpha1.ReasonDeletingPods
	}
	del := pickBatch(ms.Name, ms.Outdated, budget, limit, in)
	if len(del) == 0 {
		return nil, fmt.Sprintf("%s, %d/%d pods unavailable, waiting before deleting more", progress, used, ms.MaxUnavailable),
			v1alpha1.ReasonWaitingForPods
	}
	return del, fmt.Sprintf("%s, deleting %s", progress, Plural(len(del), "pod")), v1alpha1.ReasonDeletingPods
}

// waitBeforeBatch says why no pod of the member may be removed now, whatever
// its pods show (progress opens the message), or returns an empty reason:
// the group is paused or held, a gate is due, a rollback waits for the
// member's template, or batchInterval has not passed.
func waitBeforeBatch(in Input, ms *MemberState, gateDue, progress string) (string, string) {
	switch {
	case in.Paused:
		return progress + ", paused", v1alpha1.ReasonPaused
	case in.Hold != nil:
		return progress + ", " + in.Hold.Message, in.Hold.Reason
	case gateDue != "":
		return fmt.Sprintf("%s, waiting for the AfterMember gate of %s", progress, gateDue), v1alpha1.ReasonWaitingForAnalysis
	case in.RollingBack && (ms.StableRevision == "" || ms.UpdateRevision != ms.StableRevision):
		return fmt.Sprintf("%s, waiting for its template of revision %s to be restored", progress, orUnknown(ms.StableRevision)),
			v1alpha1.ReasonRollingBack
	}
	if in.BatchInterval > 0 && !in.LastBatchTime.IsZero() && in.Now.Before(in.LastBatchTime.Add(in.BatchInterval)) {
		return fmt.Sprintf("%s, next batch after batchInterval at %s", progress, in.LastBatchTime.Add(in.BatchInterval).UTC().Format(time.RFC3339)),
			v1alpha1.ReasonWaitingForBatchInterval
	}
	return "", ""
}

// pickBatch picks, of a member's candidate pods, those to remove now, within
// budget (the member's maxUnavailable left) and at most limit (negative for
// no limit).
func pickBatch(member string, candidates []*corev1.Pod, budget, limit int, in Input) []*corev1.Pod {
	var notReady, ready []*corev1.Pod
	for _, pod := range candidates {
		if isAvailable(pod, in.MinReadySeconds, in.Now) {
			ready = append(ready, pod)
		} else {
			notReady = append(notReady, pod)
		}
	}
	// Outdated pods that are not available can be replaced at no cost: they are
	// already counted as unavailable. Then the highest ordinals go first, as the
	// StatefulSet controller does for RollingUpdate.
	byOrdinalDesc := func(a, b *corev1.Pod) int {
		oa, _ := podname.Ordinal(member, a.Name)
		ob, _ := podname.Ordinal(member, b.Name)
		return cmp.Compare(ob, oa)
	}
	slices.SortFunc(notReady, byOrdinalDesc)
	slices.SortFunc(ready, byOrdinalDesc)
	del := slices.Concat(notReady, ready[:min(budget, len(ready))])
	if limit >= 0 && len(del) > limit {
		del = del[:limit]
	}
	return del
}

func orUnknown(rev string) string {
	if rev == "" {
		return "(unknown)"
	}
	return rev
}

// Plural says "1 pod" or "n pods": the count and the noun it counts.
func Plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// observeMember counts a member's pods by ordinal.
func observeMember(m Member, in Input) MemberState {
	ms := MemberState{Name: m.Name, Phase: v1alpha1.MemberPending, MaxUnavailableFrom: m.MaxUnavailableFrom,
		StableRevision: m.StableRevision, GatePassedRevision: m.GatePassedRevision}
	sts := m.StatefulSet
	if sts == nil {
		return ms
	}
	ms.Replicas = kube.Replicas(sts)
	ms.MaxUnavailable = ResolveMaxUnavailable(m.MaxUnavailable, ms.Replicas)
	ms.CurrentRevision = sts.Status.CurrentRevision
	ms.UpdateRevision = sts.Status.UpdateRevision
	ms.StatusReplicas = sts.Status.Replicas
	ms.StatusReady = sts.Status.ReadyReplicas
	ms.StatusUpdated = sts.Status.UpdatedReplicas

	start, end := ordinalRange(sts)
	ms.start = int32(start)
	if IsPartitioned(sts) {
		ms.Partitioned, ms.Partition = true, PartitionOf(sts)
	}
	live := map[int]*corev1.Pod{}
	revisions := sets.New[string]()
	for _, pod := range m.Pods {
		ord, ok := podname.Ordinal(m.Name, pod.Name)
		if !ok {
			continue // not named as a pod of this StatefulSet
		}
		if ord < start || ord >= end {
			ms.Leaving++ // being scaled away, or left by a move of ordinals.start
			continue
		}
		revisions.Insert(podRevision(pod))
		if podRevision(pod) == ms.UpdateRevision {
			ms.Updated++
		} else {
			ms.ToRoll++
		}
		if isTerminating(pod, in.Deleting) {
			continue
		}
		live[ord] = pod
		if _, ok := kube.PodReadySince(pod); ok {
			ms.Ready++
		}
		if isAvailable(pod, in.MinReadySeconds, in.Now) {
			ms.Available++
		}
		if podRevision(pod) != ms.UpdateRevision {
			ms.Outdated = append(ms.Outdated, pod)
		}
	}
	ms.Unavailable = ms.Replicas - ms.Available
	observePartition(&ms, live, start, end, in)
	observeRotation(&ms, sts, live, in)
	if revisions.Len() == 1 {
		ms.UniformRevision = revisions.UnsortedList()[0]
	}
	switch {
	case len(ms.Outdated) == 0 && ms.Unavailable == 0:
		ms.Phase = v1alpha1.MemberComplete
	case len(ms.Outdated) == 0:
		ms.Phase = v1alpha1.MemberWaiting
	}
	return ms
}

func isAvailable(pod *corev1.Pod, minReadySeconds int32, now time.Time) bool {
	since, ok := kube.PodReadySince(pod)
	if !ok {
		return false
	}
	return minReadySeconds == 0 || !now.Before(since.Add(time.Duration(minReadySeconds)*time.Second))
}

// nextAvailabilityChange is how long until a Ready pod becomes available under
// minReadySeconds; zero when no such pod exists.
func nextAvailabilityChange(in Input) time.Duration {
	if in.MinReadySeconds == 0 {
		return 0
	}
	var next time.Duration
	for _, m := range in.Members {
		for _, pod := range m.Pods {
			since, ok := kube.PodReadySince(pod)
			if !ok || isTerminating(pod, in.Deleting) {
				continue
			}
			if d := since.Add(time.Duration(in.MinReadySeconds) * time.Second).Sub(in.Now); d > 0 {
				next = MinPositive(next, d)
			}
		}
	}
	return next
}

// MinPositive is the sooner of two requeue delays, where zero means none.
func MinPositive(a, b time.Duration) time.Duration {
	switch {
	case a <= 0:
		return b
	case b <= 0:
		return a
	default:
		return min(a, b)
	}
}

// findBlocker returns the first reason, in member order, not to touch the group.
func findBlocker(in Input) *Blocker {
	if in.GroupDeleting {
		return &Blocker{Reason: v1alpha1.ReasonGroupDeleting,
			Message: "the RolloutGroup is being deleted (deletionTimestamp set); no pod is deleted"}
	}
	if in.InvalidSpec != "" {
		return &Blocker{Reason: v1alpha1.ReasonInvalidSpec, Message: in.InvalidSpec}
	}
	if len(in.Members) == 0 {
		msg := in.NoMembersReason
		if msg == "" {
			msg = "the group has no member StatefulSets"
		}
		return &Blocker{Reason: v1alpha1.ReasonMemberNotFound, Message: msg}
	}
	for _, m := range in.Members {
		if b := blocks(m); b != nil {
			return b
		}
	}
	return nil
}

func blocks(m Member) *Blocker {
	switch {
	case m.StatefulSet == nil:
		return &Blocker{Reason: v1alpha1.ReasonMemberNotFound, Member: m.Name,
			Message: fmt.Sprintf("blocked: StatefulSet %s does not exist; no pod of the group is touched", m.Name)}
	case m.StatefulSet.DeletionTimestamp != nil:
		return &Blocker{Reason: v1alpha1.ReasonMemberDeleting, Member: m.Name,
			Message: fmt.Sprintf("blocked: StatefulSet %s is being deleted (deletionTimestamp %s); no pod of the group is touched", m.Name, m.StatefulSet.DeletionTimestamp.UTC().Format(time.RFC3339))}
	case !controlledStrategy(m.StatefulSet):
		return &Blocker{Reason: v1alpha1.ReasonUnsupportedStrategy, Member: m.Name,
			Message: fmt.Sprintf("blocked: StatefulSet %s uses updateStrategy %s; Echelon rolls OnDelete and RollingUpdate members only; no pod of the group is touched", m.Name, m.StatefulSet.Spec.UpdateStrategy.Type)}
	case len(m.ClaimedBy) > 0:
		return &Blocker{Reason: v1alpha1.ReasonMemberClaimedByOtherGroup, Member: m.Name,
			Message: fmt.Sprintf("blocked: StatefulSet %s is also a member of RolloutGroup %s; a StatefulSet may belong to one group only", m.Name, strings.Join(m.ClaimedBy, ", "))}
	}
	return nil
}

// unsettled explains why a StatefulSet's status cannot be trusted yet, or "".
func unsettled(sts *appsv1.StatefulSet) string {
	if sts.Status.ObservedGeneration < sts.Generation {
		return fmt.Sprintf("waiting for the StatefulSet controller to observe generation %d", sts.Generation)
	}
	if sts.Status.UpdateRevision == "" {
		return "waiting for the StatefulSet controller to report an update revision"
	}
	return ""
}
