package resize

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

var testNow = time.Date(2026, time.March, 1, 12, 0, 0, 0, time.UTC)

const ns = "ns"

// world is three zones a, b, c of replicas pods with claims data-<zone>-i
// of 10Gi in class "fast", asked to grow to 20Gi.
type world struct{ in Input }

func newWorld(replicas, claims int) *world {
	w := &world{in: Input{Now: testNow, Expandable: map[string]bool{"fast": true, "slow": false},
		Sizes: []v1alpha1.VolumeClaimSize{builders.MakeRolloutGroup(ns, "g").VolumeClaimSize("data", "20Gi").Obj().Spec.VolumeClaimSizes[0]}}}
	for _, name := range []string{"a", "b", "c"} {
		sts := builders.MakeStatefulSet(ns, name).Replicas(int32(replicas)).VolumeClaimTemplate("data", "10Gi", "fast").
			Label("team", "x").Obj()
		sts.Annotations = map[string]string{"meta.helm.sh/release-name": "r"}
		sts.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "owner-uid"}}
		z := Zone{Name: name, StatefulSet: sts, Pods: map[string]Pod{}, MaxUnavailable: 1}
		for i := range claims {
			c, _ := ClaimOf(builders.MakeClaim(ns, "data", name, i, "10Gi", "fast").Obj(), sts)
			z.Claims = append(z.Claims, c)
		}
		for i := range replicas {
			p := podName(name, i)
			z.Pods[p] = Pod{Name: p, UID: types.UID("uid-" + p), Created: testNow.Add(-time.Hour), Ready: true}
		}
		w.in.Zones = append(w.in.Zones, z)
	}
	return w
}

func (w *world) held(zone string) *world {
	w.in.HeldZone, w.in.HeldUntil = zone, testNow.Add(2*time.Minute)
	return w
}

// claims applies f to every claim of zone.
func (w *world) claims(zone string, f func(*Claim)) *world {
	for i := range w.in.Zones {
		if w.in.Zones[i].Name == zone {
			for j := range w.in.Zones[i].Claims {
				f(&w.in.Zones[i].Claims[j])
			}
		}
	}
	return w
}

func grown(c *Claim)   { c.Requested, c.Capacity = mustQ("20Gi"), mustQ("20Gi") }
func patched(c *Claim) { c.Requested = mustQ("20Gi") }

// done makes zone resized and replaced.
func (w *world) done(zone string) *world {
	w.claims(zone, grown)
	z := w.zone(zone)
	z.StatefulSet = RecreateObject(z.StatefulSet, w.in.Sizes)
	z.StatefulSet.UID = types.UID("uid-" + zone + "-again")
	return w
}

func (w *world) zone(name string) *Zone {
	for i := range w.in.Zones {
		if w.in.Zones[i].Name == name {
			return &w.in.Zones[i]
		}
	}
	panic(name)
}

