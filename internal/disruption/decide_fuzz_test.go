package disruption

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/fuzzinput"
)

// FuzzDecide plays a world of zones whose pods are taken only by decisions
// of Decide, as the callers make them (package budget): several requesters
// at once, each reading the record of intents live and the pods live or from
// a cache up to maxLag old, deciding, then writing the record with an
// optimistic lock (a write on an older record fails); the holder then acts
// before ActDeadline or, crashed, never; pods terminate, go, come back as
// new pods and become available, in any order the input picks. After every
// step it checks, on the world itself rather than on any view, what
// docs/safety.md promises: at most one zone has pods disrupted, and no zone
// has more of its wanted pods unavailable than its maxUnavailable. Some
// worlds have two groups sharing one budget: their StatefulSets of a failure
// domain go down together, and two domains never do.
func FuzzDecide(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("printable bytes make another world: zones, requests, acts, crashes and pods coming back"))
	rng := rand.New(rand.NewPCG(1, 2))
	for range 300 {
		seed := make([]byte, 32+rng.IntN(400))
		for i := range seed {
			seed[i] = byte(rng.UintN(256))
		}
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzinput.New(data)
		w := newSimWorld(b)
		for step := 0; step < 400 && !b.Empty(); step++ {
			w.step(b)
			if err := w.check(); err != nil {
				t.Fatalf("step %d: %v\n%s", step, err, strings.Join(w.log, "\n"))
			}
		}
	})
}

// maxLag is how old a cached view of the pods may be; below expiryMargin.
const maxLag = 5 * time.Second

type simState int

const (
	simAvailable simState = iota
	simTerminating
	simMissing
	simStarting
)

type simPod struct {
	gen     int
	state   simState
	created time.Time
	since   time.Time
	// leaving: above the zone's replicas after a downscale.
	leaving bool
}

type simZone struct {
	name     string
	domain   string
	group    string
	replicas int
	max      int32
	pods     map[int]*simPod
}

func (z *simZone) podName(ord int) string { return fmt.Sprintf("%s-%d", z.name, ord) }

func (z *simZone) uid(ord int) types.UID {
	return types.UID(fmt.Sprintf("%s/%d", z.podName(ord), z.pods[ord].gen))
}

// simDecision is a request decided and not yet written, or written and not
// yet acted on.
type simDecision struct {
	req     Request
	read    int // the record's version it was decided on
	verdict Verdict
	written bool
	crashed bool
}

type simWorld struct {
	now       time.Time
	zones     []*simZone
	record    []Intent
	version   int
	writtenAt time.Time
	snapshots []simSnapshot
	inFlight  []*simDecision
	log       []string
}

type simSnapshot struct {
	at    time.Time
	zones []Zone
}

func newSimWorld(b *fuzzinput.Bytes) *simWorld {
	w := &simWorld{now: testNow}
	domains, groups := 2+b.Intn(3), 1+b.Intn(2)
	for g := range groups {
		for i := range domains {
			z := &simZone{name: fmt.Sprintf("zone-%c", 'a'+i), replicas: 1 + b.Intn(5), max: int32(b.Intn(3)), pods: map[int]*simPod{}}
			if groups > 1 {
				z.domain, z.group = z.name, fmt.Sprintf("g%d", g)
				z.name = z.group + "-" + z.name
			}
			for ord := range z.replicas {
				z.pods[ord] = &simPod{created: testNow.Add(-time.Hour), since: testNow.Add(-time.Hour)}
			}
			w.zones = append(w.zones, z)
		}
	}
	w.snapshot()
	return w
}

// view is the world's pods as ZoneOf would show them now.
func (w *simWorld) view() []Zone {
	var out []Zone
	for _, z := range w.zones {
		vz := Zone{Name: z.name, Domain: z.domain, Group: z.group, Replicas: int32(z.replicas), MaxUnavailable: z.max}
		for _, ord := range slices.Sorted(maps.Keys(z.pods)) {
			p := z.pods[ord]
			vp := Pod{Name: z.podName(ord), Wanted: !p.leaving, Created: p.created}
			switch p.state {
			case simMissing:
				vp.Missing = true
			case simTerminating:
				vp.UID, vp.Terminating = z.uid(ord), true
			case simStarting:
				vp.UID = z.uid(ord)
			case simAvailable:
				vp.UID, vp.Available, vp.AvailableSince = z.uid(ord), true, p.since
			}
			if p.state != simMissing {
				vz.StatusReplicas++
				if p.state == simAvailable {
					vz.StatusReady++
				}
			}
			vz.Pods = append(vz.Pods, vp)
		}
		out = append(out, vz)
	}
	return out
}

