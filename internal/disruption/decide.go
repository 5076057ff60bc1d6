// Package disruption decides, without any client, whether pods of one zone of
// a group may be taken away now: by the RolloutGroup's rollout, by a
// downscale (a ScalingPolicy, a DelayedDownscale's release, an admitted
// `kubectl scale`), or by an eviction (a node drain, an autoscaler). All of
// them call Decide, so the guarantees of docs/safety.md hold whatever asks:
// at most one zone of a group is disrupted at a time, and a zone never loses
// more than its budget. Decide is tested with tables and fuzzed against an
// independently written oracle.
//
// Two decisions made at the same moment must see each other, which no view
// of the pods can promise on its own (a cache lags; two admissions run in
// parallel). So a decision that allows a zone to be disrupted carries a Hold,
// which the caller records in the API with an optimistic lock before it acts
// (package budget does that): a second zone may be disrupted only once the
// hold has lapsed and the first zone is whole again.
package disruption

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// DefaultLease is how long a recorded hold stops other zones after the
// decision that last renewed it: long enough for the action it admitted (a
// pod deleted, a StatefulSet shrunk) to show in every informer cache, after
// which the pods themselves tell that the zone is disrupted.
const DefaultLease = 15 * time.Second

// Codes say why a request is refused.
const (
	// CodeUnknownZone: the zone is not part of the group.
	CodeUnknownZone = "UnknownZone"
	// CodeRolloutInProgress: a downscale waits while the group has a rollout open.
	CodeRolloutInProgress = "RolloutInProgress"
	// CodeHeldByOtherZone: another zone holds the budget and its hold has not lapsed.
	CodeHeldByOtherZone = "HeldByOtherZone"
	// CodeOtherZoneDisrupted: another zone has pods that are missing,
	// terminating, not available or leaving after a scale-down.
	CodeOtherZoneDisrupted = "OtherZoneDisrupted"
	// CodeCrossZoneDelay: another zone became whole less than crossZoneDelay ago.
	CodeCrossZoneDelay = "CrossZoneDelay"
	// CodeZoneBudget: the zone would have more pods unavailable than its maxUnavailable.
	CodeZoneBudget = "ZoneBudgetExhausted"
)

// Pod is one pod of a zone as the decision sees it. A pod the zone wants but
// that does not exist is a Pod too, with Missing set.
type Pod struct {
	Name string
	// UID tells a pod from one recreated under its name; "" for a missing pod.
	UID types.UID
	// Wanted is false for a pod outside the zone's wanted ordinals: a
	// scale-down's pod still leaving, terminating or not.
	Wanted bool
	// Missing is true for a wanted ordinal with no pod.
	Missing bool
	// Terminating is true when the pod has a deletionTimestamp, or its
	// deletion was just requested by this process.
	Terminating bool
	// Available is true when the pod is Ready for at least the group's
	// minReadySeconds and not terminating.
	Available bool
	// AvailableSince is when the pod became available; zero when it is not.
	AvailableSince time.Time
	// Partition is the pod's partition when the budget is partition-aware
	// and its name matches; "" otherwise.
	Partition string
}

// unavailable reports whether the pod uses the zone's availability: it
// should exist and does not, is going, or is not available.
func (p Pod) unavailable() bool {
	return !p.Wanted || p.Missing || p.Terminating || !p.Available
}

// Zone is one StatefulSet of the group.
type Zone struct {
	Name string
	// Pods are the zone's pods, wanted ordinals without a pod included
	// (Missing), and pods left above the wanted ordinals (not Wanted).
	Pods []Pod
	// Replicas is the StatefulSet's spec.replicas; StatusReplicas and
	// StatusReady are its controller's counts, which include pods no view
	// of the pods may show yet.
	Replicas       int32
	StatusReplicas int32
	StatusReady    int32
	// MaxUnavailable is the zone's budget: how many of its pods may be
	// unavailable at once. 0 allows no disruption that costs availability.
	MaxUnavailable int32
}

// Unavailable counts the zone's pods that use its availability.
func (z *Zone) Unavailable() int32 {
	var n int32
	for _, p := range z.Pods {
		if p.unavailable() {
			n++
		}
	}
	return n
}

// unavailableCounting counts the zone's pods that use its availability,
// those named in evicted included.
func (z *Zone) unavailableCounting(evicted map[string]types.UID) int32 {
	var n int32
	for _, p := range z.Pods {
		uid, ok := evicted[p.Name]
		if p.unavailable() || ok && (uid == "" || uid == p.UID) {
			n++
		}
	}
	return n
}

