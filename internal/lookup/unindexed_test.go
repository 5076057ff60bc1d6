package lookup

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

// Unindexed serves an index field selector by filtering a plain list, as the
// cache serves it from its index: only the policies of the target asked for.
func TestUnindexedServesIndexFields(t *testing.T) {
	objs := []client.Object{
		builders.MakeScalingPolicy("ns", "a").Target("", "zone-a").Obj(),
		builders.MakeScalingPolicy("ns", "b").Target("", "zone-b").Obj(),
		builders.MakeScalingPolicy("other", "c").Target("", "zone-a").Obj(),
	}
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c := Unindexed{fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()}
	got, err := PoliciesForTarget(context.Background(), c, "ns", v1alpha1.TargetKindStatefulSet, "zone-a")
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Name != "a" {
		t.Errorf("policies of StatefulSet zone-a in ns: %d, want only a", len(got))
	}
}