func (w *simWorld) snapshot() {
	w.snapshots = append(w.snapshots, simSnapshot{at: w.now, zones: w.view()})
}

// viewAged is the latest snapshot at least lag old (the oldest when none
// is), never older than maxLag.
func (w *simWorld) viewAged(lag time.Duration) []Zone {
	for i := len(w.snapshots) - 1; i >= 0; i-- {
		s := w.snapshots[i]
		if !s.at.After(w.now.Add(-lag)) || i == 0 || w.snapshots[i-1].at.Before(w.now.Add(-maxLag)) {
			return s.zones
		}
	}
	return w.view()
}

func (w *simWorld) logf(format string, args ...any) {
	w.log = append(w.log, fmt.Sprintf("%s ", w.now.Sub(testNow))+fmt.Sprintf(format, args...))
}

func (w *simWorld) step(b *fuzzinput.Bytes) {
	switch b.Intn(8) {
	case 7:
		w.release(b)
	case 0:
		w.now = w.now.Add(time.Duration(b.Intn(16)) * 500 * time.Millisecond)
	case 1:
		w.request(b)
	case 2:
		if d := w.pick(b, false); d != nil {
			w.write(d)
		}
	case 3:
		if d := w.pick(b, true); d != nil {
			w.act(d)
		}
	case 4:
		if d := w.pick(b, true); d != nil && b.Rare(3) {
			d.crashed = true
			w.logf("holder of %s crashed", d.req.Holder)
		}
	default:
		w.progress(b)
	}
	w.snapshot()
}

// request decides a new request on the record as read now and the pods
// now or from a cache.
func (w *simWorld) request(b *fuzzinput.Bytes) {
	z := w.zones[b.Intn(len(w.zones))]
	reason := []v1alpha1.DisruptionReason{v1alpha1.DisruptionEviction, v1alpha1.DisruptionRollout, v1alpha1.DisruptionDownscale}[b.Intn(3)]
	req := Request{Zone: z.name, Reason: reason}
	switch reason {
	case v1alpha1.DisruptionDownscale:
		if z.replicas <= 1 {
			return
		}
		req.Pods = []string{z.podName(z.replicas - 1)}
	default:
		for range 1 + b.Intn(2) {
			if name := z.podName(b.Intn(z.replicas)); !slices.Contains(req.Pods, name) {
				req.Pods = append(req.Pods, name)
			}
		}
	}
	req.Holder = fmt.Sprintf("%s of %s #%d", reason, strings.Join(req.Pods, ","), len(w.log))
	if reason == v1alpha1.DisruptionRollout && b.Rare(2) {
		// A reservation: the rest of the zone after the batch, highest
		// ordinal first, as a partition releases it.
		for ord := z.replicas - 1; ord >= 0; ord-- {
			if name := z.podName(ord); !slices.Contains(req.Pods, name) {
				req.Then = append(req.Then, name)
			}
		}
		req.Holder = fmt.Sprintf("reservation of %s #%d", z.name, len(w.log))
	}
	zones := w.view()
	if b.Rare(2) {
		zones = w.viewAged(time.Duration(b.Intn(11)) * 500 * time.Millisecond)
	}
	v := View{Now: w.now, Zones: zones, Intents: slices.Clone(w.record)}
	d := &simDecision{req: req, read: w.version, verdict: Decide(v, req)}
	w.logf("%s decided on record v%d: allowed=%v %s", req.Holder, w.version, d.verdict.Allowed, d.verdict.Message)
	if d.verdict.Allowed {
		w.inFlight = append(w.inFlight, d)
	}
}

// release lets the next pods of a recorded reservation go with no write,
// as the rollout does for a partition's next slot: decided on the record
// read now and the pods live or from a cache no older than the record's
// last write (a cache that does not show the record waits for it), acted
// on later or never.
func (w *simWorld) release(b *fuzzinput.Bytes) {
	var reservations []Intent
	for _, in := range w.record {
		if in.MaxAtOnce > 0 {
			reservations = append(reservations, in)
		}
	}
	if len(reservations) == 0 {
		return
	}
	r := reservations[b.Intn(len(reservations))]
	zones := w.view()
	if b.Rare(2) {
		zones = w.viewAged(min(time.Duration(b.Intn(11))*500*time.Millisecond, w.now.Sub(w.writtenAt)))
	}
	v := View{Now: w.now, Zones: zones, Intents: slices.Clone(w.record)}
	zone := zoneOrNil(v, r.Zone)
	req := Request{Zone: r.Zone, Reason: r.Reason, Holder: r.Holder}
	for _, p := range counted(&r, zone, w.now) {
		if len(req.Pods) < 1+b.Intn(2) {
			req.Pods = append(req.Pods, p.Name)
		}
	}
	if b.Rare(4) {
		// A holder that asks past what its reservation counts.
		req.Pods = append(req.Pods, r.Pods[b.Intn(len(r.Pods))].Name)
	}
	d := &simDecision{req: req, read: w.version, verdict: Reserved(v, req), written: true}
	w.logf("%s releases %v on record v%d: allowed=%v %s", req.Holder, req.Pods, w.version, d.verdict.Allowed, d.verdict.Message)
	if d.verdict.Allowed {
		w.inFlight = append(w.inFlight, d)
	}
}

