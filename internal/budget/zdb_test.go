package budget

import (
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/test/builders"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// zdbZone is a StatefulSet of replicas pods, each Ready long ago unless
// listed in notReady.
func zdbZone(name string, replicas int32, notReady ...int) ZDBZone {
	sts := builders.MakeStatefulSet("ns", name).Replicas(replicas).Obj()
	var pods []*corev1.Pod
	for i := range int(replicas) {
		p := builders.MakePod("ns", name, i).ControlledBy(sts)
		for _, n := range notReady {
			if n == i {
				p.NotReady()
			}
		}
		pods = append(pods, p.Obj())
	}
	return ZDBZone{StatefulSet: sts, Pods: pods}
}

// recorded is a ZoneDisruptionBudget's record of one eviction of zone's
// pods at ordinals, decided at decided, as the zones show them (their UIDs).
func recorded(zone, holder string, decided time.Time, ordinals ...int) func([]ZDBZone) *v1alpha1.DisruptionHold {
	return func(zones []ZDBZone) *v1alpha1.DisruptionHold {
		in := disruption.Intent{Zone: zone, Reason: v1alpha1.DisruptionEviction, Holder: holder, Decided: decided, Expires: decided.Add(disruption.ActWindow + 15*time.Second)}
		for _, z := range zones {
			if z.StatefulSet.Name != zone {
				continue
			}
			for _, o := range ordinals {
				in.Pods = append(in.Pods, disruption.IntentPod{Name: z.Pods[o].Name, UID: z.Pods[o].UID})
			}
		}
		return disruption.RecordOf([]disruption.Intent{in})
	}
}

func zdb(b v1alpha1.ZoneBudget) *v1alpha1.ZoneDisruptionBudget {
	return &v1alpha1.ZoneDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "store"},
		Spec: v1alpha1.ZoneDisruptionBudgetSpec{
			Selector:   metav1.LabelSelector{MatchLabels: map[string]string{"app": "store"}},
			ZoneBudget: b,
		},
	}
}

func evict(zone, pod, partition string) disruption.Request {
	return disruption.Request{Zone: zone, Reason: v1alpha1.DisruptionEviction, Pods: []string{pod}, Partition: partition, Holder: "eviction of pod " + pod}
}

