package rollout

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

func TestOrdinalsText(t *testing.T) {
	tests := []struct {
		ords []int
		text string
	}{
		{nil, ""},
		{[]int{7}, "7"},
		{[]int{0, 1, 2, 3, 7}, "0-3,7"},
		{[]int{9, 8, 2, 4, 3}, "2-4,8-9"},
		{[]int{0, 2, 4}, "0,2,4"},
	}
	for _, tt := range tests {
		if got := FormatOrdinals(sets.New(tt.ords...)); got != tt.text {
			t.Errorf("FormatOrdinals(%v) = %q, want %q", tt.ords, got, tt.text)
		}
		back, err := ParseOrdinals(tt.text)
		if err != nil || !back.Equal(sets.New(tt.ords...)) {
			t.Errorf("ParseOrdinals(%q) = %v, %v; want %v", tt.text, sets.List(back), err, tt.ords)
		}
	}
	for _, bad := range []string{"a", "3-1", "-1", "1-", "1,,2"} {
		if _, err := ParseOrdinals(bad); err == nil {
			t.Errorf("ParseOrdinals(%q) accepted", bad)
		}
	}
	// Too many gaps to fit: one range that holds them all.
	every := sets.New[int]()
	for o := 0; o < 2000; o += 2 {
		every.Insert(o)
	}
	if got := FormatOrdinals(every); got != "0-1998" {
		t.Errorf("FormatOrdinals(every other of 2000) = %q, want the covering range", got)
	}
}

func TestTrackLeaks(t *testing.T) {
	since := testNow.Add(-10 * time.Minute)
	record := func(removed, leaked string, count int32) *v1alpha1.LeakRecord {
		return &v1alpha1.LeakRecord{Member: "zone-a", Revision: newRev, Since: metav1.NewTime(since), Ordinals: "0-4",
			Removed: removed, Leaked: leaked, LeakedPods: count}
	}
	// A partly rolled zone-a of 5: 4 and 3 rolled by Echelon, 0-2 outdated.
	// back is a pod recreated on rev at ordinal o after the record began.
	back := func(o int, rev string) *corev1.Pod {
		return builders.MakePod(testNamespace, "zone-a", o).Revision(rev).Created(since.Add(time.Minute)).Obj()
	}
	partly := func(pods ...*corev1.Pod) *memberBuilder {
		m := makeMember(onDeleteSTS("zone-a", 5).Obj()).Pods(back(4, newRev), back(3, newRev))
		have := sets.New[string]()
		for _, p := range pods {
			have.Insert(p.Name)
		}
		for o := range 3 {
			if !have.Has(fmt.Sprintf("zone-a-%d", o)) {
				m.Pods(readyPods("zone-a", oldRev, o))
			}
		}
		return m.Pods(pods)
	}
	tests := []struct {
		name       string
		prev       *v1alpha1.LeakRecord
		member     *memberBuilder
		wantLeaks  []string
		wantRecord *v1alpha1.LeakRecord
	}{{
		name:       "a rollout begins: a record of what the member wants, no leak",
		member:     partly(),
		wantRecord: &v1alpha1.LeakRecord{Member: "zone-a", Revision: newRev, Since: metav1.NewTime(testNow), Ordinals: "0-4"},
	}, {
		name:       "the pods Echelon removed are no leak",
		prev:       record("3-4", "", 0),
		member:     partly(),
		wantRecord: record("3-4", "", 0),
	}, {
		name:       "a pod back on the update revision that Echelon did not remove is leaked",
		prev:       record("3-4", "", 0),
		member:     partly(back(1, newRev)),
		wantLeaks:  []string{"zone-a-1"},
		wantRecord: record("3-4", "1", 1),
	}, {
		name:       "a leak is counted once",
		prev:       record("3-4", "1", 1),
		member:     partly(back(1, newRev), back(0, newRev)),
		wantLeaks:  []string{"zone-a-0"},
		wantRecord: record("3-4", "0-1", 2),
	}, {
		name:       "a pod back on the old revision is no leak",
		prev:       record("3-4", "", 0),
		member:     partly(back(1, oldRev)),
		wantRecord: record("3-4", "", 0),
	}, {
		name:       "a pod on the update revision created before the record began is no leak (a reverted template)",
		prev:       record("3-4", "", 0),
		member:     partly(builders.MakePod(testNamespace, "zone-a", 1).Revision(newRev).Created(since.Add(-time.Second)).Obj()),
		wantRecord: record("3-4", "", 0),
	}, {
		name: "a pod a scale-up adds is no leak",
		prev: record("3-4", "", 0),
		member: makeMember(onDeleteSTS("zone-a", 6).Obj()).Pods(readyPods("zone-a", oldRev, 0, 1, 2),
			back(3, newRev), back(4, newRev), back(5, newRev)),
		wantRecord: record("3-4", "", 0),
	}, {
		name:       "every pod on the update revision: nothing more is counted, the record stays",
		prev:       record("3-4", "1", 1),
		member:     makeMember(onDeleteSTS("zone-a", 5).Obj()).Pods(back(0, newRev), back(1, newRev), back(2, newRev), back(3, newRev), back(4, newRev)),
		wantRecord: record("3-4", "1", 1),
	}, {
		name: "a new update revision begins a new record",
		prev: record("3-4", "1", 1),
		member: makeMember(builders.MakeStatefulSet(testNamespace, "zone-a").Replicas(5).OnDelete().Revision("r3").CurrentRevision(oldRev).Obj()).
			Pods(back(0, newRev), back(1, newRev), back(2, newRev), back(3, newRev), back(4, newRev)),
		wantRecord: &v1alpha1.LeakRecord{Member: "zone-a", Revision: "r3", Since: metav1.NewTime(testNow), Ordinals: "0-4"},
	}, {
		name: "a RollingUpdate member cannot leak: no record",
		prev: record("", "", 0),
		member: makeMember(builders.MakeStatefulSet(testNamespace, "zone-a").Replicas(5).RollingUpdate().Partition(3).Revision(newRev).CurrentRevision(oldRev).Obj()).
			Pods(readyPods("zone-a", oldRev, 0, 1, 2), back(3, newRev), back(4, newRev)),
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := group(tt.member)
			plan := Decide(in)
			rec, leaks := TrackLeaks(tt.prev, in.Members[0], &plan.Members[0], testNow)
			var names []string
			for _, l := range leaks {
				names = append(names, l.Pod.Name)
				if l.Revision != plan.Members[0].UpdateRevision || l.Member != "zone-a" {
					t.Errorf("leak %+v: want member zone-a, revision %s", l, plan.Members[0].UpdateRevision)
				}
			}
			if strings.Join(names, ",") != strings.Join(tt.wantLeaks, ",") {
				t.Errorf("leaks = %v, want %v", names, tt.wantLeaks)
			}
			if !equalRecords(rec, tt.wantRecord) {
				t.Errorf("record = %+v, want %+v", rec, tt.wantRecord)
			}
		})
	}
}