func (w *simWorld) pick(b *fuzzinput.Bytes, written bool) *simDecision {
	var candidates []*simDecision
	for _, d := range w.inFlight {
		if d.written == written && !d.crashed {
			candidates = append(candidates, d)
		}
	}
	if len(candidates) == 0 {
		return nil
	}
	return candidates[b.Intn(len(candidates))]
}

// write records an allowed decision with an optimistic lock.
func (w *simWorld) write(d *simDecision) {
	if d.read != w.version {
		w.logf("%s: conflict (read v%d, now v%d), dropped", d.req.Holder, d.read, w.version)
		w.drop(d)
		return
	}
	// The API keeps whole seconds.
	w.record = IntentsOf(RecordOf(d.verdict.Record))
	w.version++
	w.writtenAt = w.now
	d.written = true
	w.logf("%s recorded as v%d", d.req.Holder, w.version)
}

func (w *simWorld) drop(d *simDecision) {
	w.inFlight = slices.DeleteFunc(w.inFlight, func(o *simDecision) bool { return o == d })
}

// act carries out a recorded decision, before its deadline or not at all.
func (w *simWorld) act(d *simDecision) {
	w.drop(d)
	if !w.now.Before(ActDeadline(d.verdict.Intent.Decided)) {
		w.logf("%s: past its deadline, not acted on", d.req.Holder)
		return
	}
	z := w.zone(d.req.Zone)
	for _, name := range d.req.Pods {
		ord := ordinalOf(name)
		p := z.pods[ord]
		if p == nil || p.state == simMissing || p.state == simTerminating {
			continue
		}
		if i := slices.IndexFunc(d.verdict.Intent.Pods, func(ip IntentPod) bool { return ip.Name == name }); i < 0 || d.verdict.Intent.Pods[i].UID != z.uid(ord) {
			continue // the UID precondition: another pod by now
		}
		if d.req.Reason == v1alpha1.DisruptionDownscale {
			if ord != z.replicas-1 {
				continue
			}
			z.replicas--
			p.leaving = true
		}
		p.state = simTerminating
	}
	w.logf("%s acted", d.req.Holder)
}

func ordinalOf(name string) int {
	ord, _ := strconv.Atoi(name[strings.LastIndex(name, "-")+1:])
	return ord
}

func (w *simWorld) zone(name string) *simZone {
	for _, z := range w.zones {
		if z.name == name {
			return z
		}
	}
	return nil
}

// progress moves one pod on: terminating to gone, gone to a new pod
// starting, starting to available.
func (w *simWorld) progress(b *fuzzinput.Bytes) {
	z := w.zones[b.Intn(len(w.zones))]
	ords := slices.Sorted(maps.Keys(z.pods))
	ord := ords[b.Intn(len(ords))]
	p := z.pods[ord]
	switch p.state {
	case simTerminating:
		if p.leaving {
			delete(z.pods, ord)
			return
		}
		p.state = simMissing
	case simMissing:
		p.state, p.gen, p.created = simStarting, p.gen+1, w.now
	case simStarting:
		p.state, p.since = simAvailable, w.now
	}
}

// check is the guarantees, on the world: disrupted counts failure domains.
func (w *simWorld) check() error {
	var disrupted []string
	for _, z := range w.zones {
		var unavailable int32
		down := false
		for _, p := range z.pods {
			if p.state != simAvailable || p.leaving {
				down = true
			}
			if p.state != simAvailable && !p.leaving {
				unavailable++
			}
		}
		if name := cmp.Or(z.domain, z.name); down && !slices.Contains(disrupted, name) {
			disrupted = append(disrupted, name)
		}
		if unavailable > z.max {
			return fmt.Errorf("zone %s has %d wanted pods unavailable, maxUnavailable %d", z.name, unavailable, z.max)
		}
	}
	if len(disrupted) > 1 {
		slices.Sort(disrupted)
		return fmt.Errorf("zones %s are disrupted at once", strings.Join(disrupted, ", "))
	}
	return nil
}