// TestViewOfZDB: each StatefulSet is a zone, by name, with the budget's
// maxUnavailable (1 by default, percentages of the zone's replicas), the
// StatefulSet's own minReadySeconds and the budget's recorded intents, delay and
// partitions; the evictions Decide then admits are those a
// ZoneAwarePodDisruptionBudget would.
func TestViewOfZDB(t *testing.T) {
	longAgo := now.Add(-time.Hour)
	justReady := func(z ZDBZone, i int) ZDBZone {
		z.Pods[i].Status.Conditions[0].LastTransitionTime = metav1.NewTime(now.Add(-5 * time.Second))
		return z
	}
	for _, tc := range []struct {
		name    string
		budget  v1alpha1.ZoneBudget
		hold    func([]ZDBZone) *v1alpha1.DisruptionHold
		zones   []ZDBZone
		minRdy  int32
		req     disruption.Request
		allowed bool
		code    string
		msg     string
	}{{
		name:    "a whole group: one pod of a zone may go",
		zones:   []ZDBZone{zdbZone("store-b", 3), zdbZone("store-a", 3)},
		req:     evict("store-a", "store-a-0", ""),
		allowed: true,
	}, {
		name:  "default maxUnavailable is 1: a second pod of the zone waits",
		zones: []ZDBZone{zdbZone("store-a", 3, 1), zdbZone("store-b", 3)},
		req:   evict("store-a", "store-a-0", ""),
		code:  disruption.CodeZoneBudget,
		msg:   "zone store-a has 1 of 3 pods unavailable and maxUnavailable 1",
	}, {
		name:    "a percentage of the zone's replicas",
		budget:  v1alpha1.ZoneBudget{MaxUnavailable: ptr.To(intstr.FromString("50%"))},
		zones:   []ZDBZone{zdbZone("store-a", 4, 1), zdbZone("store-b", 4)},
		req:     evict("store-a", "store-a-0", ""),
		allowed: true,
	}, {
		name:  "another zone not available",
		zones: []ZDBZone{zdbZone("store-a", 3), zdbZone("store-b", 3, 2)},
		req:   evict("store-a", "store-a-0", ""),
		code:  disruption.CodeOtherZoneDisrupted,
		msg:   "zone store-b (1 not available) is disrupted",
	}, {
		name:    "partition-aware: another partition of the other zone does not stop it",
		budget:  v1alpha1.ZoneBudget{PodNamePartitionRegex: `^store-[a-z]-(\d+)$`},
		zones:   []ZDBZone{zdbZone("store-a", 3), zdbZone("store-b", 3, 2)},
		req:     evict("store-a", "store-a-0", "0"),
		allowed: true,
	}, {
		name:   "partition-aware: the same partition in the other zone does",
		budget: v1alpha1.ZoneBudget{PodNamePartitionRegex: `^store-[a-z]-(\d+)$`},
		zones:  []ZDBZone{zdbZone("store-a", 3), zdbZone("store-b", 3, 2)},
		req:    evict("store-a", "store-a-2", "2"),
		code:   disruption.CodeOtherZoneDisrupted,
		msg:    "partition 2 in zone store-b (1 not available) is disrupted",
	}, {
		name:   "crossZoneDelay after another zone became whole",
		budget: v1alpha1.ZoneBudget{CrossZoneDelay: &metav1.Duration{Duration: time.Minute}},
		zones:  []ZDBZone{zdbZone("store-a", 3), justReady(zdbZone("store-b", 3), 1)},
		req:    evict("store-a", "store-a-0", ""),
		code:   disruption.CodeCrossZoneDelay,
		msg:    "crossZoneDelay 1m0s",
	}, {
		name:   "the StatefulSet's minReadySeconds: a pod Ready for less is not available",
		zones:  []ZDBZone{zdbZone("store-a", 3), justReady(zdbZone("store-b", 3), 1)},
		minRdy: 30,
		req:    evict("store-a", "store-a-0", ""),
		code:   disruption.CodeOtherZoneDisrupted,
		msg:    "zone store-b (1 not available) is disrupted",
	}, {
		name:  "another zone's recorded eviction, its pod shown untouched",
		hold:  recorded("store-b", "eviction of pod store-b-1", now.Add(-2*time.Second), 1),
		zones: []ZDBZone{zdbZone("store-a", 3), zdbZone("store-b", 3)},
		req:   evict("store-a", "store-a-0", ""),
		code:  disruption.CodeHeldByOtherZone,
		msg:   "(eviction of pod store-b-1) was allowed to take at 2026-03-01T11:59:58Z, not seen going yet) holds the disruption budget",
	}, {
		name: "another zone's recorded eviction, its pod seen replaced and available: the next zone goes at once",
		hold: func(zones []ZDBZone) *v1alpha1.DisruptionHold {
			h := recorded("store-b", "eviction of pod store-b-1", now.Add(-2*time.Second), 1)(zones)
			h.Intents[0].Pods[0].UID += "-before"
			zones[1].Pods[1].CreationTimestamp = metav1.NewTime(now.Add(-time.Second))
			return h
		},
		zones:   []ZDBZone{zdbZone("store-a", 3), zdbZone("store-b", 3)},
		req:     evict("store-a", "store-a-0", ""),
		allowed: true,
	}, {
		name:    "an expired intent of another zone, its pod untouched (never acted on), stops nothing",
		hold:    recorded("store-b", "eviction of pod store-b-1", longAgo, 1),
		zones:   []ZDBZone{zdbZone("store-a", 3), zdbZone("store-b", 3)},
		req:     evict("store-a", "store-a-0", ""),
		allowed: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			z := zdb(tc.budget)
			if tc.hold != nil {
				z.Status.Disruption = tc.hold(tc.zones)
			}
			for _, zone := range tc.zones {
				zone.StatefulSet.Spec.MinReadySeconds = tc.minRdy
			}
			v, err := ViewOfZDB(z, tc.zones, now)
			if err != nil {
				t.Fatal(err)
			}
			if len(v.Zones) != len(tc.zones) || v.Zones[0].Name > v.Zones[len(v.Zones)-1].Name {
				t.Fatalf("zones %v: want one per StatefulSet, by name", v.Zones)
			}
			got := disruption.Decide(v, tc.req)
			if got.Allowed != tc.allowed || got.Code != tc.code || !strings.Contains(got.Message, tc.msg) {
				t.Errorf("Decide = allowed %t code %q %q, want allowed %t code %q containing %q", got.Allowed, got.Code, got.Message, tc.allowed, tc.code, tc.msg)
			}
			if !got.Allowed {
				if len(got.Record) != 0 {
					t.Errorf("refused with record %+v: want nothing recorded", got.Record)
				}
				return
			}
			in := got.Intent
			if in.Zone != tc.req.Zone || in.Reason != v1alpha1.DisruptionEviction || in.Holder != tc.req.Holder || !in.Decided.Equal(now) ||
				len(in.Pods) != 1 || in.Pods[0].Name != tc.req.Pods[0] || in.Pods[0].UID == "" {
				t.Errorf("allowed with intent %+v: want the zone's eviction of %s, decided now, naming the pod and its UID", in, tc.req.Pods[0])
			}
			if len(got.Record) == 0 || !reflect.DeepEqual(got.Record[len(got.Record)-1], in) {
				t.Errorf("record %+v: want it to end with the intent", got.Record)
			}
			if len(got.Record) != 1 {
				t.Errorf("record %+v: want only the new intent, the other zone's being done", got.Record)
			}
		})
	}
}

func TestViewOfZDBInvalidRegex(t *testing.T) {
	_, err := ViewOfZDB(zdb(v1alpha1.ZoneBudget{PodNamePartitionRegex: `(`}), []ZDBZone{zdbZone("store-a", 1)}, now)
	if err == nil || !strings.Contains(err.Error(), "spec.podNamePartitionRegex") {
		t.Errorf("err %v, want one naming spec.podNamePartitionRegex", err)
	}
}

func TestZDBSelector(t *testing.T) {
	empty := zdb(v1alpha1.ZoneBudget{})
	empty.Spec.Selector = metav1.LabelSelector{}
	if _, err := ZDBSelector(empty); err == nil {
		t.Error("an empty selector was accepted: it would select every pod of the namespace")
	}
	sel, err := ZDBSelector(zdb(v1alpha1.ZoneBudget{}))
	if err != nil || !sel.Matches(labels.Set{"app": "store"}) {
		t.Errorf("selector %v, %v: want app=store", sel, err)
	}
}
