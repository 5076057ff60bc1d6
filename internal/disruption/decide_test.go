package disruption

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// testNow is the decisions' clock in tests.
var testNow = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

const (
	rollout   = v1alpha1.DisruptionRollout
	downscale = v1alpha1.DisruptionDownscale
	eviction  = v1alpha1.DisruptionEviction
)

// zoneWrapper builds a Zone the way ZoneOf would report it.
type zoneWrapper struct{ z Zone }

// makeZone is a whole zone of n pods <name>-0..n-1, available since long
// ago, its StatefulSet status agreeing, maxUnavailable 1. Each pod's
// partition is its ordinal, which only partition-aware requests read.
func makeZone(name string, n int) *zoneWrapper {
	w := &zoneWrapper{z: Zone{Name: name, Replicas: int32(n), StatusReplicas: int32(n), StatusReady: int32(n), MaxUnavailable: 1}}
	for i := range n {
		pod := fmt.Sprintf("%s-%d", name, i)
		w.z.Pods = append(w.z.Pods, Pod{Name: pod, UID: uidOf(pod), Wanted: true, Available: true, Partition: fmt.Sprint(i)})
	}
	return w
}

// uidOf is the UID makeZone gives a pod.
func uidOf(pod string) types.UID { return types.UID("uid-" + pod) }

// Replaced: pod i is another pod under the same name, available.
func (w *zoneWrapper) Replaced(i int) *zoneWrapper {
	w.z.Pods[i].UID += "-again"
	return w
}

func (w *zoneWrapper) Obj() Zone {
	z := w.z
	z.Pods = append([]Pod(nil), w.z.Pods...)
	return z
}

func (w *zoneWrapper) Max(n int32) *zoneWrapper { w.z.MaxUnavailable = n; return w }

func (w *zoneWrapper) Status(replicas, ready int32) *zoneWrapper {
	w.z.StatusReplicas, w.z.StatusReady = replicas, ready
	return w
}

// NotAvailable: pod i exists, is not terminating, and is not (yet) available.
func (w *zoneWrapper) NotAvailable(i int) *zoneWrapper {
	w.z.Pods[i].Available, w.z.Pods[i].AvailableSince = false, time.Time{}
	return w
}

func (w *zoneWrapper) Terminating(i int) *zoneWrapper {
	w.z.Pods[i].Terminating = true
	return w.NotAvailable(i)
}

func (w *zoneWrapper) Missing(i int) *zoneWrapper {
	w.z.Pods[i].Missing = true
	return w.NotAvailable(i)
}

// AvailableSince: pod i became available at t.
func (w *zoneWrapper) AvailableSince(i int, t time.Time) *zoneWrapper {
	w.z.Pods[i].AvailableSince = t
	return w
}

// Leaving adds pod <name>-<ord>, left above the wanted ordinals by a
// scale-down; still available until it terminates.
func (w *zoneWrapper) Leaving(ord int) *zoneWrapper {
	w.z.Pods = append(w.z.Pods, Pod{Name: fmt.Sprintf("%s-%d", w.z.Name, ord), Available: true, Partition: fmt.Sprint(ord)})
	return w
}

// group is a view at testNow of three zones a, b, c of three pods, each
// changed by its function when one is given.
func group(change ...func(a, b, c *zoneWrapper)) View {
	a, b, c := makeZone("zone-a", 3), makeZone("zone-b", 3), makeZone("zone-c", 3)
	for _, f := range change {
		f(a, b, c)
	}
	return View{Now: testNow, Zones: []Zone{a.Obj(), b.Obj(), c.Obj()}}
}

func withHold(v View, zone string, reason v1alpha1.DisruptionReason, renewedAgo time.Duration) View {
	v.Hold = &Hold{Zone: zone, Reason: reason, Holder: "holder-" + zone, Since: testNow.Add(-time.Hour),
		Renewed: testNow.Add(-renewedAgo), Lease: DefaultLease}
	return v
}

func evict(pod string) Request {
	zone := pod[:strings.LastIndex(pod, "-")]
	return Request{Zone: zone, Reason: eviction, Pods: []string{pod}, Holder: "eviction of pod " + pod}
}