func equalRecords(a, b *v1alpha1.LeakRecord) bool {
	ja, _ := json.Marshal(a)
	jb, _ := json.Marshal(b)
	return string(ja) == string(jb)
}

// TestTrackLeaksAfterRestart: a record written to the API and read back (its
// time in whole seconds) judges the pods as the one in memory did, so that a
// new operator process neither misses nor repeats a leak.
func TestTrackLeaksAfterRestart(t *testing.T) {
	began := testNow.Add(-time.Minute + 300*time.Millisecond)
	m := makeMember(onDeleteSTS("zone-a", 3).Obj()).Pods(readyPods("zone-a", oldRev, 0, 1, 2)).Obj()
	in := group(makeMember(m.StatefulSet).Pods(m.Pods))
	plan := Decide(in)
	rec, _ := TrackLeaks(nil, in.Members[0], &plan.Members[0], began)
	rec, changed := RecordRemovals(rec, in.Members[0], &plan.Members[0], plan.Delete, began)
	if !changed || rec.Removed != "2" {
		t.Fatalf("RecordRemovals = %+v, %v; want ordinal 2 removed", rec, changed)
	}
	raw, err := json.Marshal(rec)
	if err != nil {
		t.Fatal(err)
	}
	var read v1alpha1.LeakRecord
	if err := json.Unmarshal(raw, &read); err != nil {
		t.Fatal(err)
	}
	// Echelon's pod 2 is back on the update revision in the second the record
	// began; pod 0 leaked a moment later.
	later := makeMember(m.StatefulSet).Pods(readyPods("zone-a", oldRev, 1),
		builders.MakePod(testNamespace, "zone-a", 2).Revision(newRev).Created(began.Add(100*time.Millisecond)).Obj(),
		builders.MakePod(testNamespace, "zone-a", 0).Revision(newRev).Created(began.Add(200*time.Millisecond)).Obj())
	in = group(later)
	plan = Decide(in)
	for _, prev := range []*v1alpha1.LeakRecord{rec, &read} {
		got, leaks := TrackLeaks(prev, in.Members[0], &plan.Members[0], testNow)
		if len(leaks) != 1 || leaks[0].Pod.Name != "zone-a-0" || got.Leaked != "0" || got.LeakedPods != 1 {
			t.Errorf("from %+v: leaks %v, record %+v; want zone-a-0 leaked", prev, leaks, got)
		}
	}
	if again, changed := RecordRemovals(rec, in.Members[0], &plan.Members[0], plan.Delete[:0], testNow); changed || again != rec {
		t.Errorf("RecordRemovals of nothing new changed the record: %+v", again)
	}
}
