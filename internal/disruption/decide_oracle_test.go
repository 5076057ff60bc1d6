package disruption

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// The fuzz test's own model of a group, and an oracle that reads the rules of
// Decide in plain terms from it. The oracle never calls the package's
// helpers (Disrupted, Unavailable, wholeSince, Lapsed, crosses): it restates
// each rule from the model, which Decide sees only through the View.

// podState is what a pod of the model is doing.
type podState int

const (
	stAvailable podState = iota
	stNotAvailable
	stTerminating
	stMissing
	stLeaving            // above the wanted ordinals after a scale-down, still running
	stLeavingTerminating // the same, terminating
)

func (s podState) String() string {
	return [...]string{"available", "not-available", "terminating", "missing", "leaving", "leaving-terminating"}[s]
}

type fuzzPod struct {
	ord   int
	state podState
	// since is when an available pod became available; zero is long ago.
	since     time.Time
	partition string
	// taken is set while a pod a decision took away is not back.
	taken  bool
	backAt time.Time
	// gen counts the pods made under this ordinal: a pod that comes back
	// is another pod, with another UID.
	gen int
}

func (p fuzzPod) leaving() bool { return p.state == stLeaving || p.state == stLeavingTerminating }

type fuzzZone struct {
	name           string
	replicas       int32
	maxUnavailable int32
	pods           []fuzzPod
	// statusAhead: status.replicas counts a pod above spec.replicas that no
	// pod shows; statusUnready: status.readyReplicas is one short.
	statusAhead, statusUnready bool
}

func (z fuzzZone) podName(p fuzzPod) string { return fmt.Sprintf("%s-%d", z.name, p.ord) }

// podUID is the UID of the pod as a view shows it; "" for a missing one.
func (z fuzzZone) podUID(p fuzzPod) types.UID {
	if p.state == stMissing {
		return ""
	}
	return types.UID(fmt.Sprintf("%s/%d", z.podName(p), p.gen))
}

func (z fuzzZone) clone() fuzzZone {
	z.pods = slices.Clone(z.pods)
	return z
}

// fuzzWorld is everything a decision reads but the pods.
type fuzzWorld struct {
	now            time.Time
	hold           *Hold
	crossZoneDelay time.Duration
	rolloutOpen    string
	lease          time.Duration // View.Lease
	partitions     bool
}

// toView renders the model as the View Decide reads.
func (w *fuzzWorld) toView(zones []fuzzZone) View {
	v := View{Now: w.now, Hold: w.hold, CrossZoneDelay: w.crossZoneDelay, RolloutOpen: w.rolloutOpen, Lease: w.lease}
	if w.hold != nil {
		h := *w.hold
		v.Hold = &h
	}
	for _, z := range zones {
		statusReplicas := z.replicas
		if z.statusAhead {
			statusReplicas++
		}
		statusReady := statusReplicas
		if z.statusUnready {
			statusReady--
		}
		vz := Zone{Name: z.name, Replicas: z.replicas, StatusReplicas: statusReplicas, StatusReady: statusReady, MaxUnavailable: z.maxUnavailable}
		for _, p := range z.pods {
			vp := Pod{Name: z.podName(p), UID: z.podUID(p), Wanted: !p.leaving(), Partition: p.partition}
			switch p.state {
			case stAvailable, stLeaving:
				vp.Available, vp.AvailableSince = true, p.since
			case stTerminating, stLeavingTerminating:
				vp.Terminating = true
			case stMissing:
				vp.Missing = true
			}
			vz.Pods = append(vz.Pods, vp)
		}
		v.Zones = append(v.Zones, vz)
	}
	return v
}

// expectation is the oracle's answer.
type expectation struct {
	allowed bool
	code    string
	retry   time.Duration
	// named are zones the message must all name; anyOf, for a cross-zone
	// delay, maps the zones one of which the message names to the
	// RetryAfter that goes with it.
	named  []string
	anyOf  map[string]time.Duration
	hold   Hold
	record bool
}