func TestDecide(t *testing.T) {
	tests := []struct {
		name   string
		world  *world
		action Action
		zone   string
		check  func(*testing.T, Plan)
	}{
		{name: "no size asked for: nothing", world: func() *world { w := newWorld(3, 3); w.in.Sizes = nil; return w }(), action: ActNone},
		{name: "a class without expansion blocks before anything is touched",
			world: newWorld(3, 3).claims("c", func(c *Claim) { c.Class = "slow" }), action: ActBlock,
			check: wantMessage("StorageClass slow of claims data-c-0, data-c-1, data-c-2 does not set allowVolumeExpansion: true")},
		{name: "a missing class blocks", world: newWorld(3, 1).claims("b", func(c *Claim) { c.Class = "gone" }), action: ActBlock,
			check: wantMessage("StorageClass gone of claims data-b-0 does not exist")},
		{name: "a size below the template blocks, naming the field",
			world: func() *world { w := newWorld(3, 3); w.in.Sizes[0].Size = "5Gi"; return w }(), action: ActBlock,
			check: wantMessage("spec.volumeClaimSizes[0].size: 5Gi is below a's volumeClaimTemplate data (10Gi)")},
		{name: "an unknown template blocks",
			world: func() *world { w := newWorld(3, 3); w.in.Sizes[0].Name = "logs"; return w }(), action: ActBlock,
			check: wantMessage(`spec.volumeClaimSizes[0].name: no member has a volumeClaimTemplate "logs"`)},
		{name: "the first zone is held first", world: newWorld(3, 3), action: ActHold, zone: "a"},
		{name: "a hold about to expire is renewed", world: func() *world {
			w := newWorld(3, 3).held("a")
			w.in.HeldUntil = testNow.Add(30 * time.Second)
			return w
		}(), action: ActHold, zone: "a"},
		{name: "every claim of the zone is patched, above the replicas too", world: newWorld(3, 5).held("a"), action: ActPatch, zone: "a",
			check: func(t *testing.T, p Plan) {
				if len(p.Claims) != 5 || p.Claims[4].Name != "data-a-4" || p.Claims[4].Size.String() != "20Gi" {
					t.Fatalf("claims = %+v", p.Claims)
				}
			}},
		{name: "patched claims wait for the driver", world: newWorld(3, 3).held("a").claims("a", patched), action: ActWait, zone: "a",
			check: wantMessage("waiting for the storage driver to expand data-a-0, data-a-1, data-a-2")},
		{name: "offline growth restarts pods within maxUnavailable", world: newWorld(3, 3).held("a").claims("a", func(c *Claim) {
			patched(c)
			c.FileSystemResizePending, c.PendingSince = true, testNow.Add(-time.Minute)
		}), action: ActRestart, zone: "a", check: func(t *testing.T, p Plan) {
			if len(p.Pods) != 1 || p.Pods[0] != "a-0" {
				t.Fatalf("pods = %v, want [a-0]", p.Pods)
			}
			if p.Status.Zones[0].Phase != v1alpha1.ZoneVolumeRestarting {
				t.Fatalf("zone phase %s", p.Status.Zones[0].Phase)
			}
		}},
		{name: "a pod restarted after the condition is waited for", world: func() *world {
			w := newWorld(1, 1).held("a").claims("a", func(c *Claim) {
				patched(c)
				c.FileSystemResizePending, c.PendingSince = true, testNow.Add(-time.Minute)
			})
			w.zone("a").Pods["a-0"] = Pod{Name: "a-0", UID: "new", Created: testNow, Ready: true}
			return w
		}(), action: ActWait, zone: "a", check: wantMessage("waiting for a-0 to mount")},
		{name: "a claim above the replicas left to grow at its next mount does not hold the zone", world: newWorld(2, 3).held("a").
			claims("a", grown).claims("a", func(c *Claim) {
			if c.Ordinal == 2 {
				c.Capacity, c.FileSystemResizePending = mustQ("10Gi"), true
			}
		}), action: ActRecord, zone: "a"},
		{name: "a zone resized is replaced, keeping all but the size", world: newWorld(3, 3).held("a").claims("a", grown), action: ActRecord, zone: "a",
			check: func(t *testing.T, p Plan) {
				obj := p.RecreateObject
				if p.Recreate.UID != "uid-a" || obj.Labels["team"] != "x" || obj.Annotations["meta.helm.sh/release-name"] != "r" ||
					len(obj.OwnerReferences) != 1 || obj.UID != "" || obj.ResourceVersion != "" {
					t.Fatalf("recreate %+v", obj.ObjectMeta)
				}
				if got := obj.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests[corev1.ResourceStorage]; got.String() != "20Gi" {
					t.Fatalf("template size %s", got.String())
				}
				back, err := decodeRecreate(p.Recreate)
				if err != nil || back.Name != "a" {
					t.Fatalf("decode: %v", err)
				}
			}},
		{name: "a zone replaced: the next zone is held", world: newWorld(3, 3).held("a").done("a"), action: ActHold, zone: "b",
			check: func(t *testing.T, p Plan) {
				if p.Status.Zones[0].Phase != v1alpha1.ZoneVolumeComplete || p.Status.Zones[1].Phase != v1alpha1.ZoneVolumeExpanding {
					t.Fatalf("zones %+v", p.Status.Zones)
				}
			}},
		{name: "every zone replaced: complete", world: newWorld(3, 3).done("a").done("b").done("c"), action: ActComplete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := Decide(tt.world.in)
			if p.Action != tt.action || p.Zone != tt.zone {
				t.Fatalf("got %s %q (%s), want %s %q", p.Action, p.Zone, p.Message, tt.action, tt.zone)
			}
			if tt.check != nil {
				tt.check(t, p)
			}
		})
	}
}

func TestDecideFinishesARecordedReplacement(t *testing.T) {
	w := newWorld(3, 3).held("a").claims("a", grown)
	rec := Decide(w.in)
	if rec.Action != ActRecord {
		t.Fatalf("got %s", rec.Action)
	}
	w.in.Status = rec.Status
	w.in.Status.Recreate = rec.Recreate
	steps := []struct {
		sts    *appsv1.StatefulSet
		action Action
	}{
		{sts: w.zone("a").StatefulSet, action: ActDelete},
		{sts: builders.MakeStatefulSet(ns, "a").Deleting(testNow).Obj(), action: ActWait},
		{sts: nil, action: ActCreate},
		{sts: builders.MakeStatefulSet(ns, "a").UID("uid-a-again").Obj(), action: ActWait},
	}
	for i, s := range steps {
		w.zone("a").StatefulSet = s.sts
		p := Decide(w.in)
		if p.Action != s.action || p.Zone != "a" {
			t.Fatalf("step %d: got %s %s (%s), want %s", i, p.Action, p.Zone, p.Message, s.action)
		}
		if s.action == ActCreate && p.RecreateObject.Spec.VolumeClaimTemplates[0].Spec.Resources.Requests.Storage().String() != "20Gi" {
			t.Fatalf("create without the size")
		}
		if i == len(steps)-1 && p.Status.Recreate != nil {
			t.Fatalf("the record is kept after the create")
		}
	}
	// Even with the sizes removed from the spec, a recorded replacement is finished.
	w.in.Sizes = nil
	w.zone("a").StatefulSet = nil
	if p := Decide(w.in); p.Action != ActCreate {
		t.Fatalf("got %s with no sizes", p.Action)
	}
}

func wantMessage(sub string) func(*testing.T, Plan) {
	return func(t *testing.T, p Plan) {
		t.Helper()
		if !strings.Contains(p.Message, sub) {
			t.Fatalf("message %q does not contain %q", p.Message, sub)
		}
	}
}
func mustQ(s string) resource.Quantity { return resource.MustParse(s) }