func evictPartition(pod string) Request {
	r := evict(pod)
	r.Partition = pod[strings.LastIndex(pod, "-")+1:]
	return r
}

func roll(zone string, pods ...string) Request {
	return Request{Zone: zone, Reason: rollout, Pods: pods, Holder: "RolloutGroup ingester"}
}

func shrink(zone string, count int32) Request {
	return Request{Zone: zone, Reason: downscale, Count: count, Holder: "ScalingPolicy ingester"}
}

// granted is the verdict allowing req with a hold taken now and recorded;
// an eviction's hold names its pods.
func granted(req Request) Verdict {
	v := Verdict{Allowed: true, Record: true, Hold: Hold{Zone: req.Zone, Reason: req.Reason, Holder: req.Holder,
		Since: testNow, Renewed: testNow, Lease: DefaultLease}}
	if req.Reason == eviction {
		v.Hold.Evicted = evictedPods(req.Pods...)
	}
	return v
}

// evictedPods records the evictions of pods as makeZone made them.
func evictedPods(pods ...string) []Evicted {
	var out []Evicted
	for _, p := range pods {
		out = append(out, Evicted{Name: p, UID: uidOf(p)})
	}
	return out
}

func denied(code string, retry time.Duration) Verdict {
	return Verdict{Code: code, RetryAfter: retry}
}

type decideCase struct {
	name string
	view View
	req  Request
	want Verdict // Message is not compared
	// message holds substrings the Message must contain.
	message []string
}

func runDecideCases(t *testing.T, cases []decideCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Decide(tc.view, tc.req)
			msg := got.Message
			got.Message = ""
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decide = %+v (message %q)\nwant     %+v", got, msg, tc.want)
			}
			if got.Allowed != (msg == "") {
				t.Errorf("Allowed = %v with message %q", got.Allowed, msg)
			}
			for _, s := range tc.message {
				if !strings.Contains(msg, s) {
					t.Errorf("Message = %q, want it to contain %q", msg, s)
				}
			}
		})
	}
}

func TestDecideZoneAndRollout(t *testing.T) {
	leased := group()
	leased.Lease = time.Minute
	wantLeased := granted(evict("zone-a-0"))
	wantLeased.Hold.Lease = time.Minute
	rolloutOpen := group()
	rolloutOpen.RolloutOpen = "zone-b"

	runDecideCases(t, []decideCase{
		{name: "eviction of a whole group", view: group(), req: evict("zone-a-0"), want: granted(evict("zone-a-0"))},
		{name: "a rollout batch over the budget", view: group(), req: roll("zone-b", "zone-b-2", "zone-b-1"), want: denied(CodeZoneBudget, 0)},
		{name: "rollout within the budget", view: group(), req: roll("zone-b", "zone-b-2"), want: granted(roll("zone-b", "zone-b-2"))},
		{name: "downscale of a whole group", view: group(), req: shrink("zone-c", 2), want: granted(shrink("zone-c", 2))},
		{name: "the view's lease goes into the hold", view: leased, req: evict("zone-a-0"), want: wantLeased},
		{name: "unknown zone", view: group(), req: evict("zone-d-0"), want: denied(CodeUnknownZone, 0), message: []string{"zone-d"}},
		{name: "downscale waits for an open rollout", view: rolloutOpen, req: shrink("zone-a", 1),
			want: denied(CodeRolloutInProgress, 0), message: []string{"zone-b"}},
		{name: "an open rollout lets an eviction through", view: rolloutOpen, req: evict("zone-a-0"), want: granted(evict("zone-a-0"))},
		{name: "an open rollout lets its own batch through", view: rolloutOpen, req: roll("zone-b", "zone-b-0"), want: granted(roll("zone-b", "zone-b-0"))},
	})
}