func refuse(code string, retry time.Duration, named ...string) expectation {
	return expectation{code: code, retry: retry, named: named}
}

// expect answers req in plain terms: the first rule of Decide's doc comment
// that the request breaks gives the code.
func (w *fuzzWorld) expect(zones []fuzzZone, req Request) expectation {
	// 1. The zone is the group's.
	zi := slices.IndexFunc(zones, func(z fuzzZone) bool { return z.name == req.Zone })
	if zi < 0 {
		return refuse(CodeUnknownZone, 0, req.Zone)
	}
	// 2. Downscales wait for an open rollout.
	if req.Reason == v1alpha1.DisruptionDownscale && w.rolloutOpen != "" {
		return refuse(CodeRolloutInProgress, 0, w.rolloutOpen)
	}
	// 2 and 3. A hold stops other zones until renewal+lease, and a rollout
	// and a downscale stop each other in every zone.
	var holdLeft time.Duration
	if w.hold != nil {
		holdLeft = w.hold.Renewed.Add(w.hold.Lease).Sub(w.now)
	}
	if holdLeft > 0 {
		pair := []v1alpha1.DisruptionReason{req.Reason, w.hold.Reason}
		crossing := slices.Contains(pair, v1alpha1.DisruptionRollout) && slices.Contains(pair, v1alpha1.DisruptionDownscale)
		if crossing || w.hold.Zone != req.Zone {
			return refuse(CodeHeldByOtherZone, holdLeft, w.hold.Zone)
		}
	}
	// 4. Every other zone is whole: each pod in scope wanted, present,
	// running and available; zone-wise, its StatefulSet status agrees.
	partition := ""
	if req.Reason == v1alpha1.DisruptionEviction {
		partition = req.Partition
	}
	inScope := func(p fuzzPod) bool { return partition == "" || p.partition == partition }
	var broken []string
	for _, z := range zones {
		if z.name == req.Zone {
			continue
		}
		whole := partition != "" || !(z.statusAhead || z.statusUnready)
		for _, p := range z.pods {
			if inScope(p) && p.state != stAvailable {
				whole = false
			}
		}
		if !whole {
			broken = append(broken, z.name)
		}
	}
	if len(broken) > 0 {
		return refuse(CodeOtherZoneDisrupted, 0, broken...)
	}
	// 5. An eviction waits until every other zone's pods in scope have all
	// been available for crossZoneDelay.
	if req.Reason == v1alpha1.DisruptionEviction && w.crossZoneDelay > 0 {
		waits := map[string]time.Duration{}
		for _, z := range zones {
			if z.name == req.Zone {
				continue
			}
			for _, p := range z.pods {
				if inScope(p) && !p.since.IsZero() {
					if left := p.since.Add(w.crossZoneDelay).Sub(w.now); left > waits[z.name] {
						waits[z.name] = left
					}
				}
			}
		}
		if len(waits) > 0 {
			return expectation{code: CodeCrossZoneDelay, anyOf: waits}
		}
	}
	// 6. A rollout or an eviction keeps the zone within maxUnavailable,
	// counting only requested pods that are available now.
	z := zones[zi]
	// Pods an unlapsed hold of the zone records as evicted count as down,
	// whatever their state: the API server removes them after admission.
	if req.Reason != v1alpha1.DisruptionDownscale {
		var evicted []Evicted
		if holdLeft > 0 && w.hold.Zone == req.Zone {
			evicted = w.hold.Evicted
		}
		stillThere := func(p fuzzPod) bool {
			return slices.ContainsFunc(evicted, func(e Evicted) bool {
				return e.Name == z.podName(p) && (e.UID == "" || e.UID == z.podUID(p))
			})
		}
		down, cost := 0, 0
		for _, p := range z.pods {
			switch {
			case slices.Contains(req.Pods, z.podName(p)):
				if p.state == stAvailable {
					cost++
				} else {
					down++
				}
			case p.state != stAvailable || stillThere(p):
				down++
			}
		}
		if cost > 0 && down+cost > int(z.maxUnavailable) {
			retry := time.Duration(0)
			if slices.ContainsFunc(evicted, func(e Evicted) bool { return !slices.Contains(req.Pods, e.Name) }) {
				retry = holdLeft
			}
			return refuse(CodeZoneBudget, retry, z.name)
		}
	}
	return w.grant(z, req, holdLeft)
}

