package disruption

import (
	"reflect"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

const testNamespace = "default"

// zonePods indexes a zone's pods by name, failing on a name seen twice.
func zonePods(t *testing.T, z Zone) map[string]Pod {
	t.Helper()
	m := map[string]Pod{}
	for _, p := range z.Pods {
		if _, dup := m[p.Name]; dup {
			t.Fatalf("pod %s appears twice in zone %s", p.Name, z.Name)
		}
		m[p.Name] = p
	}
	return m
}

func checkPods(t *testing.T, z Zone, want map[string]Pod) {
	t.Helper()
	got := zonePods(t, z)
	for name, w := range want {
		w.Name = name
		g, ok := got[name]
		if ok && g.Missing != (g.UID == "") {
			t.Errorf("pod %s: Missing %v with UID %q; a pod the view shows carries its UID, a missing one none", name, g.Missing, g.UID)
		}
		g.UID = ""
		if !ok {
			t.Errorf("zone %s has no pod %s", z.Name, name)
		} else if !reflect.DeepEqual(g, w) {
			t.Errorf("pod %s = %+v\nwant     %+v", name, g, w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("zone %s has pods %v, want %d", z.Name, reflect.ValueOf(got).MapKeys(), len(want))
	}
}

// TestZoneOfOrdinals: the zone has a pod, or a Missing one, for each wanted
// ordinal from spec.ordinals.start, and reports the others as not Wanted.
func TestZoneOfOrdinals(t *testing.T) {
	sts := builders.MakeStatefulSet(testNamespace, "ing-zone-a").Replicas(3).OrdinalsStart(1).StatusReplicas(4, 3).Obj()
	pod := func(ord int) *corev1.Pod {
		return builders.MakePod(testNamespace, "ing-zone-a", ord).ControlledBy(sts).Obj()
	}
	other := builders.MakePod(testNamespace, "ing-zone-b", 2).Obj()
	stray := builders.MakePod(testNamespace, "ing-zone-a", 1).Obj()
	stray.Name = "ing-zone-a-01" // not a StatefulSet pod name: ignored
	z := ZoneOf(sts, []*corev1.Pod{pod(4), pod(0), pod(1), other, stray, pod(3)}, ZoneOptions{MaxUnavailable: 2, Now: testNow})

	if z.Name != "ing-zone-a" || z.Replicas != 3 || z.StatusReplicas != 4 || z.StatusReady != 3 || z.MaxUnavailable != 2 {
		t.Errorf("zone = %s replicas %d status %d/%d maxUnavailable %d, want ing-zone-a 3 4/3 2",
			z.Name, z.Replicas, z.StatusReplicas, z.StatusReady, z.MaxUnavailable)
	}
	checkPods(t, z, map[string]Pod{
		"ing-zone-a-0": {Available: true}, // below spec.ordinals.start
		"ing-zone-a-1": {Wanted: true, Available: true},
		"ing-zone-a-2": {Wanted: true, Missing: true},
		"ing-zone-a-3": {Wanted: true, Available: true},
		"ing-zone-a-4": {Available: true}, // left by a scale-down
	})
	if got := z.Unavailable(); got != 3 {
		t.Errorf("Unavailable() = %d, want 3 (one missing, two leaving)", got)
	}

	nilReplicas := builders.MakeStatefulSet(testNamespace, "ing-zone-b").NilReplicas().Obj()
	checkPods(t, ZoneOf(nilReplicas, nil, ZoneOptions{Now: testNow}), map[string]Pod{"ing-zone-b-0": {Wanted: true, Missing: true}})
	scaledToZero := builders.MakeStatefulSet(testNamespace, "ing-zone-c").Replicas(0).Obj()
	checkPods(t, ZoneOf(scaledToZero, nil, ZoneOptions{Now: testNow}), map[string]Pod{})
}

// TestZoneOfAvailability: a pod is available once Ready for minReadySeconds
// and not terminating, whether the API shows its deletion or only this
// process knows of it.
func TestZoneOfAvailability(t *testing.T) {
	sts := builders.MakeStatefulSet(testNamespace, "ing").Replicas(7).Obj()
	pod := func(ord int) *builders.PodWrapper {
		return builders.MakePod(testNamespace, "ing", ord).ControlledBy(sts)
	}
	deleted := pod(1).Obj()
	pods := []*corev1.Pod{
		pod(0).Ready(testNow.Add(-time.Minute)).Obj(),
		deleted,
		pod(2).Terminating(testNow).Obj(),
		pod(3).Ready(testNow.Add(-5 * time.Second)).Obj(),
		pod(4).Ready(testNow.Add(-10 * time.Second)).Obj(),
		pod(5).NotReady().Obj(),
		pod(6).Phase(corev1.PodPending).Obj(),
	}
	z := ZoneOf(sts, pods, ZoneOptions{MinReadySeconds: 10, Now: testNow, Deleting: sets.New(deleted.UID, types.UID("gone"))})
	checkPods(t, z, map[string]Pod{
		"ing-0": {Wanted: true, Available: true, AvailableSince: testNow.Add(-50 * time.Second)},
		"ing-1": {Wanted: true, Terminating: true},
		"ing-2": {Wanted: true, Terminating: true},
		"ing-3": {Wanted: true, AvailableAt: testNow.Add(5 * time.Second)}, // Ready 5 s of minReadySeconds 10
		"ing-4": {Wanted: true, Available: true, AvailableSince: testNow},  // Ready exactly 10 s
		"ing-5": {Wanted: true},
		"ing-6": {Wanted: true}, // a Ready condition is stale on a pod not Running
	})
	// Without the Deleting set the pod is as the view shows it.
	checkPods(t, ZoneOf(sts, []*corev1.Pod{deleted}, ZoneOptions{Now: testNow}), map[string]Pod{
		"ing-1": {Wanted: true, Available: true},
		"ing-0": {Wanted: true, Missing: true}, "ing-2": {Wanted: true, Missing: true}, "ing-3": {Wanted: true, Missing: true},
		"ing-4": {Wanted: true, Missing: true}, "ing-5": {Wanted: true, Missing: true}, "ing-6": {Wanted: true, Missing: true},
	})
}

// TestZoneOfPartitions: every pod, a missing one too, carries the partition
// its name gives.
func TestZoneOfPartitions(t *testing.T) {
	partition, err := PartitionFunc(`^ingester-zone-[a-z]-(\d+)$`, 1)
	if err != nil {
		t.Fatal(err)
	}
	sts := builders.MakeStatefulSet(testNamespace, "ingester-zone-a").Replicas(2).Obj()
	pods := []*corev1.Pod{builders.MakePod(testNamespace, "ingester-zone-a", 0).Obj(), builders.MakePod(testNamespace, "ingester-zone-a", 2).Obj()}
	checkPods(t, ZoneOf(sts, pods, ZoneOptions{Now: testNow, Partition: partition}), map[string]Pod{
		"ingester-zone-a-0": {Wanted: true, Available: true, Partition: "0"},
		"ingester-zone-a-1": {Wanted: true, Missing: true, Partition: "1"},
		"ingester-zone-a-2": {Available: true, Partition: "2"},
	})
	checkPods(t, ZoneOf(sts, pods[:1], ZoneOptions{Now: testNow}), map[string]Pod{
		"ingester-zone-a-0": {Wanted: true, Available: true},
		"ingester-zone-a-1": {Wanted: true, Missing: true},
	})
}

func TestPartitionFunc(t *testing.T) {
	for _, tc := range []struct {
		name    string
		regex   string
		group   int32
		wantErr bool
		names   map[string]string // pod name -> partition
	}{
		{name: "not partition-aware", regex: ""},
		{name: "Mimir ingesters", regex: `^ingester-zone-[a-z]-(\d+)$`, group: 1, names: map[string]string{
			"ingester-zone-a-7": "7", "ingester-zone-c-12": "12", "ingester-zone-a": "", "distributor-0": "", "ingester-zone-a-x": ""}},
		{name: "the second group", regex: `^(\w+)-zone-([a-z])-(\d+)$`, group: 3, names: map[string]string{"ingester-zone-b-3": "3", "ingester-3": ""}},
		{name: "group 0 is the whole match", regex: `\d+$`, group: 0, names: map[string]string{"ing-zone-a-5": "5", "ing": ""}},
		{name: "an optional group that does not take part", regex: `^ing(-p(\d+))?-`, group: 2, names: map[string]string{"ing-p4-zone-a-0": "4", "ing-zone-a-0": ""}},
		{name: "a regex that does not compile", regex: `ingester-(\d+`, group: 1, wantErr: true},
		{name: "a group past the regex's", regex: `ingester-(\d+)`, group: 2, wantErr: true},
		{name: "a negative group", regex: `ingester-(\d+)`, group: -1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := PartitionFunc(tc.regex, tc.group)
			if (err != nil) != tc.wantErr {
				t.Fatalf("PartitionFunc(%q, %d) error = %v, want error %v", tc.regex, tc.group, err, tc.wantErr)
			}
			if tc.regex == "" || tc.wantErr {
				if f != nil {
					t.Errorf("PartitionFunc(%q, %d) returned a function, want nil", tc.regex, tc.group)
				}
				return
			}
			for name, want := range tc.names {
				if got := f(name); got != want {
					t.Errorf("partition of %s = %q, want %q", name, got, want)
				}
			}
		})
	}
}

func TestIntentRecordRoundTrip(t *testing.T) {
	if IntentsOf(nil) != nil || RecordOf(nil) != nil {
		t.Errorf("IntentsOf(nil), RecordOf(nil) not nil")
	}
	in := Intent{Zone: "zone-a", Reason: v1alpha1.DisruptionEviction, Holder: "eviction of pod zone-a-0", Decided: testNow,
		Expires: testNow.Add(ActWindow + expiryMargin), Pods: []IntentPod{{Name: "zone-a-0", UID: "u0"}}}
	rec := RecordOf([]Intent{in})
	want := &v1alpha1.DisruptionHold{Intents: []v1alpha1.DisruptionIntent{{Zone: "zone-a", Reason: v1alpha1.DisruptionEviction,
		Holder: "eviction of pod zone-a-0", DecidedAt: metav1.NewTime(testNow), ExpiresAt: metav1.NewTime(testNow.Add(45 * time.Second)),
		Pods: []v1alpha1.IntentPod{{Name: "zone-a-0", UID: "u0"}}}}}
	if !reflect.DeepEqual(rec, want) {
		t.Errorf("RecordOf() = %+v, want %+v", rec, want)
	}
	if back := IntentsOf(rec); !reflect.DeepEqual(back, []Intent{in}) {
		t.Errorf("IntentsOf(RecordOf()) = %+v, want %+v", back, in)
	}
	// The API keeps whole seconds: a decision is read back made at the
	// start of its second, its expiry rounded up, never earlier than
	// decided: the act's fence (ActDeadline) stays inside it.
	in.Decided, in.Expires = testNow.Add(900*time.Millisecond), testNow.Add(900*time.Millisecond+ActWindow+expiryMargin)
	back := IntentsOf(RecordOf([]Intent{in}))[0]
	if !back.Decided.Equal(testNow) || !back.Expires.Equal(testNow.Add(46*time.Second)) {
		t.Errorf("read back decided %v, expiring %v; want %v, %v", back.Decided, back.Expires, testNow, testNow.Add(46*time.Second))
	}
	if !ActDeadline(in.Decided).Before(back.Expires) {
		t.Errorf("the act's deadline %v is not before the recorded expiry %v", ActDeadline(in.Decided), back.Expires)
	}
}

func TestResolveBudget(t *testing.T) {
	for _, tc := range []struct {
		value    *intstr.IntOrString
		replicas int32
		def      int32
		want     int32
	}{
		{value: nil, replicas: 10, def: 3, want: 3},
		{value: ptr.To(intstr.FromInt32(0)), replicas: 10, def: 3, want: 0},
		{value: ptr.To(intstr.FromInt32(2)), replicas: 10, def: 1, want: 2},
		{value: ptr.To(intstr.FromInt32(20)), replicas: 10, def: 1, want: 20},
		{value: ptr.To(intstr.FromString("25%")), replicas: 10, def: 1, want: 2}, // 2.5 rounds down
		{value: ptr.To(intstr.FromString("9%")), replicas: 10, def: 1, want: 0},
		{value: ptr.To(intstr.FromString("0%")), replicas: 10, def: 1, want: 0},
		{value: ptr.To(intstr.FromString("100%")), replicas: 7, def: 1, want: 7},
		{value: ptr.To(intstr.FromString("50%")), replicas: 0, def: 1, want: 0},
		{value: ptr.To(intstr.FromString("many")), replicas: 10, def: 1, want: 0}, // refuses rather than guesses
		{value: ptr.To(intstr.FromInt32(-1)), replicas: 10, def: 1, want: 0},
	} {
		if got := ResolveBudget(tc.value, tc.replicas, tc.def); got != tc.want {
			t.Errorf("ResolveBudget(%v, %d, %d) = %d, want %d", tc.value, tc.replicas, tc.def, got, tc.want)
		}
	}
}

// TestZoneOfReleased: a RollingUpdate StatefulSet's pods at or above its
// partition that are not on its update revision may be taken down by the
// StatefulSet controller at any moment: not available. An OnDelete
// StatefulSet's outdated pods, and those below the partition, are.
func TestZoneOfReleased(t *testing.T) {
	ready := func(sts *appsv1.StatefulSet, ord int, rev string) *corev1.Pod {
		return builders.MakePod(testNamespace, sts.Name, ord).ControlledBy(sts).Revision(rev).Ready(testNow.Add(-time.Minute)).Obj()
	}
	partitioned := builders.MakeStatefulSet(testNamespace, "ing-zone-a").Replicas(4).Partition(2).Revision("new").Obj()
	pods := []*corev1.Pod{ready(partitioned, 0, "old"), ready(partitioned, 1, "old"), ready(partitioned, 2, "old"), ready(partitioned, 3, "new")}
	checkPods(t, ZoneOf(partitioned, pods, ZoneOptions{Now: testNow}), map[string]Pod{
		"ing-zone-a-0": {Wanted: true, Available: true, AvailableSince: testNow.Add(-time.Minute)},
		"ing-zone-a-1": {Wanted: true, Available: true, AvailableSince: testNow.Add(-time.Minute)},
		"ing-zone-a-2": {Wanted: true}, // released, not replaced yet
		"ing-zone-a-3": {Wanted: true, Available: true, AvailableSince: testNow.Add(-time.Minute)},
	})
	onDelete := builders.MakeStatefulSet(testNamespace, "ing-zone-b").Replicas(1).OnDelete().Revision("new").Obj()
	checkPods(t, ZoneOf(onDelete, []*corev1.Pod{ready(onDelete, 0, "old")}, ZoneOptions{Now: testNow}), map[string]Pod{
		"ing-zone-b-0": {Wanted: true, Available: true, AvailableSince: testNow.Add(-time.Minute)},
	})
}

// TestWithdrawn: pods an act did not take leave their intent, which goes
// once empty; other intents, and one decided in another second, stay.
func TestWithdrawn(t *testing.T) {
	in := Intent{Zone: "zone-a", Reason: v1alpha1.DisruptionRollout, Holder: "RolloutGroup ingester", Decided: testNow.Add(300 * time.Millisecond),
		Pods: []IntentPod{{Name: "zone-a-0", UID: "u0"}, {Name: "zone-a-1", UID: "u1"}}}
	other := Intent{Zone: "zone-b", Reason: v1alpha1.DisruptionEviction, Holder: "eviction of pod zone-b-0", Decided: testNow, Pods: []IntentPod{{Name: "zone-b-0"}}}
	older := in
	older.Decided = testNow.Add(-time.Second)
	record := IntentsOf(RecordOf([]Intent{older, in, other}))

	got, changed := Withdrawn(record, in, []string{"zone-a-1"})
	if !changed || len(got) != 3 || len(got[1].Pods) != 1 || got[1].Pods[0].Name != "zone-a-0" || len(got[0].Pods) != 2 {
		t.Errorf("withdrawing zone-a-1: %+v (changed %v), want it gone from the intent decided then alone", got, changed)
	}
	got, changed = Withdrawn(got, in, []string{"zone-a-0"})
	if !changed || len(got) != 2 || got[0].Decided != older.Decided || got[1].Zone != "zone-b" {
		t.Errorf("withdrawing its last pod: %+v (changed %v), want the intent dropped", got, changed)
	}
	if _, changed := Withdrawn(got, in, []string{"zone-a-0"}); changed {
		t.Errorf("withdrawing again changed the record")
	}
}
