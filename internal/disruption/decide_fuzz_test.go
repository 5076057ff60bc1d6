package disruption

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/fuzzinput"
)

// FuzzDecide builds random groups from the fuzz input and checks every
// verdict against the oracle in decide_oracle_test.go. It then plays a
// random sequence of requests on the group, acting on each one allowed (its
// pods terminate and come back later, its hold is recorded when Record says
// so) while the decisions read pods up to 7 s stale, as a cache or a
// parallel admission may, and the hold live, as package budget does. It
// checks the guarantees that follow: no two zones are disrupted at once by
// allowed decisions (per partition, for a partition-aware eviction), a zone
// never goes past maxUnavailable through a decision made on a fresh view,
// and a rollout and a downscale never follow each other within half a lease.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{})
	// Three whole zones of three pods, maxUnavailable 1, no hold; an
	// eviction of zone-a-0, then 47 steps.
	f.Add([]byte{2, 0, 0, 0, 0, 3, 1, 0, 0, 0, 0, 0, 0, 3, 1, 0, 0, 0, 0, 0, 0, 3, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 47,
		1, 0, 0, 0, 1, 1, 0, 2, 0, 1, 0, 1, 2, 2, 2, 1, 3, 0, 0, 0, 1, 1, 0, 1, 3, 0, 2, 0, 0, 1, 1, 0, 4, 0, 0, 0, 2, 1, 0})
	f.Add([]byte("printable bytes make another group: a few zones, a hold, pods going and coming back"))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		seed := make([]byte, 16+rng.IntN(200))
		for i := range seed {
			seed[i] = byte(rng.UintN(256))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzinput.New(data)
		w, zones := generateWorld(b)
		checkDecision(t, w, zones, generateRequest(b, w, zones))
		if t.Failed() {
			return
		}
		w.rolloutOpen = "" // the sequence relies on holds alone
		newSequence(w, zones).play(t, b)
	})
}

var (
	reasons = []v1alpha1.DisruptionReason{v1alpha1.DisruptionEviction, v1alpha1.DisruptionRollout, v1alpha1.DisruptionDownscale}
	ago     = []time.Duration{0, time.Second, 5 * time.Second, 7500 * time.Millisecond, 8 * time.Second, 14 * time.Second, 15 * time.Second, time.Minute}
)

func generateWorld(b *fuzzinput.Bytes) (*fuzzWorld, []fuzzZone) {
	w := &fuzzWorld{now: testNow}
	n := 1 + b.Intn(4)
	w.partitions = b.Rare(3)
	unmatched := w.partitions && b.Rare(4) // some pod names give no partition
	w.crossZoneDelay = []time.Duration{0, 0, 10 * time.Second, 30 * time.Second}[b.Intn(4)]
	w.lease = []time.Duration{0, 0, 0, 30 * time.Second}[b.Intn(4)]
	if b.Rare(8) {
		w.rolloutOpen = "zone-a"
	}
	zones := make([]fuzzZone, n)
	for i := range zones {
		z := fuzzZone{name: fmt.Sprintf("zone-%c", 'a'+i), replicas: int32(b.Intn(6)), maxUnavailable: int32(b.Intn(3))}
		leaving := 0
		if b.Rare(4) {
			leaving = 1 + b.Intn(2)
		}
		for ord := range int(z.replicas) + leaving {
			p := fuzzPod{ord: ord}
			if w.partitions && !(unmatched && ord%3 == 2) {
				p.partition = fmt.Sprint(ord)
			}
			switch k := b.Intn(8); k {
			case 4:
				p.state = stNotAvailable
			case 5:
				p.state = stTerminating
			case 6:
				p.state = stMissing
			default:
				p.since = []time.Time{{}, {}, testNow.Add(-5 * time.Second), testNow.Add(-time.Minute)}[k%4]
			}
			if ord >= int(z.replicas) {
				p.state = []podState{stLeaving, stLeavingTerminating}[b.Intn(2)]
			}
			z.pods = append(z.pods, p)
		}
		z.statusAhead, z.statusUnready = b.Rare(8), b.Rare(8)
		zones[i] = z
	}
	if b.Intn(4) > 0 {
		zone := "zone-x" // a zone that left the group
		if i := b.Intn(n + 1); i < n {
			zone = zones[i].name
		}
		w.hold = &Hold{Zone: zone, Reason: reasons[b.Intn(3)], Holder: "holder of " + zone, Since: testNow.Add(-time.Hour),
			Renewed: testNow.Add(-ago[b.Intn(len(ago))]), Lease: []time.Duration{DefaultLease, DefaultLease, 10 * time.Second, time.Second}[b.Intn(4)]}
	}
	return w, zones
}