// Disrupted says why the zone is disrupted now, "" when it is whole. With
// partition set, only the pods of that partition are looked at (and a
// StatefulSet status, which cannot name partitions, is not).
func (z *Zone) Disrupted(partition string) string {
	var leaving, missing, terminating, notAvailable int
	for _, p := range z.Pods {
		if partition != "" && p.Partition != partition {
			continue
		}
		switch {
		case !p.Wanted:
			leaving++
		case p.Missing:
			missing++
		case p.Terminating:
			terminating++
		case !p.Available:
			notAvailable++
		}
	}
	var parts []string
	add := func(n int, what string) {
		if n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, what))
		}
	}
	add(missing, "missing")
	add(terminating, "terminating")
	add(notAvailable, "not available")
	add(leaving, "leaving after a scale-down")
	if partition == "" {
		switch {
		case z.StatusReplicas > z.Replicas && leaving == 0:
			parts = append(parts, fmt.Sprintf("StatefulSet status shows %d pods for %d replicas (scale-down under way)", z.StatusReplicas, z.Replicas))
		case z.StatusReplicas > z.StatusReady && len(parts) == 0:
			parts = append(parts, fmt.Sprintf("StatefulSet status shows %d of %d pods Ready", z.StatusReady, z.StatusReplicas))
		}
	}
	return strings.Join(parts, ", ")
}

// wholeSince is when the zone's pods (of partition, when set) were last all
// available: the latest time one of them became available. Zero when the
// zone is not whole or has no pod.
func (z *Zone) wholeSince(partition string) time.Time {
	var since time.Time
	for _, p := range z.Pods {
		if partition != "" && p.Partition != partition {
			continue
		}
		if p.unavailable() {
			return time.Time{}
		}
		if p.AvailableSince.After(since) {
			since = p.AvailableSince
		}
	}
	return since
}

// Hold is a recorded decision: Zone may be disrupted, and no other zone
// until Renewed+Lease.
type Hold struct {
	Zone    string
	Reason  v1alpha1.DisruptionReason
	Holder  string
	Since   time.Time
	Renewed time.Time
	Lease   time.Duration
	// Evicted names the zone's pods whose eviction was admitted under the
	// hold; until it lapses each counts as unavailable while the view shows
	// it still there (the API server removes an evicted pod only after the
	// admission that allowed it), and no more once the view shows it
	// terminating, gone or replaced (then the view counts it, or its
	// replacement is what the view shows).
	Evicted []Evicted
}

// Evicted is a pod whose eviction a hold admitted: its name and its UID then
// ("" when the view did not show it).
type Evicted struct {
	Name string
	UID  types.UID
}

// maxEvicted bounds Hold.Evicted, as the API does: a drain that evicts more
// pods of one zone within a lease than this is refused until it lapses.
const maxEvicted = 256

// Until is when the hold lapses.
func (h *Hold) Until() time.Time { return h.Renewed.Add(h.Lease) }

// Lapsed reports whether the hold no longer stops other zones at now.
func (h *Hold) Lapsed(now time.Time) bool { return h == nil || !now.Before(h.Until()) }

// View is the group as the decision sees it.
type View struct {
	Now   time.Time
	Zones []Zone
	// Hold is the hold recorded in the API, nil when none.
	Hold *Hold
	// CrossZoneDelay is how long another zone must have been whole before an
	// eviction may disrupt a new zone.
	CrossZoneDelay time.Duration
	// RolloutOpen names the member of a rollout that is under way (started
	// and not complete, whether progressing, analyzing, paused or failed
	// half-way); "" when none. Downscales wait for it: its gates judge pods
	// that a downscale must not take away.
	RolloutOpen string
	// Lease is the lease of a hold this decision records; DefaultLease when 0.
	Lease time.Duration
}

// Request asks to take pods of one zone away.
type Request struct {
	Zone   string
	Reason v1alpha1.DisruptionReason
	// Pods names the pods to take away (a rollout's batch, an eviction).
	Pods []string
	// Partition is the partition of the pod to evict, when the budget is
	// partition-aware and its name matches.
	Partition string
	// Count is how many pods a downscale removes; Pods is empty then.
	Count int32
	// Holder says who asks, for the record.
	Holder string
}

// Verdict is the answer.
type Verdict struct {
	Allowed bool
	// Code (a Code* constant) and Message say why not.
	Code    string
	Message string
	// RetryAfter is when asking again may change the answer through time
	// alone (a hold lapsing, a delay running out); 0 when only a change of
	// the pods can.
	RetryAfter time.Duration
	// Hold is what to record before acting, when Allowed. An eviction in a
	// zone whose unlapsed hold is a rollout's or a downscale's renews that
	// hold under its reason and holder.
	Hold Hold
	// Record is true when the hold must be written before acting: none is
	// recorded for this zone, the one recorded lapses within half the
	// view's lease, or it was recorded for another reason.
	Record bool
}

