package resize

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/fuzzinput"
	"github.com/echelon-operator/echelon/test/builders"
)

// FuzzResize plays a three-zone group whose volumes grow while a drain
// evicts pods: the operator's passes (Decide, its holds and restarts asked
// of disruption.Decide and recorded at once), a storage driver that grows
// claims online or leaves them FileSystemResizePending, kubelets that
// restart pods (a mount grows a pending filesystem), the garbage collector
// finishing an orphaning delete, and evictions asked of disruption.Decide,
// in any order the input picks. After every step it checks, on the world:
// at most one zone has pods unavailable, none above its maxUnavailable; the
// resize touches a zone only while the budget holds it and every zone
// before it is done; nothing is touched while a class cannot expand; and
// no pod is deleted but by a restart or an eviction the budget allowed.
func FuzzResize(f *testing.F) {
	f.Add([]byte{})
	fuzzinput.AddRandomSeeds(f, 3, 4, 200, 64, 600)
	f.Fuzz(func(t *testing.T, data []byte) {
		b := fuzzinput.New(data)
		w := newSim(b)
		for step := 0; step < 500 && !b.Empty(); step++ {
			if err := w.play(b); err != nil {
				t.Fatalf("step %d: %v\n%s", step, err, strings.Join(w.log, "\n"))
			}
		}
	})
}

const holder = "RolloutGroup g (volume resize)"

type simPod struct {
	uid         int
	created     time.Time
	ready, term bool
	gone        bool
}

type simClaim struct {
	requested, capacity int64 // Gi
	offline             bool
	pendingSince        time.Time
	pending             bool
}

type simZone struct {
	name     string
	replicas int
	max      int32
	sts      *appsv1.StatefulSet // nil: deleted
	deleting bool
	pods     []simPod
	claims   []simClaim
	class    string
}

type sim struct {
	now     time.Time
	zones   []*simZone
	intents []disruption.Intent
	status  *v1alpha1.VolumeResizeStatus
	uids    int
	slow    bool
	log     []string
}

func newSim(b *fuzzinput.Bytes) *sim {
	w := &sim{now: testNow, slow: b.Rare(8)}
	for i, name := range []string{"a", "b", "c"} {
		z := &simZone{name: name, replicas: 2 + b.Intn(3), max: int32(1 + b.Intn(2)), class: "fast"}
		if w.slow && i == 2 {
			z.class = "slow"
		}
		z.sts = builders.MakeStatefulSet(ns, name).VolumeClaimTemplate("data", "10Gi", z.class).UID(types.UID("uid-" + name)).Obj()
		for range z.replicas {
			w.uids++
			z.pods = append(z.pods, simPod{uid: w.uids, created: w.now.Add(-time.Hour), ready: true})
		}
		for range z.replicas + b.Intn(2) {
			z.claims = append(z.claims, simClaim{requested: 10, capacity: 10, offline: b.Intn(2) == 0})
		}
		w.zones = append(w.zones, z)
	}
	return w
}

func (w *sim) logf(format string, args ...any) {
	w.log = append(w.log, w.now.Format("15:04:05")+" "+fmt.Sprintf(format, args...))
}

func (w *sim) input() Input {
	in := Input{Now: w.now, Sizes: newWorld(1, 1).in.Sizes, Expandable: map[string]bool{"fast": true, "slow": false}, Status: w.status}
	for _, z := range w.zones {
		zi := Zone{Name: z.name, StatefulSet: z.sts, Pods: map[string]Pod{}, MaxUnavailable: z.max}
		for i, c := range z.claims {
			zi.Claims = append(zi.Claims, Claim{Name: fmt.Sprintf("data-%s-%d", z.name, i), Template: "data", Ordinal: i, Class: z.class,
				Requested: mustQ(fmt.Sprintf("%dGi", c.requested)), Capacity: mustQ(fmt.Sprintf("%dGi", c.capacity)),
				FileSystemResizePending: c.pending, PendingSince: c.pendingSince})
		}
		for i, p := range z.pods {
			if !p.gone {
				name := podName(z.name, i)
				zi.Pods[name] = Pod{Name: name, UID: types.UID(fmt.Sprint(p.uid)), Created: p.created, Ready: p.ready, Terminating: p.term}
			}
		}
		in.Zones = append(in.Zones, zi)
	}
	for _, h := range w.intents {
		if h.IsHold() && h.Holder == holder {
			in.HeldZone, in.HeldUntil = h.Zone, h.Expires
		}
	}
	return in
}