// generateRequest asks for pods of a zone of the group, now and then of one
// that is not.
func generateRequest(b *fuzzinput.Bytes, w *fuzzWorld, zones []fuzzZone) Request {
	if b.Rare(32) {
		return Request{Zone: "zone-x", Reason: reasons[b.Intn(3)], Pods: []string{"zone-x-0"}, Holder: "fuzz"}
	}
	z := zones[b.Intn(len(zones))]
	req := Request{Zone: z.name, Reason: reasons[b.Intn(3)], Holder: "fuzz " + z.name}
	switch req.Reason {
	case v1alpha1.DisruptionDownscale:
		req.Count = int32(1 + b.Intn(2))
	case v1alpha1.DisruptionEviction:
		if len(z.pods) == 0 || b.Rare(32) {
			req.Pods = []string{z.name + "-99"} // a pod the view does not show
			break
		}
		p := z.pods[b.Intn(len(z.pods))]
		req.Pods = []string{z.podName(p)}
		if w.partitions {
			req.Partition = p.partition
		}
	case v1alpha1.DisruptionRollout:
		for _, i := range rand.New(rand.NewPCG(uint64(b.Next()), 0)).Perm(len(z.pods))[:min(len(z.pods), 1+b.Intn(3))] {
			if !z.pods[i].leaving() {
				req.Pods = append(req.Pods, z.podName(z.pods[i]))
			}
		}
	}
	return req
}

// checkDecision decides req on the view of zones and compares the verdict
// with the oracle's, and with the verdicts on reordered views.
func checkDecision(t *testing.T, w *fuzzWorld, zones []fuzzZone, req Request) Verdict {
	t.Helper()
	view := w.toView(zones)
	got := Decide(view, req)
	if !reflect.DeepEqual(view, w.toView(zones)) {
		t.Fatalf("Decide changed its view\n%s", describe(w, zones, req))
	}
	if err := w.expect(zones, req).check(got); err != nil {
		t.Fatalf("%v\n%s", err, describe(w, zones, req))
	}
	// A list of pods comes in any order; so do the zones, which may change
	// only which zone a refusal names first.
	for i := range view.Zones {
		slices.Reverse(view.Zones[i].Pods)
	}
	if again := Decide(view, req); !reflect.DeepEqual(again, got) {
		t.Fatalf("verdict depends on the order of pods: %+v vs %+v\n%s", again, got, describe(w, zones, req))
	}
	slices.Reverse(view.Zones)
	if again := Decide(view, req); again.Allowed != got.Allowed || again.Code != got.Code || !reflect.DeepEqual(again.Hold, got.Hold) || again.Record != got.Record {
		t.Fatalf("verdict depends on the order of zones: %+v vs %+v\n%s", again, got, describe(w, zones, req))
	}
	return got
}