// Decide answers req against v. It allows a request only when all hold:
//  1. the zone is one of the group's;
//  2. a downscale asks while no rollout of the group is open, and neither
//     a downscale nor a rollout asks while the other holds an unlapsed hold,
//     in any zone;
//  3. no other zone holds an unlapsed hold;
//  4. no other zone is disrupted (pods missing, terminating, not available,
//     leaving, or its StatefulSet status short of Ready); with a partition,
//     only that partition's pods of other zones count;
//  5. for an eviction, every other zone (or partition) has been whole for
//     CrossZoneDelay;
//  6. for a rollout or an eviction, the zone's unavailable pods plus the
//     requested pods that are available now stay within its maxUnavailable
//     (replacing a pod that is already unavailable costs nothing).
func Decide(v View, req Request) Verdict {
	zi := slices.IndexFunc(v.Zones, func(z Zone) bool { return z.Name == req.Zone })
	if zi < 0 {
		return deny(CodeUnknownZone, fmt.Sprintf("%s is not a zone of the group", req.Zone), 0)
	}
	zone := &v.Zones[zi]
	if req.Reason == v1alpha1.DisruptionDownscale && v.RolloutOpen != "" {
		return deny(CodeRolloutInProgress, fmt.Sprintf("a rollout of the group is under way (at %s); downscales wait until it completes", v.RolloutOpen), 0)
	}
	// A hold speaks for an action whose effect no view may show yet: a
	// rollout's batch before its status says a rollout is open, a downscale
	// before the StatefulSet's pods start leaving. Rolling and scaling never
	// overlap, in any zone.
	if h := v.Hold; h != nil && !h.Lapsed(v.Now) && crosses(req.Reason, h.Reason) {
		return deny(CodeHeldByOtherZone, fmt.Sprintf("zone %s holds the disruption budget (%s, %s) until %s; a %s waits for it",
			h.Zone, h.Reason, orSomeone(h.Holder), h.Until().UTC().Format(time.RFC3339), strings.ToLower(string(req.Reason))), h.Until().Sub(v.Now))
	}
	if h := v.Hold; h != nil && h.Zone != req.Zone && !h.Lapsed(v.Now) {
		return deny(CodeHeldByOtherZone, fmt.Sprintf("zone %s holds the disruption budget (%s, %s) until %s",
			h.Zone, h.Reason, orSomeone(h.Holder), h.Until().UTC().Format(time.RFC3339)), h.Until().Sub(v.Now))
	}
	partition := ""
	if req.Reason == v1alpha1.DisruptionEviction {
		partition = req.Partition
	}
	var disrupted []string
	for i := range v.Zones {
		other := &v.Zones[i]
		if other.Name == req.Zone {
			continue
		}
		if d := other.Disrupted(partition); d != "" {
			disrupted = append(disrupted, fmt.Sprintf("%s (%s)", other.Name, d))
		}
	}
	if len(disrupted) > 0 {
		what := "zone"
		if partition != "" {
			what = "partition " + partition + " in zone"
		}
		return deny(CodeOtherZoneDisrupted, fmt.Sprintf("%s %s is disrupted", what, strings.Join(disrupted, ", ")), 0)
	}
	if req.Reason == v1alpha1.DisruptionEviction && v.CrossZoneDelay > 0 {
		for i := range v.Zones {
			other := &v.Zones[i]
			if other.Name == req.Zone {
				continue
			}
			if since := other.wholeSince(partition); !since.IsZero() && v.Now.Before(since.Add(v.CrossZoneDelay)) {
				until := since.Add(v.CrossZoneDelay)
				return deny(CodeCrossZoneDelay, fmt.Sprintf("zone %s has been whole only since %s; crossZoneDelay %s lets another zone go at %s",
					other.Name, since.UTC().Format(time.RFC3339), v.CrossZoneDelay, until.UTC().Format(time.RFC3339)), until.Sub(v.Now))
			}
		}
	}
	if req.Reason != v1alpha1.DisruptionDownscale {
		// A recorded eviction of a requested pod is not counted: it is this
		// pod (an eviction retried) or the one it replaced under its name,
		// and the pod is costed as the view shows it.
		evicted := evictedUnder(v.Hold, req.Zone, v.Now)
		cost := int32(0)
		for _, name := range req.Pods {
			delete(evicted, name)
			i := slices.IndexFunc(zone.Pods, func(p Pod) bool { return p.Name == name })
			if i >= 0 && !zone.Pods[i].unavailable() {
				cost++
			}
		}
		if req.Reason == v1alpha1.DisruptionEviction && len(evicted)+int(cost) > maxEvicted {
			return deny(CodeZoneBudget, fmt.Sprintf("zone %s has had %d evictions admitted within the hold's lease, the most one hold records",
				zone.Name, len(evicted)), v.Hold.Until().Sub(v.Now))
		}
		if used := zone.unavailableCounting(evicted); cost > 0 && used+cost > zone.MaxUnavailable {
			return deny(CodeZoneBudget, fmt.Sprintf("zone %s has %d of %d pods unavailable and maxUnavailable %d",
				zone.Name, used, len(zone.Pods), zone.MaxUnavailable), retryEvicted(evicted, v))
		}
	}
	return allow(v, req)
}