func (w *sim) view() disruption.View {
	v := disruption.View{Now: w.now, Intents: w.intents}
	for _, z := range w.zones {
		dz := disruption.Zone{Name: z.name, Replicas: int32(z.replicas), StatusReplicas: int32(z.replicas), StatusReady: int32(z.replicas), MaxUnavailable: z.max}
		for i, p := range z.pods {
			dp := disruption.Pod{Name: podName(z.name, i), UID: types.UID(fmt.Sprint(p.uid)), Wanted: true, Created: p.created,
				Missing: p.gone, Terminating: p.term, Available: p.ready && !p.term && !p.gone}
			if p.gone {
				dp.UID = ""
			}
			if dp.Available {
				dp.AvailableSince = p.created
			}
			dz.Pods = append(dz.Pods, dp)
		}
		v.Zones = append(v.Zones, dz)
	}
	return v
}

func (w *sim) zone(name string) *simZone {
	i := slices.IndexFunc(w.zones, func(z *simZone) bool { return z.name == name })
	return w.zones[i]
}

func (w *sim) step(b *fuzzinput.Bytes) error {
	w.now = w.now.Add(time.Duration(b.Intn(8)) * time.Second)
	switch b.Intn(6) {
	case 0, 1:
		return w.operator()
	case 2: // the storage driver
		z := w.zones[b.Intn(3)]
		c := &z.claims[b.Intn(len(z.claims))]
		if c.requested > c.capacity && !c.pending {
			if c.offline {
				c.pending, c.pendingSince = true, w.now
			} else {
				c.capacity = c.requested
			}
		}
	case 3: // kubelets and the StatefulSet controller
		z := w.zones[b.Intn(3)]
		i := b.Intn(len(z.pods))
		p := &z.pods[i]
		switch {
		case p.term:
			p.term, p.gone = false, true
		case p.gone && z.sts != nil && !z.deleting:
			w.uids++
			*p = simPod{uid: w.uids, created: w.now}
			if c := &z.claims[i]; c.pending {
				c.pending, c.capacity = false, c.requested
			}
		case !p.gone && !p.ready:
			p.ready = true
		}
	case 4: // the garbage collector ends an orphaning delete
		for _, z := range w.zones {
			if z.deleting {
				z.sts, z.deleting = nil, false
				w.logf("%s: StatefulSet gone, pods orphaned", z.name)
			}
		}
	case 5: // a drain evicts a pod
		z := w.zones[b.Intn(3)]
		i := b.Intn(len(z.pods))
		name := podName(z.name, i)
		v := disruption.Decide(w.view(), disruption.Request{Zone: z.name, Reason: v1alpha1.DisruptionEviction, Pods: []string{name}, Holder: "eviction of " + name})
		if v.Allowed && !z.pods[i].gone && !z.pods[i].term {
			w.intents = v.Record
			z.pods[i].term = true
			w.logf("evicted %s", name)
		}
	}
	return nil
}

// operator is one pass of the controller: plan, then act as it does.
func (w *sim) operator() error {
	in := w.input()
	p := Decide(in)
	w.logf("plan %s %s: %s", p.Action, p.Zone, p.Message)
	if err := w.judge(in, p); err != nil {
		return err
	}
	if p.Status != nil {
		w.status = p.Status
	}
	switch p.Action {
	case ActHold:
		if v := disruption.Decide(w.view(), disruption.Request{Zone: p.Zone, Reason: v1alpha1.DisruptionResize, Holder: holder}); v.Allowed {
			w.intents = v.Record
		}
	case ActPatch:
		for _, c := range p.Claims {
			ord, err := strconv.Atoi(strings.TrimPrefix(c.Name, "data-"+p.Zone+"-"))
			if err != nil {
				return fmt.Errorf("claim %s: %w", c.Name, err)
			}
			w.zone(p.Zone).claims[ord].requested = c.Size.Value() >> 30
		}
	case ActRestart:
		v := disruption.Decide(w.view(), disruption.Request{Zone: p.Zone, Reason: v1alpha1.DisruptionResize, Pods: p.Pods, Holder: holder})
		if v.Allowed {
			w.intents = v.Record
			z := w.zone(p.Zone)
			for _, name := range p.Pods {
				ord, err := strconv.Atoi(strings.TrimPrefix(name, p.Zone+"-"))
				if err != nil {
					return fmt.Errorf("pod %s: %w", name, err)
				}
				z.pods[ord].term = true
			}
		}
	case ActRecord:
		w.status.Recreate = p.Recreate
	case ActDelete:
		w.zone(p.Zone).deleting = true
		w.zone(p.Zone).sts.DeletionTimestamp = nil
	case ActCreate:
		obj := p.RecreateObject.DeepCopy()
		obj.UID = types.UID(fmt.Sprintf("uid-%s-%d", p.Zone, w.now.Unix()))
		w.zone(p.Zone).sts = obj
	case ActComplete:
		w.intents = slices.DeleteFunc(slices.Clone(w.intents), func(in disruption.Intent) bool { return in.IsHold() && in.Holder == holder })
	}
	return nil
}

