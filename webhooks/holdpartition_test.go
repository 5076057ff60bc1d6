package webhooks

import (
	"context"
	"encoding/json"
	"testing"

	jsonpatch "github.com/evanphx/json-patch/v5"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/rollout"
	"github.com/echelon-operator/echelon/test/builders"
)

func TestHoldPartition(t *testing.T) {
	held := func(replicas, partition int32) *builders.StatefulSetWrapper {
		return builders.MakeStatefulSet(testNS, "ingester-zone-a").TypeMeta().Replicas(replicas).RollingUpdate().Partition(partition).
			Label(v1alpha1.PartitionHolderLabel, "uid-of-the-group").TemplateAnnotation("version", "1")
	}
	cases := []struct {
		name     string
		old, new *appsv1.StatefulSet
		reason   string
		// partition is the new object's partition after the answer's patch.
		partition int32
	}{
		{name: "a template change at partition 0 raises it to the replicas",
			old: held(6, 0).Obj(), new: held(6, 0).TemplateAnnotation("version", "2").Obj(),
			reason: reasonPartitionHeld, partition: 6},
		{name: "a template change in the middle of a batch raises it over the released pods",
			old: held(6, 3).Obj(), new: held(6, 3).TemplateAnnotation("version", "2").Obj(),
			reason: reasonPartitionHeld, partition: 6},
		{name: "a template change with an upscale holds the new replicas",
			old: held(6, 0).Obj(), new: held(8, 0).TemplateAnnotation("version", "2").Obj(),
			reason: reasonPartitionHeld, partition: 8},
		{name: "a partition set to 0 by hand with the template change is held too",
			old: held(6, 6).Obj(), new: held(6, 0).TemplateAnnotation("version", "2").Obj(),
			reason: reasonPartitionHeld, partition: 6},
		{name: "a partition already at the replicas stays",
			old: held(6, 6).Obj(), new: held(6, 6).TemplateAnnotation("version", "2").Obj(),
			reason: reasonAlreadyHeld, partition: 6},
		{name: "a partition above the replicas is never lowered",
			old: held(6, 9).Obj(), new: held(4, 9).TemplateAnnotation("version", "2").Obj(),
			reason: reasonAlreadyHeld, partition: 9},
		{name: "the group's own partition write changes no template",
			old: held(6, 6).Obj(), new: held(6, 5).Obj(),
			reason: reasonTemplateSame, partition: 5},
		{name: "a StatefulSet no group holds is left alone",
			old:    builders.MakeStatefulSet(testNS, "other").TypeMeta().Replicas(3).RollingUpdate().Partition(0).Obj(),
			new:    builders.MakeStatefulSet(testNS, "other").TypeMeta().Replicas(3).RollingUpdate().Partition(0).TemplateAnnotation("version", "2").Obj(),
			reason: reasonNotHeld, partition: 0},
		{name: "an OnDelete StatefulSet has no partition to hold",
			old: held(6, 0).OnDelete().Obj(), new: held(6, 0).OnDelete().TemplateAnnotation("version", "2").Obj(),
			reason: reasonNotRollingUpdate, partition: 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req := updateOf("statefulsets", tc.old, tc.new)
			v := HoldPartition{}.decide(context.Background(), &req.r)
			if !v.allowed || v.reason != tc.reason {
				t.Fatalf("got allowed %v reason %q (%s), want allowed with reason %q", v.allowed, v.reason, v.message, tc.reason)
			}
			got := tc.new
			if v.patch != nil {
				got = applyPatch(t, tc.new, v.patch)
				if len(v.warnings) != 1 {
					t.Errorf("warnings %q, want one that says the partition was raised", v.warnings)
				}
			}
			if p := rollout.PartitionOf(got); p != tc.partition {
				t.Errorf("partition %d after the answer, want %d", p, tc.partition)
			}
			if got.Spec.Template.Annotations["version"] != tc.new.Spec.Template.Annotations["version"] {
				t.Errorf("the patch changed the template")
			}
		})
	}
}

// TestHoldPartitionAddsMissingFields: a RollingUpdate strategy with no
// rollingUpdate block gets one, and so does an unset strategy (the API's
// RollingUpdate, before defaulting).
func TestHoldPartitionAddsMissingFields(t *testing.T) {
	for _, strategy := range []appsv1.StatefulSetUpdateStrategyType{appsv1.RollingUpdateStatefulSetStrategyType, ""} {
		old := builders.MakeStatefulSet(testNS, "a").TypeMeta().Replicas(3).Strategy(strategy).Label(v1alpha1.PartitionHolderLabel, "g").Obj()
		sts := old.DeepCopy()
		sts.Spec.Template.Annotations = map[string]string{"version": "2"}
		sts.Spec.UpdateStrategy.RollingUpdate = nil
		req := updateOf("statefulsets", old, sts)
		v := HoldPartition{}.decide(context.Background(), &req.r)
		if v.reason != reasonPartitionHeld {
			t.Fatalf("strategy %q: reason %q, want %q", strategy, v.reason, reasonPartitionHeld)
		}
		if p := rollout.PartitionOf(applyPatch(t, sts, v.patch)); p != 3 {
			t.Errorf("strategy %q: partition %d, want 3", strategy, p)
		}
	}
}

// TestHoldPartitionUnhandled: what its configuration does not send is
// allowed unchanged.
func TestHoldPartitionUnhandled(t *testing.T) {
	req := scaleUpdate("statefulsets", "a", 3, 2)
	if v := (HoldPartition{}).decide(context.Background(), &req.r); !v.allowed || v.reason != reasonUnhandled || v.patch != nil {
		t.Errorf("a /scale request: got allowed %v reason %q patch %s", v.allowed, v.reason, v.patch)
	}
	create := updateOf("statefulsets", builders.MakeStatefulSet(testNS, "a").TypeMeta().Obj(), builders.MakeStatefulSet(testNS, "a").TypeMeta().Obj())
	create.r.Operation = admissionv1.Create
	if v := (HoldPartition{}).decide(context.Background(), &create.r); !v.allowed || v.reason != reasonUnhandled {
		t.Errorf("a CREATE: got allowed %v reason %q", v.allowed, v.reason)
	}
}

func applyPatch(t *testing.T, sts *appsv1.StatefulSet, patch []byte) *appsv1.StatefulSet {
	t.Helper()
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("patch %s: %v", patch, err)
	}
	doc, err := json.Marshal(sts)
	if err != nil {
		t.Fatal(err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("apply %s: %v", patch, err)
	}
	got := &appsv1.StatefulSet{}
	if err := json.Unmarshal(out, got); err != nil {
		t.Fatal(err)
	}
	return got
}