func TestDecideHolds(t *testing.T) {
	runDecideCases(t, []decideCase{
		{name: "another zone's unlapsed hold", view: withHold(group(), "zone-b", eviction, 5*time.Second), req: evict("zone-a-0"),
			want: denied(CodeHeldByOtherZone, 10*time.Second), message: []string{"zone-b", "holder-zone-b", "2026-03-01T12:00:10Z"}},
		{name: "another zone's hold stops a downscale", view: withHold(group(), "zone-b", eviction, 0), req: shrink("zone-a", 1),
			want: denied(CodeHeldByOtherZone, DefaultLease), message: []string{"zone-b"}},
		{name: "another zone's hold stops a rollout", view: withHold(group(), "zone-c", rollout, 14*time.Second), req: roll("zone-a", "zone-a-0"),
			want: denied(CodeHeldByOtherZone, time.Second), message: []string{"zone-c"}},
		{name: "another zone's hold lapsed", view: withHold(group(), "zone-b", eviction, DefaultLease), req: evict("zone-a-0"),
			want: granted(evict("zone-a-0"))},
		// A rollout and a downscale never overlap, even in one zone.
		{name: "a rollout's hold stops a downscale of its zone", view: withHold(group(), "zone-a", rollout, 3*time.Second), req: shrink("zone-a", 1),
			want: denied(CodeHeldByOtherZone, 12*time.Second), message: []string{"zone-a", "Rollout", "downscale waits"}},
		{name: "a downscale's hold stops a rollout of its zone", view: withHold(group(), "zone-a", downscale, 3*time.Second), req: roll("zone-a", "zone-a-0"),
			want: denied(CodeHeldByOtherZone, 12*time.Second), message: []string{"zone-a", "Downscale", "rollout waits"}},
		{name: "a rollout's hold stops a downscale of another zone", view: withHold(group(), "zone-b", rollout, 3*time.Second), req: shrink("zone-a", 1),
			want: denied(CodeHeldByOtherZone, 12*time.Second), message: []string{"zone-b"}},
		{name: "a lapsed rollout hold lets a downscale of its zone", view: withHold(group(), "zone-a", rollout, 20*time.Second), req: shrink("zone-a", 1),
			want: granted(shrink("zone-a", 1))},
	})
}

// TestDecideRenewal: a zone that holds the budget renews its hold only when
// less than half of the lease is left, and keeps the time it took it.
func TestDecideRenewal(t *testing.T) {
	renewed := func(req Request, record bool) Verdict {
		v := granted(req)
		v.Hold.Since, v.Record = testNow.Add(-time.Hour), record
		return v
	}
	runDecideCases(t, []decideCase{
		{name: "more than half the lease left", view: withHold(group(), "zone-a", rollout, 5*time.Second), req: roll("zone-a", "zone-a-1"),
			want: renewed(roll("zone-a", "zone-a-1"), false)},
		{name: "less than half the lease left", view: withHold(group(), "zone-a", rollout, 8*time.Second), req: roll("zone-a", "zone-a-1"),
			want: renewed(roll("zone-a", "zone-a-1"), true)},
		{name: "exactly half the lease left", view: withHold(group(), "zone-a", rollout, DefaultLease/2), req: roll("zone-a", "zone-a-1"),
			want: renewed(roll("zone-a", "zone-a-1"), true)},
		{name: "a recorded lease shorter than the view's", view: func() View {
			v := withHold(group(), "zone-a", rollout, 0)
			v.Hold.Lease = 2 * time.Second // written with another lease, or edited
			return v
		}(), req: roll("zone-a", "zone-a-1"), want: renewed(roll("zone-a", "zone-a-1"), true)},
		{name: "a recorded lease longer than the view's", view: func() View {
			v := withHold(group(), "zone-a", rollout, 50*time.Second)
			v.Hold.Lease = time.Minute
			return v
		}(), req: roll("zone-a", "zone-a-1"), want: renewed(roll("zone-a", "zone-a-1"), false)},
		{name: "an eviction is recorded with its pod even with the lease left", view: withHold(group(), "zone-a", eviction, time.Second),
			req: evict("zone-a-1"), want: renewed(evict("zone-a-1"), true)},
		{name: "a rollout renewing its hold", view: withHold(group(), "zone-a", rollout, time.Second), req: roll("zone-a", "zone-a-1"),
			want: renewed(roll("zone-a", "zone-a-1"), false)},
		{name: "lapsed hold of the zone", view: withHold(group(), "zone-a", eviction, DefaultLease), req: evict("zone-a-1"),
			want: granted(evict("zone-a-1"))},
		{name: "long-lapsed hold of the zone", view: withHold(group(), "zone-a", downscale, time.Hour), req: roll("zone-a", "zone-a-1"),
			want: granted(roll("zone-a", "zone-a-1"))},
	})
}