// judge checks a plan against the input it was made on.
func (w *sim) judge(in Input, p Plan) error {
	touches := p.Action == ActPatch || p.Action == ActRestart || p.Action == ActRecord
	if !touches {
		return nil
	}
	if w.slow {
		return fmt.Errorf("%s of zone %s while a class cannot expand", p.Action, p.Zone)
	}
	if in.HeldZone != p.Zone || !w.now.Before(in.HeldUntil) {
		return fmt.Errorf("%s of zone %s not held (hold of %q until %s)", p.Action, p.Zone, in.HeldZone, in.HeldUntil)
	}
	for _, z := range in.Zones {
		if z.Name == p.Zone {
			break
		}
		if !zoneDone(in, &z) {
			return fmt.Errorf("%s of zone %s before zone %s is done", p.Action, p.Zone, z.Name)
		}
	}
	if p.Action == ActRestart && len(p.Pods) > int(max(in.Zones[slices.IndexFunc(in.Zones, func(z Zone) bool { return z.Name == p.Zone })].MaxUnavailable, 1)) {
		return fmt.Errorf("restart of %v above maxUnavailable", p.Pods)
	}
	return nil
}

// play takes one step, then judges the world.
func (w *sim) play(b *fuzzinput.Bytes) error {
	if err := w.step(b); err != nil {
		return err
	}
	return w.check()
}

// check judges the world: at most one zone disrupted, none above its budget.
func (w *sim) check() error {
	var disrupted []string
	for _, z := range w.zones {
		n := int32(0)
		for _, p := range z.pods {
			if p.gone || p.term || !p.ready {
				n++
			}
		}
		if n > z.max {
			return fmt.Errorf("zone %s has %d pods unavailable, maxUnavailable %d", z.name, n, z.max)
		}
		if n > 0 {
			disrupted = append(disrupted, z.name)
		}
	}
	if len(disrupted) > 1 {
		return fmt.Errorf("zones %v disrupted at once", disrupted)
	}
	return nil
}

// TestResizeCompletes plays the world of FuzzResize with every actor taking
// turns and no eviction: every zone ends resized and replaced, the offline
// claims' pods restarted, and the hold released.
func TestResizeCompletes(t *testing.T) {
	for _, offline := range []byte{0, 1} {
		// Not slow; then each zone's replicas, maxUnavailable and extra
		// claim; then each claim offline (an even byte) or not.
		data := make([]byte, 64)
		for i := range data[1:] {
			data[1+i] = 1 - offline
		}
		w := newSim(fuzzinput.New(data))
		turns := []byte{0, 2, 3, 4}
		rng := rand.New(rand.NewPCG(5, uint64(offline)))
		var script []byte
		for i := range 3000 {
			// clock, actor, then the actor's picks.
			script = append(script, 1, turns[i%len(turns)], byte(rng.UintN(256)), byte(rng.UintN(256)))
		}
		b := fuzzinput.New(script)
		for step := 0; !b.Empty(); step++ {
			if err := w.play(b); err != nil {
				t.Fatalf("step %d: %v\n%s", step, err, strings.Join(w.log, "\n"))
			}
		}
		if w.status == nil || w.status.Phase != v1alpha1.VolumeResizeComplete || slices.ContainsFunc(w.intents, func(in disruption.Intent) bool { return in.IsHold() }) {
			t.Fatalf("offline=%d: not complete: %+v\n%s", offline, w.status, strings.Join(w.log[max(0, len(w.log)-30):], "\n"))
		}
		restarted := slices.ContainsFunc(w.log, func(l string) bool { return strings.Contains(l, "plan Restart") })
		if restarted != (offline == 1) {
			t.Fatalf("offline=%d: restarts planned: %v", offline, restarted)
		}
		for _, z := range w.zones {
			if z.sts == nil || z.sts.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String() != "20Gi" {
				t.Fatalf("zone %s not replaced", z.name)
			}
		}
	}
}
