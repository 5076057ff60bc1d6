package lookup

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/migrate"
	"github.com/echelon-operator/echelon/test/builders"
)

// TestDownscaleGroupReadsLastDownscaleInCompatGroups: a member's
// grafana.com/last-downscale counts as its last downscale in a group compat
// mode keeps, the later of it and its policy's record winning; a group of
// the user's, and a value that is not a time, count the policies only.
func TestDownscaleGroupReadsLastDownscaleInCompatGroups(t *testing.T) {
	annotated := time.Date(2026, 11, 26, 5, 0, 0, 0, time.UTC)
	recorded := annotated.Add(-time.Hour)
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := appsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		compat     bool
		annotation string
		policy     *time.Time
		want       time.Time
	}{
		{name: "compat, annotation only", compat: true, annotation: migrate.FormatLastDownscale(annotated), want: annotated},
		{name: "compat, the annotation later than the policy's", compat: true, annotation: migrate.FormatLastDownscale(annotated), policy: &recorded, want: annotated},
		{name: "compat, the policy's later", compat: true, annotation: migrate.FormatLastDownscale(recorded), policy: &annotated, want: annotated},
		{name: "compat, not a time", compat: true, annotation: "yesterday", policy: &recorded, want: recorded},
		{name: "a group of the user's", annotation: migrate.FormatLastDownscale(annotated), policy: &recorded, want: recorded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rg := builders.MakeRolloutGroup("ns", "ingester").Members("zone-a", "zone-b").Obj()
			if tc.compat {
				rg.Labels = map[string]string{v1alpha1.GrafanaCompatLabel: "true"}
			}
			zoneA := builders.MakeStatefulSet("ns", "zone-a").Obj()
			zoneA.Annotations = map[string]string{migrate.LastDownscaleAnnotation: tc.annotation}
			zoneB := builders.MakeStatefulSet("ns", "zone-b").Obj()
			objs := []client.Object{rg, zoneA, zoneB}
			if tc.policy != nil {
				sp := builders.MakeScalingPolicy("ns", "zone-a").Target("", "zone-a").Obj()
				at := metav1.NewMicroTime(*tc.policy)
				sp.Status.LastDownscaleTime = &at
				objs = append(objs, sp)
			}
			c := Unindexed{fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build()}
			g, err := DownscaleGroupOf(context.Background(), c, rg, zoneB)
			if err != nil {
				t.Fatal(err)
			}
			if len(g.Others) != 1 || g.Others[0].Name != "zone-a" {
				t.Fatalf("others %+v, want zone-a", g.Others)
			}
			if got := g.Others[0].LastDownscale; !got.Equal(tc.want) {
				t.Errorf("zone-a's last downscale %s, want %s", got, tc.want)
			}
		})
	}
}
