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
// parallel; an admitted eviction is carried out after its answer). So a
// decision that allows pods to go carries an Intent naming exactly those
// pods, which the caller records in the API with an optimistic lock before
// it acts (package budget does that), as an eviction records a pod in a
// PodDisruptionBudget's status.disruptedPods. Every later decision counts a
// recorded pod as unavailable while its view still shows it there,
// untouched; once the view shows it going, gone or replaced, the pods say
// whether the zone is whole. The next zone goes the moment they do: an
// intent ends on evidence, and its expiry only ends one whose holder
// crashed before acting (the act is fenced to happen before it).
package disruption

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// ActWindow is how long a holder has to act on a recorded intent: the
// rollout's deletes and partition write, and a downscale's replicas write,
// run under a context that ends then (ActDeadline), and the API server
// carries out an admitted eviction within its admission's own timeout (at
// most 30 s). An act not done by then is not done at all.
const ActWindow = 30 * time.Second

// expiryMargin is added to ActWindow for an intent's expiry: how far the
// clocks of the processes that decide may disagree, and how long a view of
// the pods may lag the act (an informer cache), so that no view still
// shows a pod that was taken as untouched once its intent has expired.
const expiryMargin = 15 * time.Second

// forgetAfter is how long after its expiry an intent whose pods are still
// not seen replaced (a pod stuck terminating, a replacement that never
// becomes available) is dropped from the record: the pods alone count
// them by then.
const forgetAfter = 10 * time.Minute

// ResizeHoldWindow is how long a Resize intent without pods (a hold) holds
// its zone: its holder renews it while the zone's resize lasts, so that a
// holder that crashed stops holding the other zones within this bound.
const ResizeHoldWindow = 2 * time.Minute

// MaxIntents bounds the recorded intents, as the API does.
const MaxIntents = 256

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
	// CodeSharedBudgetNotFound: the group shares a ZoneDisruptionBudget
	// that does not exist.
	CodeSharedBudgetNotFound = "SharedBudgetNotFound"
	// CodeZoneResizing: another zone's volumes are being resized
	// (spec.volumeClaimSizes), or, for a rollout or a downscale, any zone's.
	CodeZoneResizing = "ZoneResizing"
	// CodeZoneDelay: another zone's downscale was recorded less than the
	// request's ZoneDelay ago (minTimeBetweenZoneDownscales).
	CodeZoneDelay = "ZoneDelay"
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
	// AvailableAt is when a pod that is Ready but not available yet (its
	// group's minReadySeconds not over) becomes available: time alone
	// changes it then, with no event to tell. Zero for any other pod.
	AvailableAt time.Time
	// Created is the pod's creationTimestamp: a pod created (to the
	// second) no earlier than an intent was decided is the replacement of
	// the pod it names, not one it replaced.
	Created time.Time
	// Partition is the pod's partition when the budget is partition-aware
	// and its name matches; "" otherwise.
	Partition string
}

// unavailable reports whether the pod uses the zone's availability: it
// should exist and does not, is going, or is not available.
func (p Pod) unavailable() bool {
	return !p.Wanted || p.Missing || p.Terminating || !p.Available
}

