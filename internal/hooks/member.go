package hooks

import (
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// MemberView is what the member hooks need of a member.
type MemberView struct {
	Name     string
	Revision string // its update revision
	// Complete is true when every pod runs the update revision and is available.
	Complete bool
}

// MemberDue are the member hooks due in a pass, in the order they are called:
// the afterMember hooks of members that completed, then the beforeMember hook
// of the member about to start.
type MemberDue struct {
	After  []MemberView
	Before *MemberView
}

// DueMemberHooks says which member hooks are due, given the records in
// status: a member started (its record has beforeTime for its update
// revision) and now complete is due its afterMember call once; the current
// member, when a batch of it is about to be removed (starting) and it has no
// record for its revision, is due its beforeMember call. A record is kept
// whether or not the group has a beforeMember hook, so that afterMember is
// called only for members that rolled.
func DueMemberHooks(records []v1alpha1.MemberHookStatus, members []MemberView, current string, starting bool) MemberDue {
	var due MemberDue
	for _, m := range members {
		rec := find(records, m.Name, m.Revision)
		if rec != nil && rec.BeforeTime != nil && rec.AfterTime == nil && m.Complete {
			due.After = append(due.After, m)
		}
		if m.Name == current && starting && (rec == nil || rec.BeforeTime == nil) {
			due.Before = &m
		}
	}
	return due
}

// Started records that member started rolling revision at now (after its
// beforeMember hook, if any); a record of another revision is replaced.
func Started(records []v1alpha1.MemberHookStatus, member, revision string, now time.Time) []v1alpha1.MemberHookStatus {
	t := metav1.NewTime(now)
	out := slices.DeleteFunc(slices.Clone(records), func(r v1alpha1.MemberHookStatus) bool { return r.Name == member })
	out = append(out, v1alpha1.MemberHookStatus{Name: member, Revision: revision, BeforeTime: &t})
	slices.SortFunc(out, func(a, b v1alpha1.MemberHookStatus) int {
		switch {
		case a.Name < b.Name:
			return -1
		case a.Name > b.Name:
			return 1
		}
		return 0
	})
	return out
}

// Finished records that member's afterMember hook was called for revision.
func Finished(records []v1alpha1.MemberHookStatus, member, revision string, now time.Time) []v1alpha1.MemberHookStatus {
	out := slices.Clone(records)
	for i := range out {
		if out[i].Name == member && out[i].Revision == revision {
			t := metav1.NewTime(now)
			out[i].AfterTime = &t
		}
	}
	return out
}

// Prune drops the records of StatefulSets that are no longer members.
func Prune(records []v1alpha1.MemberHookStatus, members []MemberView) []v1alpha1.MemberHookStatus {
	return slices.DeleteFunc(slices.Clone(records), func(r v1alpha1.MemberHookStatus) bool {
		return !slices.ContainsFunc(members, func(m MemberView) bool { return m.Name == r.Name })
	})
}

func find(records []v1alpha1.MemberHookStatus, name, revision string) *v1alpha1.MemberHookStatus {
	for i := range records {
		if records[i].Name == name && records[i].Revision == revision {
			return &records[i]
		}
	}
	return nil
}
