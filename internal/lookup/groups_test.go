package lookup

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

func TestClaims(t *testing.T) {
	listing := &v1alpha1.RolloutGroup{Spec: v1alpha1.RolloutGroupSpec{StatefulSets: []v1alpha1.RolloutMember{{Name: "a"}, {Name: "b"}}}}
	selecting := func(sel *metav1.LabelSelector) *v1alpha1.RolloutGroup {
		return &v1alpha1.RolloutGroup{Spec: v1alpha1.RolloutGroupSpec{Selector: sel}}
	}
	zoned := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"app": "ingester"}}}
	for _, tc := range []struct {
		name  string
		rg    *v1alpha1.RolloutGroup
		sts   string
		obj   *appsv1.StatefulSet
		claim bool
	}{
		{"listed by name", listing, "b", nil, true},
		{"not listed", listing, "c", zoned, false},
		{"a listing group ignores labels", listing, "c", zoned, false},
		{"selector matches the labels", selecting(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "ingester"}}), "c", zoned, true},
		{"selector does not match", selecting(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "querier"}}), "c", zoned, false},
		{"a selector claims nothing whose labels are unknown", selecting(&metav1.LabelSelector{MatchLabels: map[string]string{"app": "ingester"}}), "c", nil, false},
		// CEL refuses an empty selector; one stored before that rule must not
		// claim every StatefulSet of the namespace.
		{"empty selector claims nothing", selecting(&metav1.LabelSelector{}), "c", zoned, false},
		{"invalid selector claims nothing", selecting(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Bogus"}}}), "c", zoned, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Claims(tc.rg, tc.sts, tc.obj); got != tc.claim {
				t.Errorf("Claims = %v, want %v", got, tc.claim)
			}
		})
	}
}

func TestPolicyTargetKey(t *testing.T) {
	for _, tc := range []struct{ kind, name, want string }{
		{"", "a", "a"},
		{v1alpha1.TargetKindStatefulSet, "a", "a"},
		{"Deployment", "a", "Deployment/a"},
		{"ReplicaSet", "a", "ReplicaSet/a"},
	} {
		if got := PolicyTargetKey(tc.kind, tc.name); got != tc.want {
			t.Errorf("PolicyTargetKey(%q, %q) = %q, want %q", tc.kind, tc.name, got, tc.want)
		}
	}
}