func describe(w *fuzzWorld, zones []fuzzZone, req Request) string {
	var s strings.Builder
	fmt.Fprintf(&s, "now=%s delay=%v lease=%v rolloutOpen=%q partitions=%v\n", w.now.Format("15:04:05.000"), w.crossZoneDelay, w.lease, w.rolloutOpen, w.partitions)
	if h := w.hold; h != nil {
		fmt.Fprintf(&s, "hold: %s %s %q renewed %v ago, lease %v\n", h.Zone, h.Reason, h.Holder, w.now.Sub(h.Renewed), h.Lease)
	}
	for _, z := range zones {
		fmt.Fprintf(&s, "%s replicas=%d maxUnavailable=%d statusAhead=%v statusUnready=%v:", z.name, z.replicas, z.maxUnavailable, z.statusAhead, z.statusUnready)
		for _, p := range z.pods {
			fmt.Fprintf(&s, " %d:%s", p.ord, p.state)
			if !p.since.IsZero() {
				fmt.Fprintf(&s, "(since -%v)", w.now.Sub(p.since))
			}
			if p.partition != "" {
				fmt.Fprintf(&s, "[p%s]", p.partition)
			}
			if p.taken {
				fmt.Fprintf(&s, "{taken, back in %v}", p.backAt.Sub(w.now))
			}
		}
		s.WriteString("\n")
	}
	fmt.Fprintf(&s, "request: %+v", req)
	return s.String()
}

// sequence is the group's history as decisions act on it.
type sequence struct {
	w     *fuzzWorld
	zones []fuzzZone // as they are now
	// past are the zones as they were after each change, for stale views.
	past []snapshot
	// lastRollout and lastDownscale are when each was last allowed.
	lastRollout, lastDownscale time.Time
	log                        []string
}

type snapshot struct {
	at    time.Time
	zones []fuzzZone
}

func newSequence(w *fuzzWorld, zones []fuzzZone) *sequence {
	s := &sequence{w: w, zones: zones}
	s.remember()
	return s
}

func (s *sequence) remember() {
	zones := make([]fuzzZone, len(s.zones))
	for i, z := range s.zones {
		zones[i] = z.clone()
	}
	s.past = append(s.past, snapshot{at: s.w.now, zones: zones})
}

// at is the zones as a view at time t shows them: after every change made
// at or before t.
func (s *sequence) at(t time.Time) []fuzzZone {
	i := len(s.past) - 1
	for i > 0 && s.past[i].at.After(t) {
		i--
	}
	return s.past[i].zones
}

func (s *sequence) play(t *testing.T, b *fuzzinput.Bytes) {
	steps := b.Intn(48)
	lease := s.w.lease
	if lease == 0 {
		lease = DefaultLease
	}
	for range steps {
		s.w.now = s.w.now.Add([]time.Duration{0, time.Second, 2500 * time.Millisecond, 7 * time.Second, 20 * time.Second}[b.Intn(5)])
		s.comeBack(b)
		s.remember()
		lag := []time.Duration{0, 0, 3 * time.Second, 7 * time.Second}[b.Intn(4)]
		seen := s.at(s.w.now.Add(-lag))
		req := generateRequest(b, s.w, s.zones)
		got := checkDecision(t, s.w, seen, req)
		s.log = append(s.log, fmt.Sprintf("%s lag %v: %s %s %v/%d: allowed=%v record=%v %s", s.w.now.Format("15:04:05.0"), lag,
			req.Reason, req.Zone, req.Pods, req.Count, got.Allowed, got.Record, got.Message))
		if t.Failed() || !got.Allowed {
			continue
		}
		if got.Record {
			s.w.hold = HoldOf(got.Hold.Record()) // as package budget writes it and reads it back
		}
		if err := s.act(b, req, lag == 0, lease); err != nil {
			t.Fatalf("%v\n%s\nsteps:\n%s", err, describe(s.w, s.zones, req), strings.Join(s.log, "\n"))
		}
		s.remember()
	}
}

