package rolloutgroup

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/rollout"
)

// The version-leak report (internal/rollout/leak.go says what a leaked pod
// is). Two hooks in a pass: before a rollout's batch is removed, its
// ordinals are added to the member's record and written to status with the
// pass's other before-act record (an AfterBatch gate), so that a restart
// between the removal and the pass's status write cannot make Echelon's own
// pods look leaked; after acting, every OnDelete member's pods are checked
// against its record, and each new leak is counted in status and metrics and
// announced in a Warning Event.

// withRemovals is st with the ordinals of the plan's batch added to its
// member's leak record, and whether that changed anything: only a rollout's
// batch of an OnDelete member is recorded (a rotation replaces pods already
// on the update revision, a partition releases pods rather than removing
// them).
func withRemovals(st v1alpha1.RolloutGroupStatus, in rollout.Input, plan rollout.Plan, now time.Time) (v1alpha1.RolloutGroupStatus, bool) {
	if len(plan.Delete) == 0 || plan.Rotation || plan.CurrentPartitioned() {
		return st, false
	}
	i := slices.IndexFunc(in.Members, func(m rollout.Member) bool { return m.Name == plan.Current })
	if i < 0 || i >= len(plan.Members) {
		return st, false
	}
	rec, changed := rollout.RecordRemovals(leakRecordOf(st, plan.Current), in.Members[i], &plan.Members[i], plan.Delete, now)
	if !changed {
		return st, false
	}
	st.LeakRecords = withRecord(st.LeakRecords, rec)
	return st, true
}

// trackLeaks sets the leak records and counts of st, the pass's new status,
// from the records of old and the pods of in, and announces each new leak.
// Records of members no longer in the group are dropped.
func (r *Reconciler) trackLeaks(rg *v1alpha1.RolloutGroup, in rollout.Input, plan rollout.Plan, st *v1alpha1.RolloutGroupStatus, now time.Time) {
	for _, l := range leakRecordsOf(rg.Status, in, plan, st, now) {
		metrics.LeakedPods.WithLabelValues(rg.Namespace, rg.Name, l.Member).Inc()
		r.events.Eventf(rg, l.Pod, corev1.EventTypeWarning, "PodLeaked", "DetectLeak",
			"pod %s of StatefulSet %s came back on update revision %s although Echelon did not remove it (a node drain, an eviction, a crash or a person deleted it): the rollout had not reached it",
			l.Pod.Name, l.Member, l.Revision)
	}
}

// leakRecordsOf is trackLeaks without its announcements: it sets st's leak
// records and counts from old's records and the pods of in, and returns the
// leaks this pass finds new. It changes plan's member states (messages).
func leakRecordsOf(old v1alpha1.RolloutGroupStatus, in rollout.Input, plan rollout.Plan, st *v1alpha1.RolloutGroupStatus, now time.Time) []rollout.Leak {
	st.LeakRecords, st.LeakedPods = nil, 0
	if !plan.Settled || len(plan.Members) != len(in.Members) {
		st.LeakRecords, st.LeakedPods = old.LeakRecords, old.LeakedPods // nothing to judge on
		for i := range st.StatefulSets {
			if rec := leakRecordOf(old, st.StatefulSets[i].Name); rec != nil {
				st.StatefulSets[i].LeakedPods = rec.LeakedPods
			}
		}
		return nil
	}
	var found []rollout.Leak
	for i, m := range in.Members {
		rec, leaks := rollout.TrackLeaks(leakRecordOf(old, m.Name), m, &plan.Members[i], now)
		if rec == nil {
			continue
		}
		st.LeakRecords = append(st.LeakRecords, *rec)
		st.LeakedPods += rec.LeakedPods
		ms := &st.StatefulSets[i]
		ms.LeakedPods = rec.LeakedPods
		if rec.LeakedPods > 0 && rec.Revision == ms.UpdateRevision && ms.UpdatedReplicas < ms.Replicas {
			ms.Message = joinMessage(ms.Message, fmt.Sprintf("%s leaked to revision %s (not removed by Echelon: ordinals %s)",
				rollout.Plural(int(rec.LeakedPods), "pod"), rec.Revision, rec.Leaked))
		}
		found = append(found, leaks...)
	}
	return found
}

// leaksChanged reports whether the leak records differ: a record begins or
// counts a leak once per rollout at most, and each must reach the API server
// before an operator restart could lose it (the batches' removals are written
// before they are made).
func leaksChanged(written, next v1alpha1.RolloutGroupStatus) bool {
	return !equality.Semantic.DeepEqual(written.LeakRecords, next.LeakRecords)
}

func leakRecordOf(st v1alpha1.RolloutGroupStatus, member string) *v1alpha1.LeakRecord {
	for i := range st.LeakRecords {
		if st.LeakRecords[i].Member == member {
			return &st.LeakRecords[i]
		}
	}
	return nil
}

// withRecord is records with rec in place of its member's record, or added.
func withRecord(records []v1alpha1.LeakRecord, rec *v1alpha1.LeakRecord) []v1alpha1.LeakRecord {
	out := slices.Clone(records)
	if i := slices.IndexFunc(out, func(r v1alpha1.LeakRecord) bool { return r.Member == rec.Member }); i >= 0 {
		out[i] = *rec
		return out
	}
	return append(out, *rec)
}

func joinMessage(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