// Zone is one StatefulSet of the group, or of a group sharing its budget.
type Zone struct {
	Name string
	// Domain is the failure domain the StatefulSet is in when several
	// StatefulSets share one budget (ingesters and store-gateways of zone
	// a): StatefulSets of one domain go down together, those of two never
	// do. "" is a domain of its own, named Name.
	Domain string
	// Group tells the StatefulSets of one RolloutGroup from those of others
	// sharing its budget: a rollout and a downscale of the same group never
	// overlap, in any zone. "" for every zone of a budget not shared.
	Group string
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

// domain is the failure domain of the zone: Domain, or its Name.
func (z *Zone) domain() string {
	if z.Domain != "" {
		return z.Domain
	}
	return z.Name
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

// nextAvailable is the earliest moment after now at which one of the
// zone's pods (of partition, when set) becomes available by time alone
// (Pod.AvailableAt); zero when none will.
func (z *Zone) nextAvailable(partition string, now time.Time) time.Time {
	var at time.Time
	for _, p := range z.Pods {
		if partition != "" && p.Partition != partition {
			continue
		}
		if p.AvailableAt.After(now) && (at.IsZero() || p.AvailableAt.Before(at)) {
			at = p.AvailableAt
		}
	}
	return at
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

// Intent is a recorded decision: Pods of Zone were let go, by Holder for
// Reason, at Decided; the act happens before Expires or not at all.
type Intent struct {
	Zone    string
	Reason  v1alpha1.DisruptionReason
	Holder  string
	Decided time.Time
	Expires time.Time
	Pods    []IntentPod
	// MaxAtOnce, when positive, makes the intent a reservation (see
	// reservation.go): its pods go in their order, the zone kept at most
	// this many unavailable.
	MaxAtOnce int32
}

// IntentPod is a pod an intent let go: its name and its UID then.
type IntentPod struct {
	Name string
	UID  types.UID
}

// IsHold reports whether the intent is a resize's hold of its zone: a
// Resize intent naming no pod, which holds the zone until it expires or its
// holder drops it.
func (in *Intent) IsHold() bool {
	return in.Reason == v1alpha1.DisruptionResize && len(in.Pods) == 0
}

// Describe says in a few words whose intent it is, for messages: "zone-a
// (Eviction, eviction of pod zone-a-3)".
func (in *Intent) Describe() string {
	return fmt.Sprintf("%s (%s, %s)", in.Zone, in.Reason, orSomeone(in.Holder))
}

// podFate is what a view shows of a pod an intent let go.
type podFate int

const (
	// fatePending: the view shows the pod there, untouched (available),
	// and the intent has not expired: the act may not show yet, so the
	// pod counts as unavailable.
	fatePending podFate = iota
	// fateUnderWay: the view shows the pod going, gone or replaced by one
	// not yet available: the view counts it itself.
	fateUnderWay
	// fateDone: the view shows it replaced by a pod created after the
	// decision and available, or its ordinal removed; or the intent
	// expired with the pod untouched.
	fateDone
)

// fateOf is what zone (nil when the view has no such zone) shows of p, a
// pod intent let go, at now. A pod absent from the view is done: a view
// that allows a disruption is read after the record it is judged with
// (budget.Acquire), so it cannot predate the pod; a view from a cache only
// ever pre-judges a request that such a view then confirms.
func fateOf(in *Intent, p IntentPod, zone *Zone, now time.Time) podFate {
	expired := !now.Before(in.Expires)
	if zone == nil {
		if expired {
			return fateDone
		}
		return fatePending
	}
	i := slices.IndexFunc(zone.Pods, func(vp Pod) bool { return vp.Name == p.Name })
	if i < 0 {
		return fateDone
	}
	vp := zone.Pods[i]
	switch {
	case vp.Missing:
		return fateUnderWay
	case vp.UID == p.UID && !vp.unavailable(), olderThan(vp, in) && !vp.unavailable():
		// Untouched; or a view older than the pod the intent took (a
		// cache showing the pod it replaced, still available), which
		// says nothing of that pod.
		if expired {
			return fateDone
		}
		return fatePending
	case vp.UID != p.UID && !vp.unavailable():
		return fateDone
	}
	return fateUnderWay
}

// olderThan reports whether the view's pod vp is another pod than the one
// in took and was created before in was decided (to the second): an
// incarnation the intent's pod replaced, shown by a view older than it.
func olderThan(vp Pod, in *Intent) bool {
	return vp.UID != "" && vp.Created.Before(in.Decided.Truncate(time.Second))
}

// intentState sums up, for one decision, what the view shows of the
// recorded intents.
type intentState struct {
	v View
	// pending counts, per zone, the distinct pods that are pending.
	pending map[string]map[string]bool
	// blocking is the earliest-decided intent with a pod pending, per zone.
	blocking map[string]*Intent
}

func stateOf(v View) intentState {
	st := intentState{v: v, pending: map[string]map[string]bool{}, blocking: map[string]*Intent{}}
	for i := range v.Intents {
		in := &v.Intents[i]
		zone := zoneOrNil(v, in.Zone)
		for _, p := range counted(in, zone, v.Now) {
			if st.pending[in.Zone] == nil {
				st.pending[in.Zone] = map[string]bool{}
			}
			st.pending[in.Zone][p.Name] = true
			if st.blocking[in.Zone] == nil {
				st.blocking[in.Zone] = in
			}
		}
	}
	return st
}

// done reports whether every pod of in is done; a resize's hold is done
// once it expires.
func (st intentState) done(in *Intent) bool {
	if in.IsHold() {
		return !st.v.Now.Before(in.Expires)
	}
	if st.v.Now.After(in.Expires.Add(forgetAfter)) {
		return true
	}
	zone := zoneOrNil(st.v, in.Zone)
	for _, p := range in.Pods {
		if fateOf(in, p, zone, st.v.Now) != fateDone {
			return false
		}
	}
	return true
}

// pendingIn counts the zone's pending pods; with partition set, those of
// that partition (a pod the view does not show counts whatever its
// partition).
func (st intentState) pendingIn(zone *Zone, partition string) int {
	n := 0
	for name := range st.pending[zone.Name] {
		if partition == "" {
			n++
			continue
		}
		i := slices.IndexFunc(zone.Pods, func(p Pod) bool { return p.Name == name })
		if i < 0 || zone.Pods[i].Partition == partition {
			n++
		}
	}
	return n
}

// describePending is "3 pods that a Rollout (RolloutGroup x) was allowed
// to take at 12:00:01Z, not seen going yet".
func (st intentState) describePending(zone string, n int) string {
	in := st.blocking[zone]
	return fmt.Sprintf("%s that %s (%s) was allowed to take at %s, not seen going yet",
		plural(n, "pod"), withArticle(strings.ToLower(string(in.Reason))), orSomeone(in.Holder), in.Decided.UTC().Format(time.RFC3339))
}

// earliestExpiry is how long until the first intent with a pod pending
// in one of zones expires: when time alone may change the answer.
func (st intentState) earliestExpiry(zones ...string) time.Duration {
	var at time.Time
	for _, z := range zones {
		if in := st.blocking[z]; in != nil && (at.IsZero() || in.Expires.Before(at)) {
			at = in.Expires
		}
	}
	if at.IsZero() {
		return 0
	}
	return at.Sub(st.v.Now)
}

// View is the group as the decision sees it.
type View struct {
	Now   time.Time
	Zones []Zone
	// Intents are the intents recorded in the API, oldest first.
	Intents []Intent
	// CrossZoneDelay is how long another zone must have been whole before an
	// eviction may disrupt a new zone.
	CrossZoneDelay time.Duration
	// RolloutOpen names the member of a rollout that is under way (started
	// and not complete, whether progressing, analyzing, paused or failed
	// half-way); "" when none. Downscales wait for it: its gates judge pods
	// that a downscale must not take away.
	RolloutOpen string
}

// Request asks to take pods of one zone away.
type Request struct {
	Zone   string
	Reason v1alpha1.DisruptionReason
	// Pods names the pods to take away: a rollout's batch, the pods a
	// partition releases, an eviction's pod, the ordinals a downscale
	// removes.
	Pods []string
	// Partition is the partition of the pod to evict, when the budget is
	// partition-aware and its name matches.
	Partition string
	// Holder says who asks, for the record.
	Holder string
	// Then, when set, asks for a reservation (reservation.go): the pods
	// to let go after Pods, in order, as slots of the zone free, keeping
	// the zone at the unavailable pods it has once Pods are gone.
	Then []string
	// ZoneDelay, for a downscale, is how long after another zone's
	// downscale was recorded this one must wait (a ScalingPolicy's
	// minTimeBetweenZoneDownscales): judged on the record, under the lock
	// that orders the two, so that two zones deciding at one moment cannot
	// both pass it on a read that shows neither.
	ZoneDelay time.Duration
}

// Verdict is the answer.
type Verdict struct {
	Allowed bool
	// Code (a Code* constant) and Message say why not.
	Code    string
	Message string
	// RetryAfter is when asking again may change the answer through time
	// alone (an intent expiring, a delay running out); 0 when only a
	// change of the pods can.
	RetryAfter time.Duration
	// Intent is the decision to record before acting, when Allowed.
	Intent Intent
	// Record is the whole record to write, when Allowed: the recorded
	// intents not yet done, then Intent.
	Record []Intent
}

// Decide answers req against v. It allows a request only when all hold:
//  1. the zone is one of the group's;
//  2. a downscale asks while no rollout of the group is open, and neither
//     a downscale nor a rollout asks while an intent of the other is
//     recorded and not seen done, in any zone of the group;
//  3. no other zone has a pod a recorded intent let go that the view shows
//     untouched (with a partition, of that partition);
//  4. no other zone is disrupted (pods missing, terminating, not available,
//     leaving, or its StatefulSet status short of Ready); with a partition,
//     only that partition's pods of other zones count;
//  5. for an eviction, every other zone (or partition) has been whole for
//     CrossZoneDelay;
//  6. for a rollout or an eviction, the zone's unavailable pods, its pods
//     recorded intents let go, and the requested pods that are available
//     now stay within its maxUnavailable (replacing a pod that is already
//     unavailable costs nothing);
//  7. the record has room for one more intent.
//
// "Other zone" means a zone of another failure domain (Zone.Domain): when
// several groups share a budget, their StatefulSets of one domain may be
// disrupted together, each within its own maxUnavailable.
func Decide(v View, req Request) Verdict {
	zi := slices.IndexFunc(v.Zones, func(z Zone) bool { return z.Name == req.Zone })
	if zi < 0 {
		return deny(CodeUnknownZone, fmt.Sprintf("%s is not a zone of the group", req.Zone), 0)
	}
	zone := &v.Zones[zi]
	if req.Reason == v1alpha1.DisruptionResize && len(req.Pods) == 0 && holds(v, req) {
		// Renewing a hold continues what it already holds.
		return allow(v, stateOf(v), req)
	}
	// A resize that holds a zone goes on to its end (its restarts, its
	// next zones) while a rollout that began meanwhile waits for it; one
	// that holds nothing waits for an open rollout, as a downscale does.
	holding := req.Reason == v1alpha1.DisruptionResize && slices.ContainsFunc(v.Intents, func(in Intent) bool {
		return in.IsHold() && in.Holder == req.Holder && v.Now.Before(in.Expires)
	})
	if (req.Reason == v1alpha1.DisruptionDownscale || req.Reason == v1alpha1.DisruptionResize) && v.RolloutOpen != "" && !holding {
		return deny(CodeRolloutInProgress, fmt.Sprintf("a rollout of the group is under way (at %s); %ss wait until it completes", v.RolloutOpen, strings.ToLower(string(req.Reason))), 0)
	}
	if req.Reason == v1alpha1.DisruptionDownscale && req.ZoneDelay > 0 {
		for i := range v.Intents {
			in := &v.Intents[i]
			// Recorded to the second: the delay counts from the end of it.
			until := in.Decided.Truncate(time.Second).Add(time.Second + req.ZoneDelay)
			if in.Reason == v1alpha1.DisruptionDownscale && in.Zone != req.Zone && sameGroup(v, in.Zone, zone) && v.Now.Before(until) {
				return deny(CodeZoneDelay, fmt.Sprintf("zone %s was downscaled at %s (%s); another zone's downscale waits %s, until %s",
					in.Zone, in.Decided.UTC().Format(time.RFC3339), orSomeone(in.Holder), req.ZoneDelay, until.UTC().Format(time.RFC3339)), until.Sub(v.Now))
			}
		}
	}
	st := stateOf(v)
	// A zone being resized holds the budget for the whole resize, with no
	// pod going (its StatefulSet is replaced): another zone waits, and so
	// does a rollout or a downscale of the group in any zone.
	for i := range v.Intents {
		in := &v.Intents[i]
		if !in.IsHold() || st.done(in) || (req.Reason == v1alpha1.DisruptionResize && in.Holder == req.Holder) {
			continue
		}
		other := zoneOrNil(v, in.Zone)
		otherDomain := in.Zone != req.Zone && (other == nil || other.domain() != zone.domain())
		if otherDomain || (crosses(req.Reason, in.Reason) && sameGroup(v, in.Zone, zone)) {
			return deny(CodeZoneResizing, fmt.Sprintf("zone %s is being resized (%s, since %s); a %s waits for it",
				in.Zone, orSomeone(in.Holder), in.Decided.UTC().Format(time.RFC3339), strings.ToLower(string(req.Reason))), in.Expires.Sub(v.Now))
		}
	}
	// An intent speaks for an action whose effect no view may show yet: a
	// rollout's batch before its status says a rollout is open, a downscale
	// before the StatefulSet's pods start leaving. Rolling and scaling never
	// overlap, in any zone.
	for i := range v.Intents {
		in := &v.Intents[i]
		if crosses(req.Reason, in.Reason) && sameGroup(v, in.Zone, zone) && !st.done(in) {
			return deny(CodeHeldByOtherZone, fmt.Sprintf("%s of zone %s (%s, decided at %s) is not seen done; a %s waits for it",
				withArticle(strings.ToLower(string(in.Reason))), in.Zone, orSomeone(in.Holder), in.Decided.UTC().Format(time.RFC3339), strings.ToLower(string(req.Reason))),
				max(in.Expires.Sub(v.Now), 0))
		}
	}
	partition := ""
	if req.Reason == v1alpha1.DisruptionEviction {
		partition = req.Partition
	}
	var held, heldZones []string
	for z := range st.pending {
		other := zoneOrNil(v, z)
		if z == req.Zone || (other != nil && other.domain() == zone.domain()) {
			continue
		}
		n := len(st.pending[z])
		if other != nil {
			n = st.pendingIn(other, partition)
		}
		if n > 0 {
			held = append(held, fmt.Sprintf("%s (%s)", z, st.describePending(z, n)))
			heldZones = append(heldZones, z)
		}
	}
	if len(held) > 0 {
		slices.Sort(held)
		return deny(CodeHeldByOtherZone, fmt.Sprintf("zone %s holds the disruption budget", strings.Join(held, ", ")), st.earliestExpiry(heldZones...))
	}
	var disrupted []string
	var nextAvailable time.Time
	for i := range v.Zones {
		other := &v.Zones[i]
		if other.domain() == zone.domain() {
			continue
		}
		if d := other.Disrupted(partition); d != "" {
			disrupted = append(disrupted, fmt.Sprintf("%s (%s)", other.Name, d))
			nextAvailable = earliest(nextAvailable, other.nextAvailable(partition, v.Now))
		}
	}
	if len(disrupted) > 0 {
		what := "zone"
		if partition != "" {
			what = "partition " + partition + " in zone"
		}
		// A pod of theirs that is Ready and waits out minReadySeconds
		// becomes available with no event to tell: ask again then.
		return deny(CodeOtherZoneDisrupted, fmt.Sprintf("%s %s is disrupted", what, strings.Join(disrupted, ", ")), until(v.Now, nextAvailable))
	}
	if req.Reason == v1alpha1.DisruptionEviction && v.CrossZoneDelay > 0 {
		for i := range v.Zones {
			other := &v.Zones[i]
			if other.domain() == zone.domain() {
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
		// A pending pod that is requested again (an eviction retried, the
		// rollout asking again for a batch it did not finish) is costed
		// once, as a requested pod.
		cost := costOf(zone, req.Pods)
		pending := othersPending(v, zone, req)
		if used := zone.Unavailable() + int32(pending); cost > 0 && used+cost > zone.MaxUnavailable {
			msg := fmt.Sprintf("zone %s has %d of %d pods unavailable and maxUnavailable %d", zone.Name, used, len(zone.Pods), zone.MaxUnavailable)
			if pending > 0 {
				msg += fmt.Sprintf(" (%s)", st.describePending(zone.Name, pending))
			}
			retry := st.earliestExpiry(zone.Name)
			if next := until(v.Now, zone.nextAvailable("", v.Now)); next > 0 && (retry == 0 || next < retry) {
				retry = next
			}
			return deny(CodeZoneBudget, msg, retry)
		}
	}
	return allow(v, st, req)
}

// costOf counts the pods of names that are available in zone: what taking
// them costs its budget (replacing a pod already unavailable costs
// nothing).
func costOf(zone *Zone, names []string) int32 {
	var cost int32
	for _, name := range names {
		i := slices.IndexFunc(zone.Pods, func(p Pod) bool { return p.Name == name })
		if i >= 0 && !zone.Pods[i].unavailable() {
			cost++
		}
	}
	return cost
}

// earliest is the earlier of two moments, a zero one being none.
func earliest(a, b time.Time) time.Time {
	if a.IsZero() || (!b.IsZero() && b.Before(a)) {
		return b
	}
	return a
}

// until is how long from now to at; 0 for a zero or past at.
func until(now, at time.Time) time.Duration {
	if at.IsZero() || !at.After(now) {
		return 0
	}
	return at.Sub(now)
}

func allow(v View, st intentState, req Request) Verdict {
	intent := Intent{Zone: req.Zone, Reason: req.Reason, Holder: req.Holder, Decided: v.Now, Expires: v.Now.Add(ActWindow + expiryMargin)}
	if req.Reason == v1alpha1.DisruptionResize && len(req.Pods) == 0 {
		intent.Expires = v.Now.Add(ResizeHoldWindow)
	}
	zone := zoneNamed(v, req.Zone)
	names := req.Pods
	if m := reservedAtOnce(v, zone, req); m > 0 {
		intent.MaxAtOnce, names = m, slices.Concat(req.Pods, req.Then)
	}
	for _, name := range names {
		// A pod the view does not show, or shows missing, is not there to
		// take: nothing to count until it is.
		if i := slices.IndexFunc(zone.Pods, func(p Pod) bool { return p.Name == name }); i >= 0 && zone.Pods[i].UID != "" {
			intent.Pods = append(intent.Pods, IntentPod{Name: name, UID: zone.Pods[i].UID})
		}
	}
	var record []Intent
	for i := range v.Intents {
		// A hold asked for again renews the one its holder had, or moves
		// it to the holder's next zone.
		renewed := intent.IsHold() && v.Intents[i].IsHold() && v.Intents[i].Holder == intent.Holder
		renewed = renewed || replaces(&intent, &v.Intents[i], zone, v.Now)
		if !renewed && !st.done(&v.Intents[i]) {
			record = append(record, v.Intents[i])
		}
	}
	if len(record) >= MaxIntents {
		return deny(CodeZoneBudget, fmt.Sprintf("the budget records %d disruptions not yet seen done, the most it holds", len(record)), st.earliestExpiry(req.Zone))
	}
	return Verdict{Allowed: true, Intent: intent, Record: append(record, intent)}
}

// ActDeadline is when the holder of an intent decided at decided must have
// acted: the deadline of the context its act runs under.
func ActDeadline(decided time.Time) time.Time { return decided.Add(ActWindow) }

// holds reports whether req's holder holds req's zone now.
func holds(v View, req Request) bool {
	return slices.ContainsFunc(v.Intents, func(in Intent) bool {
		return in.IsHold() && in.Zone == req.Zone && in.Holder == req.Holder && v.Now.Before(in.Expires)
	})
}

// sameGroup reports whether the zone an intent names is of zone's group:
// a zone the view does not show (a member gone since) is taken to be.
func sameGroup(v View, intentZone string, zone *Zone) bool {
	other := zoneOrNil(v, intentZone)
	return other == nil || other.Group == zone.Group
}

// crosses reports whether a request of one reason must wait for an intent
// of another even in the same zone: a rollout, a downscale and a resize
// never overlap.
func crosses(req, held v1alpha1.DisruptionReason) bool {
	exclusive := func(r v1alpha1.DisruptionReason) bool {
		return r == v1alpha1.DisruptionRollout || r == v1alpha1.DisruptionDownscale || r == v1alpha1.DisruptionResize
	}
	return req != held && exclusive(req) && exclusive(held)
}

func deny(code, msg string, retry time.Duration) Verdict {
	return Verdict{Code: code, Message: msg, RetryAfter: max(retry, 0)}
}

// zoneOrNil is the view's zone of that name; nil when none.
func zoneOrNil(v View, name string) *Zone {
	if i := slices.IndexFunc(v.Zones, func(z Zone) bool { return z.Name == name }); i >= 0 {
		return &v.Zones[i]
	}
	return nil
}

// zoneNamed is the view's zone of that name; an empty zone when none.
func zoneNamed(v View, name string) *Zone {
	if z := zoneOrNil(v, name); z != nil {
		return z
	}
	return &Zone{Name: name}
}

// withArticle is "an eviction", "a rollout".
func withArticle(what string) string {
	if strings.IndexAny(what[:1], "aeiou") == 0 {
		return "an " + what
	}
	return "a " + what
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func orSomeone(holder string) string {
	if holder == "" {
		return "holder unknown"
	}
	return holder
}