// comeBack brings back the pods decisions took whose time has come, and
// now and then heals a zone of what it suffered on its own.
func (s *sequence) comeBack(b *fuzzinput.Bytes) {
	heal := -1
	if b.Rare(4) {
		heal = b.Intn(len(s.zones))
	}
	for i := range s.zones {
		z := &s.zones[i]
		z.pods = slices.DeleteFunc(z.pods, func(p fuzzPod) bool {
			return p.leaving() && (p.taken && !s.w.now.Before(p.backAt) || !p.taken && i == heal)
		})
		for j := range z.pods {
			if p := &z.pods[j]; p.state != stAvailable && (p.taken && !s.w.now.Before(p.backAt) || !p.taken && i == heal) {
				*p = fuzzPod{ord: p.ord, partition: p.partition, state: stAvailable, since: s.w.now, gen: p.gen + 1}
			}
		}
		if i == heal {
			z.statusAhead, z.statusUnready = false, false
		}
	}
}

// act applies an allowed request to the zones and checks the guarantees.
func (s *sequence) act(b *fuzzinput.Bytes, req Request, fresh bool, lease time.Duration) error {
	zi := slices.IndexFunc(s.zones, func(z fuzzZone) bool { return z.name == req.Zone })
	z := &s.zones[zi]
	if h := s.w.hold; h == nil || h.Zone != req.Zone || !s.w.now.Before(h.Renewed.Add(h.Lease)) ||
		req.Reason != v1alpha1.DisruptionEviction && h.Reason != req.Reason {
		return fmt.Errorf("allowed %s of %s, but the recorded hold is %+v", req.Reason, req.Zone, h)
	}
	switch req.Reason {
	case v1alpha1.DisruptionRollout:
		if !s.lastDownscale.IsZero() && s.w.now.Sub(s.lastDownscale) < lease/2 {
			return fmt.Errorf("rollout allowed %v after a downscale", s.w.now.Sub(s.lastDownscale))
		}
		s.lastRollout = s.w.now
	case v1alpha1.DisruptionDownscale:
		if !s.lastRollout.IsZero() && s.w.now.Sub(s.lastRollout) < lease/2 {
			return fmt.Errorf("downscale allowed %v after a rollout", s.w.now.Sub(s.lastRollout))
		}
		s.lastDownscale = s.w.now
	}
	down := func() int {
		n := 0
		for _, p := range z.pods {
			if p.state != stAvailable {
				n++
			}
		}
		return n
	}
	before := down()
	backAt := s.w.now.Add([]time.Duration{2 * time.Second, 10 * time.Second, 40 * time.Second}[b.Intn(3)])
	take := func(p *fuzzPod) error {
		// Another zone's pod taken and not back, of this partition for a
		// partition-aware eviction, is two zones disrupted at once.
		partition := ""
		if req.Reason == v1alpha1.DisruptionEviction {
			partition = req.Partition
		}
		for _, other := range s.zones {
			for _, op := range other.pods {
				if other.name != z.name && op.taken && (partition == "" || op.partition == partition) {
					return fmt.Errorf("takes %s while %s, taken by an earlier decision, is not back", z.podName(*p), other.podName(op))
				}
			}
		}
		p.taken, p.backAt = true, backAt
		return nil
	}
	if req.Reason == v1alpha1.DisruptionDownscale {
		keep := max(0, z.replicas-req.Count)
		for j := range z.pods {
			if p := &z.pods[j]; p.ord >= int(keep) && !p.leaving() {
				if err := take(p); err != nil {
					return err
				}
				p.state = stLeavingTerminating
			}
		}
		z.pods = slices.DeleteFunc(z.pods, func(p fuzzPod) bool { return p.state == stMissing && p.ord >= int(keep) })
		z.replicas = keep
		return nil
	}
	for j := range z.pods {
		if p := &z.pods[j]; slices.Contains(req.Pods, z.podName(*p)) && p.state != stMissing && p.state != stTerminating && p.state != stLeavingTerminating {
			if err := take(p); err != nil {
				return err
			}
			p.state = map[bool]podState{false: stTerminating, true: stLeavingTerminating}[p.leaving()]
			p.since = time.Time{}
		}
	}
	if after := down(); fresh && after > max(before, int(z.maxUnavailable)) {
		return fmt.Errorf("%s: %d pods unavailable after a decision on a fresh view (%d before), maxUnavailable %d", z.name, after, before, z.maxUnavailable)
	}
	return nil
}
