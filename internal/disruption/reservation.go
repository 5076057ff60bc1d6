package disruption

import (
	"slices"
	"time"
)

// A reservation is an intent that names every pod its holder will let go
// in a zone, in the order it lets them go, and the most pods of the zone it
// keeps unavailable at once (MaxAtOnce): a RollingUpdate member's partition
// lowered slot by slot as its replaced pods become available. Recorded once,
// it spares each later slot the record's write, the round trip that put a
// partition rollout behind the StatefulSet controller rolling alone.
//
// Every decision counts, of a reservation's pods that no view shows going
// yet, the first MaxAtOnce less the zone's unavailable pods. The zone then
// stays at MaxAtOnce whatever its pods show at any moment: a pod the holder
// just released and no view shows going is among the first it counts (the
// holder releases in the reservation's order); a released pod once shown
// going is among the zone's unavailable pods; a pod another decision let go
// moves from that decision's count into the zone's. Another requester finds
// the zone spent (and, being disrupted or held, so are the other zones to
// it) until the holder has released the last pod and the zone is whole, or
// the holder withdraws the reservation, or it expires.
//
// The holder acts on a reservation without writing only for pods among the
// ones it counts (Covers), so what it takes is what every decision already
// counts, and only while the reservation's act window lasts; a later slot
// records a new reservation, which replaces the old one.

// reserveActMargin is how much of a reservation's act window must be left
// for its holder to act on it without recording a new one: the act (a
// partition write) runs under the window's deadline and must have time to.
const reserveActMargin = 10 * time.Second

// counted is the pods of in that a decision counts as pending at now, in
// zone (nil when the view has no such zone): every pending pod of a plain
// intent; of a reservation, the first MaxAtOnce less the zone's unavailable
// pods.
func counted(in *Intent, zone *Zone, now time.Time) []IntentPod {
	var out []IntentPod
	room := len(in.Pods)
	if in.MaxAtOnce > 0 {
		room = int(in.MaxAtOnce)
		if zone != nil {
			// A zone already past it (an eviction beside a narrower
			// reservation) leaves none.
			room = max(0, room-int(zone.Unavailable()))
		}
	}
	for _, p := range in.Pods {
		if len(out) >= room {
			break
		}
		if fateOf(in, p, zone, now) == fatePending {
			out = append(out, p)
		}
	}
	return out
}

// Covers reports whether req's pods are all among the pods that a
// reservation of req's holder in req's zone counts now, with time left to
// act before its deadline; it returns that reservation. Such a request
// needs no record of its own: Decide on the same view says whether it may
// go now (another zone disrupted meanwhile, a pause), and the act runs
// under the reservation's deadline.
func Covers(v View, req Request) (Intent, bool) {
	if len(req.Pods) == 0 {
		return Intent{}, false
	}
	zone := zoneOrNil(v, req.Zone)
	if zone == nil {
		return Intent{}, false
	}
	for i := len(v.Intents) - 1; i >= 0; i-- {
		in := &v.Intents[i]
		if in.MaxAtOnce == 0 || in.Zone != req.Zone || in.Reason != req.Reason || in.Holder != req.Holder {
			continue
		}
		if !v.Now.Before(ActDeadline(in.Decided).Add(-reserveActMargin)) {
			return Intent{}, false
		}
		names := make([]string, 0, in.MaxAtOnce)
		for _, p := range counted(in, zone, v.Now) {
			names = append(names, p.Name)
		}
		for _, name := range req.Pods {
			if !slices.Contains(names, name) {
				return Intent{}, false
			}
		}
		return *in, true
	}
	return Intent{}, false
}

// Reserved is Decide for a request the holder's reservation covers
// (Covers): the verdict carries that reservation as its intent, to fence
// the act by, and no record to write.
func Reserved(v View, req Request) Verdict {
	in, ok := Covers(v, req)
	if !ok {
		return deny(CodeZoneBudget, "no reservation of "+orSomeone(req.Holder)+" covers the pods", 0)
	}
	verdict := Decide(v, req)
	if verdict.Allowed {
		verdict.Intent, verdict.Record = in, nil
	}
	return verdict
}

// replaces reports whether the new reservation next takes the place of the
// recorded intent old: old is a reservation of the same holder, zone and
// reason, and every pod of it still pending is one next names.
func replaces(next, old *Intent, zone *Zone, now time.Time) bool {
	if next.MaxAtOnce == 0 || old.MaxAtOnce == 0 || old.Zone != next.Zone || old.Reason != next.Reason || old.Holder != next.Holder {
		return false
	}
	for _, p := range old.Pods {
		if fateOf(old, p, zone, now) == fatePending && !slices.ContainsFunc(next.Pods, func(n IntentPod) bool { return n.Name == p.Name }) {
			return false
		}
	}
	return true
}

// reservedAtOnce is the MaxAtOnce of the reservation req asks for (0 when
// it asks for none, or the zone has no room for one): the zone stays where
// the batch leaves it, and never above its budget less the pods other
// decisions let go that no view shows going yet.
func reservedAtOnce(v View, zone *Zone, req Request) int32 {
	if len(req.Then) == 0 {
		return 0
	}
	return max(0, min(zone.Unavailable()+costOf(zone, req.Pods), zone.MaxUnavailable-int32(othersPending(v, zone, req))))
}

// othersPending counts the zone's pods that recorded intents let go, that
// no view shows going yet, and that req does not take again: a pod req
// names in Pods is costed as requested, and one a reservation of req's
// holder counts, which req's reservation replaces (replaces), is counted
// by req's instead.
func othersPending(v View, zone *Zone, req Request) int {
	names := slices.Concat(req.Pods, req.Then)
	next := Intent{Zone: req.Zone, Reason: req.Reason, Holder: req.Holder, MaxAtOnce: 1}
	for _, name := range names {
		next.Pods = append(next.Pods, IntentPod{Name: name})
	}
	pending := map[string]bool{}
	for i := range v.Intents {
		in := &v.Intents[i]
		if in.Zone != zone.Name || (len(req.Then) > 0 && replaces(&next, in, zone, v.Now)) {
			continue
		}
		for _, p := range counted(in, zone, v.Now) {
			if !slices.Contains(req.Pods, p.Name) {
				pending[p.Name] = true
			}
		}
	}
	return len(pending)
}

// Untouched names the pods of in that v shows untouched and that have not
// expired: what its holder withdraws when it stops releasing them (a
// pause, a gate, another zone disrupted), so that a reservation never
// holds a zone for a rollout that is not going on.
func Untouched(v View, in Intent) []string {
	zone := zoneOrNil(v, in.Zone)
	var out []string
	for _, p := range in.Pods {
		if fateOf(&in, p, zone, v.Now) == fatePending {
			out = append(out, p.Name)
		}
	}
	return out
}