func allow(v View, req Request) Verdict {
	lease := v.Lease
	if lease <= 0 {
		lease = DefaultLease
	}
	hold := Hold{Zone: req.Zone, Reason: req.Reason, Holder: req.Holder, Since: v.Now, Renewed: v.Now, Lease: lease}
	record := true
	if h := v.Hold; h != nil && h.Zone == req.Zone && !h.Lapsed(v.Now) {
		hold.Since = h.Since
		// The reason of an unlapsed hold is what stops a crossing rollout
		// or downscale in this zone (rule 2). An eviction renews a
		// rollout's or a downscale's hold under that reason, or the
		// crossing one could start within the lease of the action the hold
		// was taken for; a rollout or a downscale taking over an
		// eviction's hold records its own reason at once.
		if req.Reason == v1alpha1.DisruptionEviction && h.Reason != v1alpha1.DisruptionEviction {
			hold.Reason, hold.Holder = h.Reason, h.Holder
		}
		// Half of this decision's lease, not of the recorded one: an action
		// allowed without a record is covered only by what is left of the
		// hold, and the lease is what a view may lag. A hold written with
		// a shorter lease (by another version, or by hand) would otherwise
		// cover it for less than half of that.
		record = hold.Reason != h.Reason || h.Until().Sub(v.Now) <= lease/2
		hold.Evicted = slices.Clone(h.Evicted)
	}
	// An admitted eviction is always recorded, with its pod: a second
	// eviction of the zone judged before the API server removes this pod
	// counts it, and the optimistic lock orders the two.
	if req.Reason == v1alpha1.DisruptionEviction {
		zone := zoneNamed(v, req.Zone)
		for _, name := range req.Pods {
			e := Evicted{Name: name}
			if i := slices.IndexFunc(zone.Pods, func(p Pod) bool { return p.Name == name }); i >= 0 {
				e.UID = zone.Pods[i].UID
			}
			hold.Evicted = slices.DeleteFunc(hold.Evicted, func(old Evicted) bool { return old.Name == name })
			hold.Evicted = append(hold.Evicted, e)
		}
		record = true
	}
	return Verdict{Allowed: true, Hold: hold, Record: record}
}

// crosses reports whether a request of one reason must wait for an unlapsed
// hold of another even in the same zone: a rollout and a downscale.
func crosses(req, held v1alpha1.DisruptionReason) bool {
	return (req == v1alpha1.DisruptionDownscale && held == v1alpha1.DisruptionRollout) ||
		(req == v1alpha1.DisruptionRollout && held == v1alpha1.DisruptionDownscale)
}

func deny(code, msg string, retry time.Duration) Verdict {
	return Verdict{Code: code, Message: msg, RetryAfter: max(retry, 0)}
}

// evictedUnder is the set of pods of zone an unlapsed hold of it records
// as evicted.
func evictedUnder(h *Hold, zone string, now time.Time) map[string]types.UID {
	if h == nil || h.Zone != zone || h.Lapsed(now) || len(h.Evicted) == 0 {
		return nil
	}
	evicted := make(map[string]types.UID, len(h.Evicted))
	for _, e := range h.Evicted {
		evicted[e.Name] = e.UID
	}
	return evicted
}

// zoneNamed is the view's zone of that name; an empty zone when none.
func zoneNamed(v View, name string) *Zone {
	if i := slices.IndexFunc(v.Zones, func(z Zone) bool { return z.Name == name }); i >= 0 {
		return &v.Zones[i]
	}
	return &Zone{Name: name}
}

// retryEvicted is when a refusal that counted recorded evictions may change
// through time alone: when the hold that records them lapses.
func retryEvicted(evicted map[string]types.UID, v View) time.Duration {
	if len(evicted) == 0 {
		return 0
	}
	return v.Hold.Until().Sub(v.Now)
}

func orSomeone(holder string) string {
	if holder == "" {
		return "holder unknown"
	}
	return holder
}
