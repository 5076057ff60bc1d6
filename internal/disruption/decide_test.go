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

// CreatedAt: pod i was created at t.
func (w *zoneWrapper) CreatedAt(i int, t time.Time) *zoneWrapper {
	w.z.Pods[i].Created = t
	return w
}

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

// ReadyUntil: pod i is Ready and becomes available at t, its group's
// minReadySeconds over.
func (w *zoneWrapper) ReadyUntil(i int, t time.Time) *zoneWrapper {
	w.NotAvailable(i)
	w.z.Pods[i].AvailableAt = t
	return w
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

// intentOf is an intent of reason by holder-<zone> decided ago before
// testNow, letting pods (as makeZone made them) go.
func intentOf(zone string, reason v1alpha1.DisruptionReason, ago time.Duration, pods ...string) Intent {
	in := Intent{Zone: zone, Reason: reason, Holder: "holder-" + zone, Decided: testNow.Add(-ago), Expires: testNow.Add(-ago).Add(ActWindow + expiryMargin)}
	for _, p := range pods {
		in.Pods = append(in.Pods, IntentPod{Name: p, UID: uidOf(p)})
	}
	return in
}

func withIntents(v View, intents ...Intent) View {
	v.Intents = append(v.Intents, intents...)
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

func shrink(zone string, pods ...string) Request {
	return Request{Zone: zone, Reason: downscale, Pods: pods, Holder: "ScalingPolicy ingester"}
}

// granted is the verdict allowing req, recorded after kept: an intent
// decided now naming its pods as makeZone made them.
func granted(req Request, kept ...Intent) Verdict {
	in := Intent{Zone: req.Zone, Reason: req.Reason, Holder: req.Holder, Decided: testNow, Expires: testNow.Add(ActWindow + expiryMargin)}
	for _, p := range req.Pods {
		in.Pods = append(in.Pods, IntentPod{Name: p, UID: uidOf(p)})
	}
	return Verdict{Allowed: true, Intent: in, Record: append(kept, in)}
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
	rolloutOpen := group()
	rolloutOpen.RolloutOpen = "zone-b"

	runDecideCases(t, []decideCase{
		{name: "eviction of a whole group", view: group(), req: evict("zone-a-0"), want: granted(evict("zone-a-0"))},
		{name: "a rollout batch over the budget", view: group(), req: roll("zone-b", "zone-b-2", "zone-b-1"), want: denied(CodeZoneBudget, 0)},
		{name: "rollout within the budget", view: group(), req: roll("zone-b", "zone-b-2"), want: granted(roll("zone-b", "zone-b-2"))},
		{name: "downscale of a whole group", view: group(), req: shrink("zone-c", "zone-c-2", "zone-c-1"), want: granted(shrink("zone-c", "zone-c-2", "zone-c-1"))},
		{name: "unknown zone", view: group(), req: evict("zone-d-0"), want: denied(CodeUnknownZone, 0), message: []string{"zone-d"}},
		{name: "downscale waits for an open rollout", view: rolloutOpen, req: shrink("zone-a", "zone-a-2"),
			want: denied(CodeRolloutInProgress, 0), message: []string{"zone-b"}},
		{name: "an open rollout lets an eviction through", view: rolloutOpen, req: evict("zone-a-0"), want: granted(evict("zone-a-0"))},
		{name: "an open rollout lets its own batch through", view: rolloutOpen, req: roll("zone-b", "zone-b-0"), want: granted(roll("zone-b", "zone-b-0"))},
	})
}

// TestDecideIntents: a recorded intent stops other zones while a pod it let
// go is still shown untouched, and no longer than that: once the view shows
// it going the pods speak, and once they are replaced and available the
// next zone goes at once. Its expiry only ends the intent of a holder that
// never acted.
func TestDecideIntents(t *testing.T) {
	replacedNow := func(a, _, _ *zoneWrapper) { a.Replaced(0).CreatedAt(0, testNow) }
	runDecideCases(t, []decideCase{
		{name: "another zone's pod not seen going", view: withIntents(group(), intentOf("zone-b", eviction, 5*time.Second, "zone-b-0")), req: evict("zone-a-0"),
			want: denied(CodeHeldByOtherZone, 40*time.Second), message: []string{"zone-b", "1 pod", "holder-zone-b", "2026-03-01T11:59:55Z"}},
		{name: "a rollout batch not seen going stops a downscale of another zone", view: withIntents(group(), intentOf("zone-c", rollout, time.Second, "zone-c-1", "zone-c-2")),
			req: shrink("zone-a", "zone-a-2"), want: denied(CodeHeldByOtherZone, 44*time.Second), message: []string{"zone-c", "downscale waits"}},
		{name: "another zone's pod terminating: the view says it", view: withIntents(group(func(_, b, _ *zoneWrapper) { b.Terminating(0) }), intentOf("zone-b", eviction, time.Second, "zone-b-0")),
			req: evict("zone-a-0"), want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-b", "1 terminating"}},
		{name: "another zone's pod replaced, not yet available", view: withIntents(group(func(_, b, _ *zoneWrapper) { b.Replaced(0).CreatedAt(0, testNow).NotAvailable(0) }), intentOf("zone-b", eviction, time.Second, "zone-b-0")),
			req: evict("zone-a-0"), want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-b", "1 not available"}},
		{name: "another zone's pod replaced and available: the next zone goes at once", view: withIntents(group(func(_, b, _ *zoneWrapper) { b.Replaced(0).CreatedAt(0, testNow) }), intentOf("zone-b", eviction, time.Second, "zone-b-0")),
			req: evict("zone-a-0"), want: granted(evict("zone-a-0"))},
		{name: "a pod created before the decision is not its replacement: a view older than the intent's pod counts it untouched", view: withIntents(group(func(_, b, _ *zoneWrapper) { b.Replaced(0).CreatedAt(0, testNow.Add(-time.Minute)) }), intentOf("zone-b", eviction, time.Second, "zone-b-0")),
			req: evict("zone-a-0"), want: denied(CodeHeldByOtherZone, 44*time.Second), message: []string{"zone-b", "not seen going yet"}},
		{name: "an intent whose holder never acted ends at its expiry", view: withIntents(group(), intentOf("zone-b", rollout, ActWindow+expiryMargin, "zone-b-0")),
			req: evict("zone-a-0"), want: granted(evict("zone-a-0"))},
		{name: "a downscale's ordinals gone", view: withIntents(group(), intentOf("zone-b", downscale, time.Second, "zone-b-3")),
			req: roll("zone-a", "zone-a-0"), want: granted(roll("zone-a", "zone-a-0"))},
		{name: "a downscale's ordinal still leaving stops a rollout of its zone", view: withIntents(group(func(a, _, _ *zoneWrapper) { a.Leaving(3) }), intentOf("zone-a", downscale, time.Second, "zone-a-3")),
			req: roll("zone-a", "zone-a-0"), want: denied(CodeHeldByOtherZone, 44*time.Second), message: []string{"downscale of zone zone-a", "rollout waits"}},
		{name: "the rollout's own zone done: the next zone at once", view: withIntents(group(replacedNow), intentOf("zone-a", rollout, 3*time.Second, "zone-a-0")),
			req: roll("zone-b", "zone-b-0"), want: granted(roll("zone-b", "zone-b-0"))},
		{name: "the rollout's own pending batch does not stop its next batch of the zone", view: withIntents(group(func(a, _, _ *zoneWrapper) { a.Max(2) }), intentOf("zone-a", rollout, time.Second, "zone-a-0")),
			req: roll("zone-a", "zone-a-1"), want: granted(roll("zone-a", "zone-a-1"), intentOf("zone-a", rollout, time.Second, "zone-a-0"))},
	})
}

// TestDecideIntentsInZone: the zone's own recorded pods count against its
// budget while shown untouched (finding 2 of issue 29: an eviction judged
// between a rollout's record and its deletes must see the batch).
func TestDecideIntentsInZone(t *testing.T) {
	batch := intentOf("zone-a", rollout, time.Second, "zone-a-0")
	runDecideCases(t, []decideCase{
		{name: "an eviction of the zone being rolled sees the batch about to go", view: withIntents(group(), batch),
			req: evict("zone-a-1"), want: denied(CodeZoneBudget, 44*time.Second), message: []string{"1 of 3 pods unavailable", "rollout"}},
		{name: "a rollout counts a recorded eviction", view: withIntents(group(), intentOf("zone-a", eviction, time.Second, "zone-a-0")),
			req: roll("zone-a", "zone-a-1"), want: denied(CodeZoneBudget, 44*time.Second)},
		{name: "the same pod again costs once", view: withIntents(group(), intentOf("zone-a", eviction, time.Second, "zone-a-0")),
			req: evict("zone-a-0"), want: granted(evict("zone-a-0"), intentOf("zone-a", eviction, time.Second, "zone-a-0"))},
		{name: "with room for two the second is recorded after the first", view: withIntents(group(func(a, _, _ *zoneWrapper) { a.Max(2) }), batch),
			req: evict("zone-a-1"), want: granted(evict("zone-a-1"), batch)},
		{name: "a pod the view shows going costs through the view alone", view: withIntents(group(func(a, _, _ *zoneWrapper) { a.Max(2).Terminating(0) }), batch),
			req: evict("zone-a-1"), want: granted(evict("zone-a-1"), batch)},
	})
}

// TestDecideRecord: the record written with an allowed decision keeps what
// is not seen done, oldest first, and drops what is.
func TestDecideRecord(t *testing.T) {
	done := intentOf("zone-b", eviction, time.Minute, "zone-b-0")
	expired := intentOf("zone-c", rollout, time.Hour, "zone-c-1")
	stuck := intentOf("zone-a", eviction, 2*time.Second, "zone-a-2")
	v := withIntents(group(func(a, b, _ *zoneWrapper) {
		b.Replaced(0).CreatedAt(0, testNow.Add(-30*time.Second))
		a.Max(2).Terminating(2)
	}), done, expired, stuck)
	got := Decide(v, evict("zone-a-0"))
	want := granted(evict("zone-a-0"), stuck)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Decide = %+v\nwant     %+v", got, want)
	}

	full := group()
	for range MaxIntents {
		full.Intents = append(full.Intents, intentOf("zone-a", eviction, time.Second, "zone-a-2"))
	}
	full.Zones[0].MaxUnavailable = 3
	if got := Decide(full, evict("zone-a-1")); got.Allowed || got.Code != CodeZoneBudget {
		t.Errorf("with %d intents recorded: Decide = %+v, want %s", MaxIntents, got, CodeZoneBudget)
	}
}

func TestDecideOtherZoneDisrupted(t *testing.T) {
	runDecideCases(t, []decideCase{
		{name: "not available", view: group(func(_, b, _ *zoneWrapper) { b.NotAvailable(1) }), req: evict("zone-a-0"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-b", "1 not available"}},
		{name: "terminating", view: group(func(_, _, c *zoneWrapper) { c.Terminating(0).Terminating(2) }), req: roll("zone-a", "zone-a-0"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-c", "2 terminating"}},
		{name: "missing", view: group(func(_, b, _ *zoneWrapper) { b.Missing(2) }), req: shrink("zone-a", "zone-a-2"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-b", "1 missing"}},
		{name: "leaving after a scale-down", view: group(func(_, b, _ *zoneWrapper) { b.Leaving(3).Status(4, 4) }), req: evict("zone-a-0"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-b", "1 leaving"}},
		{name: "two zones named", view: group(func(_, b, c *zoneWrapper) { b.NotAvailable(0); c.Missing(0) }), req: evict("zone-a-0"),
			want: denied(CodeOtherZoneDisrupted, 0), message: []string{"zone-b", "zone-c"}},
		// No event tells when a Ready pod's minReadySeconds is over: the
		// verdict says when to ask again, the earliest such moment.
		{name: "a pod that becomes available by time alone", view: group(func(_, b, c *zoneWrapper) {
			b.ReadyUntil(0, testNow.Add(3*time.Second)).NotAvailable(1)
			c.ReadyUntil(2, testNow.Add(2*time.Second))
		}), req: roll("zone-a", "zone-a-0"), want: denied(CodeOtherZoneDisrupted, 2*time.Second), message: []string{"zone-b", "zone-c", "2 not available"}},
		{name: "a pod whose minReadySeconds is over by now", view: group(func(_, b, _ *zoneWrapper) { b.ReadyUntil(0, testNow) }), req: evict("zone-a-0"),
			want: denied(CodeOtherZoneDisrupted, 0)},
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
		{name: "another zone's pod of the partition not seen going stops it", view: withIntents(group(), intentOf("zone-b", eviction, time.Second, "zone-b-2")),
			req: evictPartition("zone-a-2"), want: denied(CodeHeldByOtherZone, 44*time.Second)},
		{name: "another zone's pod of another partition not seen going does not", view: withIntents(group(), intentOf("zone-b", eviction, time.Second, "zone-b-1")),
			req: evictPartition("zone-a-2"), want: granted(evictPartition("zone-a-2"), intentOf("zone-b", eviction, time.Second, "zone-b-1"))},
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
		{name: "downscales do not wait for it", view: delayed(group(bBack)), req: shrink("zone-a", "zone-a-2"), want: granted(shrink("zone-a", "zone-a-2"))},
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
		{name: "the zone's pod becomes available by time alone", view: group(func(a, _, _ *zoneWrapper) { a.ReadyUntil(2, testNow.Add(4*time.Second)) }), req: evict("zone-a-0"),
			want: denied(CodeZoneBudget, 4*time.Second)},
		{name: "an intent expiring before the pod is available", view: withIntents(group(func(a, _, _ *zoneWrapper) { a.Max(2).ReadyUntil(2, testNow.Add(time.Hour)) }),
			intentOf("zone-a", eviction, ActWindow+expiryMargin-time.Second, "zone-a-1")), req: evict("zone-a-0"),
			want: denied(CodeZoneBudget, time.Second)},
		{name: "a pod leaving uses the budget", view: group(func(a, _, _ *zoneWrapper) { a.Leaving(3) }), req: evict("zone-a-0"),
			want: denied(CodeZoneBudget, 0), message: []string{"1 of 4 pods unavailable"}},
		{name: "a downscale is not judged by the budget", view: group(func(a, _, _ *zoneWrapper) { a.Max(0).NotAvailable(0) }), req: shrink("zone-a", "zone-a-2", "zone-a-1"),
			want: granted(shrink("zone-a", "zone-a-2", "zone-a-1"))},
	})
}

// TestDownscaleZoneDelayOnTheRecord: a downscale waits minTimeBetweenZone
// Downscales after another zone's downscale as the record shows it, even
// when that downscale is done (its pod gone) and the other zone's policy
// status does not show it yet: two followers deciding at one moment are
// ordered by the record's lock, and the second sees the first's intent
// (the compat e2e saw two zones scaled 545 ms apart under load, with a
// zone delay of 5 s, the delay read from the policies before either wrote).
func TestDownscaleZoneDelayOnTheRecord(t *testing.T) {
	decided := testNow.Add(-2 * time.Second)
	zoneB := makeZone("zone-b", 3).Obj()
	zoneB.Pods = zoneB.Pods[:2] // ordinal 2 removed: the downscale is done
	zoneB.Replicas, zoneB.StatusReplicas, zoneB.StatusReady = 2, 2, 2
	v := View{Now: testNow, Zones: []Zone{makeZone("zone-a", 3).Obj(), zoneB, makeZone("zone-c", 3).Obj()},
		Intents: []Intent{{Zone: "zone-b", Reason: downscale, Holder: "ScalingPolicy zone-b", Decided: decided, Expires: decided.Add(ActWindow + expiryMargin),
			Pods: []IntentPod{{Name: "zone-b-2", UID: uidOf("zone-b-2")}}}}}
	req := Request{Zone: "zone-c", Reason: downscale, Holder: "ScalingPolicy zone-c", Pods: []string{"zone-c-2"}, ZoneDelay: 5 * time.Second}
	got := Decide(v, req)
	if got.Allowed || got.Code != CodeZoneDelay || got.RetryAfter != 4*time.Second {
		t.Fatalf("zone-c 2 s after zone-b, delay 5 s: allowed=%v code=%s retry=%s (%s), want ZoneDelay, retry 4s", got.Allowed, got.Code, got.RetryAfter, got.Message)
	}
	if !strings.Contains(got.Message, "zone-b") {
		t.Errorf("message %q does not name zone-b", got.Message)
	}
	// Without a delay, or once it has passed, the downscale goes.
	req.ZoneDelay = 0
	if got := Decide(v, req); !got.Allowed {
		t.Errorf("no zone delay: refused (%s)", got.Message)
	}
	req.ZoneDelay, v.Now = 5*time.Second, decided.Truncate(time.Second).Add(6*time.Second)
	if got := Decide(v, req); !got.Allowed {
		t.Errorf("6 s after zone-b: refused (%s)", got.Message)
	}
	// The zone's own earlier downscale does not delay it.
	req.Zone, req.Pods, req.ZoneDelay, v.Now = "zone-b", []string{"zone-b-1"}, 5*time.Second, testNow
	if got := Decide(v, req); got.Code == CodeZoneDelay {
		t.Errorf("zone-b delayed by its own downscale: %s", got.Message)
	}
}