func TestDecideOtherZoneDisrupted(t *testing.T) {
	runDecideCases(t, []decideCase{
		{name: "not available", view: group(func(_, b, _ *zoneWrapper) { b.NotAvailable(1) }), req: evict("zone-a-0"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-b", "1 not available"}},
		{name: "terminating", view: group(func(_, _, c *zoneWrapper) { c.Terminating(0).Terminating(2) }), req: roll("zone-a", "zone-a-0"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-c", "2 terminating"}},
		{name: "missing", view: group(func(_, b, _ *zoneWrapper) { b.Missing(2) }), req: shrink("zone-a", 1),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-b", "1 missing"}},
		{name: "leaving after a scale-down", view: group(func(_, b, _ *zoneWrapper) { b.Leaving(3).Status(4, 4) }), req: evict("zone-a-0"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-b", "1 leaving"}},
		{name: "two zones named", view: group(func(_, b, c *zoneWrapper) { b.NotAvailable(0); c.Missing(0) }), req: evict("zone-a-0"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-b", "zone-c"}},
		// The StatefulSet controller's counts include pods no view may show yet.
		{name: "status.replicas above spec.replicas", view: group(func(_, b, _ *zoneWrapper) { b.Status(4, 4) }), req: roll("zone-a", "zone-a-0"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-b", "4 pods for 3 replicas"}},
		{name: "status.readyReplicas below status.replicas", view: group(func(_, _, c *zoneWrapper) { c.Status(3, 2) }), req: evict("zone-a-0"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-c", "2 of 3 pods Ready"}},
		{name: "the zone's own status does not count", view: group(func(a, _, _ *zoneWrapper) { a.Status(4, 2) }), req: evict("zone-a-0"),
			want: granted(evict("zone-a-0"))},
		{name: "the zone's own disruption does not count", view: group(func(a, _, _ *zoneWrapper) { a.Terminating(0).Max(2) }), req: evict("zone-a-1"),
			want: granted(evict("zone-a-1"))},
		{name: "an idle zone with no pod is whole", view: View{Now: testNow, Zones: []Zone{makeZone("zone-a", 2).Obj(), makeZone("zone-b", 0).Obj()}},
			req: evict("zone-a-0"), want: granted(evict("zone-a-0"))},
	})
}

// TestDecidePartitions: with a partition-aware budget an eviction looks only
// at the pods of its partition in the other zones.
func TestDecidePartitions(t *testing.T) {
	b1Down := func(_, b, _ *zoneWrapper) { b.NotAvailable(1) }
	runDecideCases(t, []decideCase{
		{name: "another partition's pod down does not block", view: group(b1Down), req: evictPartition("zone-a-2"),
			want: granted(evictPartition("zone-a-2"))},
		{name: "the same partition's pod down blocks", view: group(b1Down), req: evictPartition("zone-a-1"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"partition 1 in zone zone-b", "1 not available"}},
		{name: "the same partition's pod missing blocks", view: group(func(_, _, c *zoneWrapper) { c.Missing(0) }), req: evictPartition("zone-a-0"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"partition 0 in zone zone-c"}},
		{name: "a pod leaving in the partition blocks", view: group(func(_, b, _ *zoneWrapper) { b.Leaving(3) }), req: evictPartition("zone-a-3"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"partition 3"}},
		{name: "StatefulSet status is not read per partition", view: group(func(_, b, _ *zoneWrapper) { b.Status(4, 2) }), req: evictPartition("zone-a-0"),
			want: granted(evictPartition("zone-a-0"))},
		{name: "a pod whose name gives no partition is judged zone-wise", view: group(b1Down), req: evict("zone-a-2"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone zone-b"}},
		{name: "a rollout ignores partitions", view: group(b1Down), req: func() Request { r := roll("zone-a", "zone-a-2"); r.Partition = "2"; return r }(),
			want: denied(CodeOtherZoneDisrupted, 0)},
		{name: "the zone's maxUnavailable still holds", view: group(b1Down, func(a, _, _ *zoneWrapper) { a.NotAvailable(0) }), req: evictPartition("zone-a-2"),
			want: denied(CodeZoneBudget, 0)},
		{name: "another zone's hold still stops it", view: withHold(group(b1Down), "zone-b", eviction, time.Second), req: evictPartition("zone-a-2"),
			want: denied(CodeHeldByOtherZone, 14*time.Second)},
	})
}

func TestDecideCrossZoneDelay(t *testing.T) {
	delayed := func(v View) View { v.CrossZoneDelay = 30 * time.Second; return v }
	bBack := func(_, b, _ *zoneWrapper) {
		b.AvailableSince(0, testNow.Add(-time.Hour)).AvailableSince(2, testNow.Add(-10*time.Second))
	}
	cBack := func(_, _, c *zoneWrapper) { c.AvailableSince(1, testNow.Add(-25*time.Second)) }
	runDecideCases(t, []decideCase{
		{name: "a zone whole for less than the delay", view: delayed(group(bBack)), req: evict("zone-a-0"),
			want: denied(CodeCrossZoneDelay, 20*time.Second), message: []string{"zone-b", "2026-03-01T11:59:50Z", "2026-03-01T12:00:20Z"}},
		{name: "whole exactly for the delay", view: delayed(group(func(_, b, _ *zoneWrapper) { b.AvailableSince(1, testNow.Add(-30*time.Second)) })),
			req: evict("zone-a-0"), want: granted(evict("zone-a-0"))},
		{name: "no delay configured", view: group(bBack), req: evict("zone-a-0"), want: granted(evict("zone-a-0"))},
		{name: "the zone's own pods do not count", view: delayed(group(func(a, _, _ *zoneWrapper) { a.AvailableSince(1, testNow) })),
			req: evict("zone-a-0"), want: granted(evict("zone-a-0"))},
		{name: "rollouts do not wait for it", view: delayed(group(bBack)), req: roll("zone-a", "zone-a-0"), want: granted(roll("zone-a", "zone-a-0"))},
		{name: "downscales do not wait for it", view: delayed(group(bBack)), req: shrink("zone-a", 1), want: granted(shrink("zone-a", 1))},
		{name: "another partition came back", view: delayed(group(bBack)), req: evictPartition("zone-a-1"), want: granted(evictPartition("zone-a-1"))},
		{name: "the same partition came back", view: delayed(group(bBack, cBack)), req: evictPartition("zone-a-1"),
			want: denied(CodeCrossZoneDelay, 5*time.Second), message: []string{"zone-c"}},
	})
}

func TestDecideZoneBudget(t *testing.T) {
	runDecideCases(t, []decideCase{
		{name: "one pod not available, maxUnavailable 1", view: group(func(a, _, _ *zoneWrapper) { a.NotAvailable(2) }), req: evict("zone-a-0"),
			want: denied(CodeZoneBudget, 0), message: []string{"zone-a", "1 of 3 pods unavailable", "maxUnavailable 1"}},
		{name: "maxUnavailable 0", view: group(func(a, _, _ *zoneWrapper) { a.Max(0) }), req: evict("zone-a-0"),
			want: denied(CodeZoneBudget, 0), message: []string{"maxUnavailable 0"}},
		{name: "a rollout batch larger than the budget", view: group(func(a, _, _ *zoneWrapper) { a.Max(2) }), req: roll("zone-a", "zone-a-2", "zone-a-1", "zone-a-0"),
			want: denied(CodeZoneBudget, 0)},
		{name: "a rollout batch that fills the budget", view: group(func(a, _, _ *zoneWrapper) { a.Max(2).Missing(0) }), req: roll("zone-a", "zone-a-2"),
			want: granted(roll("zone-a", "zone-a-2"))},
		{name: "replacing a pod that is not available costs nothing", view: group(func(a, _, _ *zoneWrapper) { a.NotAvailable(2) }), req: evict("zone-a-2"),
			want: granted(evict("zone-a-2"))},
		{name: "replacing an unavailable pod with maxUnavailable 0", view: group(func(a, _, _ *zoneWrapper) { a.Max(0).NotAvailable(1).NotAvailable(2) }),
			req: roll("zone-a", "zone-a-1", "zone-a-2"), want: granted(roll("zone-a", "zone-a-1", "zone-a-2"))},
		{name: "a terminating pod costs nothing", view: group(func(a, _, _ *zoneWrapper) { a.Terminating(0) }), req: evict("zone-a-0"),
			want: granted(evict("zone-a-0"))},
		{name: "only the available pods of a batch cost", view: group(func(a, _, _ *zoneWrapper) { a.Max(2).NotAvailable(2) }),
			req: roll("zone-a", "zone-a-2", "zone-a-1"), want: granted(roll("zone-a", "zone-a-2", "zone-a-1"))},
		{name: "a pod leaving uses the budget", view: group(func(a, _, _ *zoneWrapper) { a.Leaving(3) }), req: evict("zone-a-0"),
			want: denied(CodeZoneBudget, 0), message: []string{"1 of 4 pods unavailable"}},
		{name: "a downscale is not judged by the budget", view: group(func(a, _, _ *zoneWrapper) { a.Max(0).NotAvailable(0) }), req: shrink("zone-a", 2),
			want: granted(shrink("zone-a", 2))},
	})
}

// TestDecideHoldReason: a hold a rollout or a downscale waits for keeps its
// reason until it lapses, whoever renews it in its zone.
func TestDecideHoldReason(t *testing.T) {
	renewed := func(req Request, reason v1alpha1.DisruptionReason, holder string, record bool) Verdict {
		v := granted(req)
		v.Hold.Since, v.Hold.Reason, v.Hold.Holder, v.Record = testNow.Add(-time.Hour), reason, holder, record
		return v
	}
	runDecideCases(t, []decideCase{
		{name: "a rollout under an eviction's hold records its own", view: withHold(group(), "zone-a", eviction, time.Second),
			req: roll("zone-a", "zone-a-0"), want: renewed(roll("zone-a", "zone-a-0"), rollout, "RolloutGroup ingester", true)},
		{name: "a downscale under an eviction's hold records its own", view: withHold(group(), "zone-a", eviction, time.Second),
			req: shrink("zone-a", 1), want: renewed(shrink("zone-a", 1), downscale, "ScalingPolicy ingester", true)},
		{name: "an eviction under a rollout's hold keeps it", view: withHold(group(), "zone-a", rollout, time.Second),
			req: evict("zone-a-0"), want: renewed(evict("zone-a-0"), rollout, "holder-zone-a", true)},
		{name: "an eviction renewing a rollout's hold keeps its reason", view: withHold(group(), "zone-a", rollout, 10*time.Second),
			req: evict("zone-a-0"), want: renewed(evict("zone-a-0"), rollout, "holder-zone-a", true)},
		{name: "an eviction renewing a downscale's hold keeps its reason", view: withHold(group(), "zone-a", downscale, 10*time.Second),
			req: evict("zone-a-0"), want: renewed(evict("zone-a-0"), downscale, "holder-zone-a", true)},
	})

	// The consequence: a rollout and a downscale of one zone never both go
	// within a lease, whatever evictions do between them.
	for _, tc := range []struct {
		name  string
		held  v1alpha1.DisruptionReason
		ago   time.Duration
		first Request
	}{
		{name: "rollout after an eviction", held: eviction, ago: time.Second, first: roll("zone-a", "zone-a-0")},
		{name: "eviction renewing a rollout's hold", held: rollout, ago: 10 * time.Second, first: evict("zone-a-0")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := withHold(group(), "zone-a", tc.held, tc.ago)
			first := Decide(v, tc.first)
			if !first.Allowed {
				t.Fatalf("first request refused: %s", first.Message)
			}
			if first.Record {
				v.Hold = &first.Hold
			}
			v.Now = v.Now.Add(time.Second)
			if second := Decide(v, shrink("zone-a", 1)); second.Allowed {
				t.Errorf("a downscale of zone-a is allowed within the lease of a rollout (hold %+v)", *v.Hold)
			}
		})
	}
}

// TestDecideEvictedPods: an eviction admitted under an unlapsed hold counts
// against its zone's budget until the hold lapses, even while the view still
// shows the pod available (the API server removes it after admission): two
// evictions judged a moment apart cannot both take the last slot.
func TestDecideEvictedPods(t *testing.T) {
	evicted := func(renewedAgo time.Duration, pods ...string) View {
		v := withHold(group(), "zone-a", eviction, renewedAgo)
		v.Hold.Evicted = evictedPods(pods...)
		return v
	}
	again := granted(evict("zone-a-0"))
	again.Hold.Since = testNow.Add(-time.Hour)
	withOther := granted(evict("zone-a-1"))
	withOther.Hold.Since, withOther.Hold.Evicted = testNow.Add(-time.Hour), evictedPods("zone-a-0", "zone-a-1")
	runDecideCases(t, []decideCase{
		{name: "a second pod while the first one's eviction is recorded", view: evicted(time.Second, "zone-a-0"),
			req: evict("zone-a-1"), want: denied(CodeZoneBudget, DefaultLease-time.Second), message: []string{"zone-a", "maxUnavailable 1"}},
		{name: "the same pod again costs nothing", view: evicted(time.Second, "zone-a-0"), req: evict("zone-a-0"), want: again},
		{name: "a rollout counts the recorded eviction too", view: evicted(time.Second, "zone-a-0"),
			req: roll("zone-a", "zone-a-1"), want: denied(CodeZoneBudget, DefaultLease-time.Second)},
		{name: "a lapsed hold's evictions are the view's to show", view: evicted(DefaultLease, "zone-a-0"),
			req: evict("zone-a-1"), want: granted(evict("zone-a-1"))},
		{name: "with room for two, the second is added to the record", view: func() View {
			v := evicted(time.Second, "zone-a-0")
			v.Zones[0].MaxUnavailable = 2
			return v
		}(), req: evict("zone-a-1"), want: withOther},
	})
}

// TestDecideEvictionsShown: a recorded eviction counts against its zone
// only while the view shows its pod still there; a hold stops other zones
// for its whole lease, whatever the pods show.
func TestDecideEvictionsShown(t *testing.T) {
	evictedIn := func(v View, pods ...string) View {
		v = withHold(v, "zone-a", eviction, time.Second)
		v.Hold.Evicted = evictedPods(pods...)
		return v
	}
	replaced := func(i int) func(a, _, _ *zoneWrapper) { return func(a, _, _ *zoneWrapper) { a.Replaced(i) } }
	runDecideCases(t, []decideCase{
		{name: "a replaced pod's record costs nothing in its zone", view: evictedIn(group(replaced(0)), "zone-a-0"),
			req: evict("zone-a-1"), want: func() Verdict {
				v := granted(evict("zone-a-1"))
				v.Hold.Since, v.Hold.Evicted = testNow.Add(-time.Hour), evictedPods("zone-a-0", "zone-a-1")
				return v
			}()},
		{name: "a record without a UID counts until the hold lapses", view: func() View {
			v := evictedIn(group(replaced(0)), "zone-a-0")
			v.Hold.Evicted[0].UID = ""
			return v
		}(), req: evict("zone-a-1"), want: denied(CodeZoneBudget, DefaultLease-time.Second)},
		{name: "another zone waits out the lease though the evicted pod is back", view: evictedIn(group(replaced(0)), "zone-a-0"),
			req: evict("zone-b-0"), want: denied(CodeHeldByOtherZone, DefaultLease-time.Second), message: []string{"zone-a"}},
	})
}
