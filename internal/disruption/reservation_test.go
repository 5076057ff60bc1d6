package disruption

import (
	"slices"
	"testing"
	"time"
)

// reservationOf is the reservation Decide records for a partition batch of
// zone-a's pods 5 and 4 (of 6, maxUnavailable 2), the rest to follow.
func reservationOf(t *testing.T, zone Zone) Intent {
	t.Helper()
	v := View{Now: testNow, Zones: []Zone{zone, makeZone("zone-b", 6).Max(2).Obj()}}
	got := Decide(v, Request{Zone: "zone-a", Reason: rollout, Holder: "rg", Pods: []string{"zone-a-5", "zone-a-4"},
		Then: []string{"zone-a-3", "zone-a-2", "zone-a-1", "zone-a-0"}})
	if !got.Allowed {
		t.Fatalf("the reservation was refused: %s", got.Message)
	}
	return got.Intent
}

func names(pods []IntentPod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestReservationRecordsTheZoneInOrder(t *testing.T) {
	in := reservationOf(t, makeZone("zone-a", 6).Max(2).Obj())
	if want := []string{"zone-a-5", "zone-a-4", "zone-a-3", "zone-a-2", "zone-a-1", "zone-a-0"}; !slices.Equal(names(in.Pods), want) {
		t.Errorf("pods %v, want %v", names(in.Pods), want)
	}
	if in.MaxAtOnce != 2 {
		t.Errorf("maxAtOnce %d, want 2 (the batch of two, nothing else unavailable)", in.MaxAtOnce)
	}
	// A pod already unavailable keeps its slot: the zone stays where the
	// batch leaves it.
	in = reservationOf(t, makeZone("zone-a", 6).Max(3).NotAvailable(0).Obj())
	if in.MaxAtOnce != 3 {
		t.Errorf("maxAtOnce %d, want 3 (one unavailable and the batch of two)", in.MaxAtOnce)
	}
}

// TestReservationSpendsTheZone: between two slots, with every pod of the
// zone available again, the reservation still counts maxAtOnce of its pods:
// an eviction in the zone and one in another zone are refused, and the
// holder's next pods are covered.
func TestReservationSpendsTheZone(t *testing.T) {
	in := reservationOf(t, makeZone("zone-a", 6).Max(2).Obj())
	// Pods 5 and 4 were replaced and are available: the zone looks whole.
	zoneA := makeZone("zone-a", 6).Max(2).Replaced(5).Replaced(4).CreatedAt(5, testNow.Add(time.Second)).CreatedAt(4, testNow.Add(time.Second)).Obj()
	v := View{Now: testNow.Add(5 * time.Second), Zones: []Zone{zoneA, makeZone("zone-b", 6).Max(2).Obj()}, Intents: []Intent{in}}
	for _, req := range []Request{
		{Zone: "zone-a", Reason: eviction, Pods: []string{"zone-a-0"}, Holder: "drain"},
		{Zone: "zone-b", Reason: eviction, Pods: []string{"zone-b-0"}, Holder: "drain"},
		{Zone: "zone-b", Reason: rollout, Pods: []string{"zone-b-5"}, Holder: "other"},
	} {
		if got := Decide(v, req); got.Allowed {
			t.Errorf("%s of %v allowed beside the reservation", req.Reason, req.Pods)
		}
	}
	next := Request{Zone: "zone-a", Reason: rollout, Holder: "rg", Pods: []string{"zone-a-3", "zone-a-2"}}
	got := Reserved(v, next)
	if !got.Allowed || got.Record != nil || !got.Intent.Decided.Equal(in.Decided) {
		t.Fatalf("the next two pods: allowed=%v record=%v intent decided %v (%s), want allowed under the reservation with no record", got.Allowed, got.Record, got.Intent.Decided, got.Message)
	}
	// Three pods would be one over what it counts.
	next.Pods = append(next.Pods, "zone-a-1")
	if got := Reserved(v, next); got.Allowed {
		t.Errorf("three pods covered by a reservation of two at once")
	}
	// Another holder's request is not covered.
	if _, ok := Covers(v, Request{Zone: "zone-a", Reason: rollout, Holder: "someone", Pods: []string{"zone-a-3"}}); ok {
		t.Errorf("another holder is covered by rg's reservation")
	}
}

// TestReservationCountsWhatTheZoneShows: a released pod no view shows going
// is among those counted; once shown going, the zone counts it, and the
// reservation one pod fewer.
func TestReservationCountsWhatTheZoneShows(t *testing.T) {
	in := reservationOf(t, makeZone("zone-a", 6).Max(2).Obj())
	for _, tc := range []struct {
		name string
		zone Zone
		want []string
	}{
		{"nothing shown going", makeZone("zone-a", 6).Max(2).Obj(), []string{"zone-a-5", "zone-a-4"}},
		{"one terminating", makeZone("zone-a", 6).Max(2).Terminating(5).Obj(), []string{"zone-a-4"}},
		{"both going", makeZone("zone-a", 6).Max(2).Terminating(5).Missing(4).Obj(), nil},
		{"past maxAtOnce (three down, two of them not the reservation's)", makeZone("zone-a", 6).Max(3).Terminating(5).NotAvailable(1).NotAvailable(0).Obj(), nil},
		{"both back, another pod down", makeZone("zone-a", 6).Max(2).Replaced(5).Replaced(4).CreatedAt(5, testNow.Add(time.Second)).CreatedAt(4, testNow.Add(time.Second)).NotAvailable(0).Obj(), []string{"zone-a-3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zone := tc.zone
			if got := names(counted(&in, &zone, testNow.Add(2*time.Second))); !slices.Equal(got, tc.want) {
				t.Errorf("counted %v, want %v", got, tc.want)
			}
		})
	}
}

// TestReservationWindow: past its act window less the margin a holder needs
// to act, a reservation covers nothing (the holder records a new one,
// which replaces it).
func TestReservationWindow(t *testing.T) {
	in := reservationOf(t, makeZone("zone-a", 6).Max(2).Obj())
	zoneA := makeZone("zone-a", 6).Max(2).Replaced(5).CreatedAt(5, testNow.Add(time.Second)).Terminating(4).Obj()
	req := Request{Zone: "zone-a", Reason: rollout, Holder: "rg", Pods: []string{"zone-a-3"}}
	for _, tc := range []struct {
		after time.Duration
		want  bool
	}{{time.Second, true}, {ActWindow - reserveActMargin - time.Second, true}, {ActWindow - reserveActMargin, false}, {ActWindow + time.Minute, false}} {
		v := View{Now: testNow.Add(tc.after), Zones: []Zone{zoneA, makeZone("zone-b", 6).Max(2).Obj()}, Intents: []Intent{in}}
		if _, ok := Covers(v, req); ok != tc.want {
			t.Errorf("%s after: covered %v, want %v", tc.after, ok, tc.want)
		}
	}
	// A new reservation of the rest replaces it in the record.
	v := View{Now: testNow.Add(25 * time.Second), Zones: []Zone{zoneA, makeZone("zone-b", 6).Max(2).Obj()}, Intents: []Intent{in}}
	got := Decide(v, Request{Zone: "zone-a", Reason: rollout, Holder: "rg", Pods: []string{"zone-a-3"}, Then: []string{"zone-a-2", "zone-a-1", "zone-a-0"}})
	if !got.Allowed || len(got.Record) != 1 || !got.Record[0].Decided.Equal(v.Now) || got.Record[0].MaxAtOnce != 2 {
		t.Fatalf("renewal: allowed=%v record=%+v (%s), want the new reservation alone, maxAtOnce 2", got.Allowed, got.Record, got.Message)
	}
}

// TestReservationLeavesOthersTheirPods: a reservation never absorbs a pod
// that another decision let go; it fits in what is left of the budget.
func TestReservationLeavesOthersTheirPods(t *testing.T) {
	evicted := Intent{Zone: "zone-a", Reason: eviction, Holder: "drain", Decided: testNow, Expires: testNow.Add(ActWindow + expiryMargin),
		Pods: []IntentPod{{Name: "zone-a-0", UID: uidOf("zone-a-0")}}}
	v := View{Now: testNow, Zones: []Zone{makeZone("zone-a", 6).Max(2).Obj(), makeZone("zone-b", 6).Max(2).Obj()}, Intents: []Intent{evicted}}
	req := Request{Zone: "zone-a", Reason: rollout, Holder: "rg", Pods: []string{"zone-a-5", "zone-a-4"}, Then: []string{"zone-a-3", "zone-a-2", "zone-a-1", "zone-a-0"}}
	if got := Decide(v, req); got.Allowed {
		t.Fatalf("a batch of two allowed beside an eviction not seen going, maxUnavailable 2")
	}
	req.Pods = req.Pods[:1]
	got := Decide(v, req)
	if !got.Allowed || got.Intent.MaxAtOnce != 1 || len(got.Record) != 2 {
		t.Fatalf("a batch of one: allowed=%v maxAtOnce=%d record of %d (%s), want allowed, 1, the eviction kept", got.Allowed, got.Intent.MaxAtOnce, len(got.Record), got.Message)
	}
}