// grant is the allowed verdict: the hold to record and whether to write it.
func (w *fuzzWorld) grant(z fuzzZone, req Request, holdLeft time.Duration) expectation {
	lease := w.lease
	if lease == 0 {
		lease = 15 * time.Second
	}
	e := expectation{allowed: true, record: true,
		hold: Hold{Zone: req.Zone, Reason: req.Reason, Holder: req.Holder, Since: w.now, Renewed: w.now, Lease: lease}}
	if holdLeft > 0 && w.hold.Zone == req.Zone {
		w.renew(&e, req, holdLeft, lease)
	}
	// An admitted eviction is written with its pod, always.
	if req.Reason == v1alpha1.DisruptionEviction {
		for _, name := range req.Pods {
			var uid types.UID
			for _, p := range z.pods {
				if z.podName(p) == name {
					uid = z.podUID(p)
				}
			}
			e.hold.Evicted = slices.DeleteFunc(e.hold.Evicted, func(old Evicted) bool { return old.Name == name })
			e.hold.Evicted = append(e.hold.Evicted, Evicted{Name: name, UID: uid})
		}
		e.record = true
	}
	return e
}

// renew is grant for a zone that holds the budget already.
func (w *fuzzWorld) renew(e *expectation, req Request, holdLeft, lease time.Duration) {
	// The zone holds the budget already: it keeps the time it took it, an
	// eviction leaves a rollout's or downscale's hold theirs, and the hold is
	// written when its reason changes or at most half of this decision's
	// lease is left of it.
	h := w.hold
	e.hold.Since = h.Since
	if req.Reason == v1alpha1.DisruptionEviction && h.Reason != v1alpha1.DisruptionEviction {
		e.hold.Reason, e.hold.Holder = h.Reason, h.Holder
	}
	e.record = e.hold.Reason != h.Reason || 2*holdLeft <= lease
	e.hold.Evicted = slices.Clone(h.Evicted)
}

// check compares a verdict with the expectation.
func (e expectation) check(got Verdict) error {
	if got.Allowed != e.allowed || got.Code != e.code {
		return fmt.Errorf("Allowed = %v, Code = %q (%s); want %v, %q", got.Allowed, got.Code, got.Message, e.allowed, e.code)
	}
	if e.allowed {
		if got.Message != "" || got.RetryAfter != 0 || !reflect.DeepEqual(got.Hold, e.hold) || got.Record != e.record {
			return fmt.Errorf("allowed with message %q, RetryAfter %v, Hold %+v, Record %v; want Hold %+v, Record %v",
				got.Message, got.RetryAfter, got.Hold, got.Record, e.hold, e.record)
		}
		return nil
	}
	if got.Record || !reflect.DeepEqual(got.Hold, Hold{}) {
		return fmt.Errorf("refused with Record %v, Hold %+v", got.Record, got.Hold)
	}
	for _, zone := range e.named {
		if !strings.Contains(got.Message, zone) {
			return fmt.Errorf("message %q does not name %s", got.Message, zone)
		}
	}
	if e.anyOf != nil {
		for zone, left := range e.anyOf {
			if strings.Contains(got.Message, "zone "+zone+" ") && got.RetryAfter == left {
				return nil
			}
		}
		return fmt.Errorf("CrossZoneDelay %q, RetryAfter %v: want a zone of %v with its wait", got.Message, got.RetryAfter, e.anyOf)
	}
	if got.RetryAfter != e.retry {
		return fmt.Errorf("RetryAfter = %v, want %v (%s)", got.RetryAfter, e.retry, got.Message)
	}
	return nil
}
