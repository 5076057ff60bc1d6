package hooks

import (
	"testing"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

var t0 = time.Date(2026, time.November, 26, 7, 0, 0, 0, time.UTC)

func TestDueMemberHooks(t *testing.T) {
	a1 := MemberView{Name: "a", Revision: "a-2"}
	b1 := MemberView{Name: "b", Revision: "b-2"}
	done := func(m MemberView) MemberView { m.Complete = true; return m }
	startedA := Started(nil, "a", "a-2", t0)
	finishedA := Finished(startedA, "a", "a-2", t0.Add(time.Minute))
	oldA := Started(nil, "a", "a-1", t0)
	tests := []struct {
		name       string
		records    []v1alpha1.MemberHookStatus
		members    []MemberView
		current    string
		starting   bool
		wantAfter  []string
		wantBefore string
	}{
		{name: "nothing starts, nothing due", members: []MemberView{a1, b1}, current: "a"},
		{name: "the first batch of a: before a", members: []MemberView{a1, b1}, current: "a", starting: true, wantBefore: "a"},
		{name: "a started: not again", records: startedA, members: []MemberView{a1, b1}, current: "a", starting: true},
		{name: "a record of an older revision: before again", records: oldA, members: []MemberView{a1, b1}, current: "a", starting: true, wantBefore: "a"},
		{name: "a complete, b starting: after a, then before b", records: startedA, members: []MemberView{done(a1), b1}, current: "b", starting: true,
			wantAfter: []string{"a"}, wantBefore: "b"},
		{name: "a complete, b waits: after a alone", records: startedA, members: []MemberView{done(a1), b1}, current: "b", wantAfter: []string{"a"}},
		{name: "a finished: not again", records: finishedA, members: []MemberView{done(a1), b1}, current: "b"},
		{name: "a complete but never started (no rollout of it): no after", members: []MemberView{done(a1), done(b1)}},
		{name: "a started, not complete: no after", records: startedA, members: []MemberView{a1, b1}, current: "a"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			due := DueMemberHooks(tt.records, tt.members, tt.current, tt.starting)
			var after []string
			for _, m := range due.After {
				after = append(after, m.Name)
			}
			if len(after) != len(tt.wantAfter) || (len(after) > 0 && after[0] != tt.wantAfter[0]) {
				t.Errorf("after %v, want %v", after, tt.wantAfter)
			}
			before := ""
			if due.Before != nil {
				before = due.Before.Name
			}
			if before != tt.wantBefore {
				t.Errorf("before %q, want %q", before, tt.wantBefore)
			}
		})
	}
}

func TestRecords(t *testing.T) {
	recs := Started(nil, "b", "b-2", t0)
	recs = Started(recs, "a", "a-2", t0)
	recs = Finished(recs, "a", "a-2", t0.Add(time.Minute))
	recs = Finished(recs, "b", "b-1", t0.Add(time.Minute)) // another revision: no change
	if len(recs) != 2 || recs[0].Name != "a" || recs[0].AfterTime == nil || recs[1].AfterTime != nil {
		t.Fatalf("records %+v", recs)
	}
	recs = Started(recs, "a", "a-3", t0.Add(time.Hour))
	if len(recs) != 2 || recs[0].Revision != "a-3" || recs[0].AfterTime != nil {
		t.Errorf("a new revision replaces the record: %+v", recs)
	}
	if got := Prune(recs, []MemberView{{Name: "b"}}); len(got) != 1 || got[0].Name != "b" {
		t.Errorf("pruned %+v, want b alone", got)
	}
}
