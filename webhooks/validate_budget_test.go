package webhooks

import (
	"net/http"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

// TestValidateZoneBudget: a partition regex Go cannot compile, or without
// the group that captures the partition, is refused naming the field, in a
// ZoneDisruptionBudget and in a RolloutGroup's spec.disruptionBudget.
func TestValidateZoneBudget(t *testing.T) {
	noGroup := builders.MakeZoneBudget().Partitions(`^ingester-zone-[a-z]-\d+$`)
	group2 := builders.MakeZoneBudget().Partitions(`^(ingester)-zone-[a-z]-(\d+)$`)
	for _, tc := range []struct {
		name   string
		budget *builders.ZoneBudgetWrapper
		group  *int32
		want   []string
	}{
		{name: "no regex", budget: builders.MakeZoneBudget()},
		{name: "Mimir's", budget: builders.MakeZoneBudget().Partitions(`^ingester-zone-[a-z]-(\d+)$`)},
		{name: "the second group", budget: group2, group: ptr.To[int32](2)},
		{name: "the whole match", budget: noGroup, group: ptr.To[int32](0)},
		{name: "does not compile", budget: builders.MakeZoneBudget().Partitions(`^ingester-(\d+$`),
			want: []string{`spec.podNamePartitionRegex: error parsing regexp: missing closing ): ` + "`^ingester-(\\d+$`"}},
		{name: "no group by default", budget: noGroup,
			want: []string{`spec.podNamePartitionGroup: podNamePartitionRegex "^ingester-zone-[a-z]-\\d+$" has 0 groups: name the one that captures the partition (the default is 1)`}},
		{name: "a group past the regex's", budget: group2, group: ptr.To[int32](3),
			want: []string{`spec.podNamePartitionGroup: podNamePartitionRegex "^(ingester)-zone-[a-z]-(\\d+)$" has 2 groups: name the one that captures the partition (the default is 1)`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := tc.budget.Obj()
			b.PodNamePartitionGroup = tc.group
			zdb := builders.MakeZoneDisruptionBudget(testNS, "store", "app", "store", builders.MakeZoneBudget())
			zdb.Spec.ZoneBudget = *b
			sameErrors(t, ValidateZoneDisruptionBudget(zdb, NamespaceObjects{}), tc.want)

			rg := builders.MakeRolloutGroup(testNS, "ingester").Members("ingester-zone-a").Obj()
			rg.Spec.DisruptionBudget = b
			var inGroup []string
			for _, w := range tc.want {
				inGroup = append(inGroup, "spec.disruptionBudget."+w[len("spec."):])
			}
			sameErrors(t, ValidateRolloutGroup(rg, NamespaceObjects{}), inGroup)
		})
	}
}

// TestValidateZoneDisruptionBudgetThroughTheWebhook: the API server's CREATE
// of a ZoneDisruptionBudget with a regex that does not compile is refused,
// naming the field.
func TestValidateZoneDisruptionBudgetThroughTheWebhook(t *testing.T) {
	bad := builders.MakeZoneDisruptionBudget(testNS, "store", "app", "store", builders.MakeZoneBudget().Partitions(`(`))
	good := builders.MakeZoneDisruptionBudget(testNS, "store", "app", "store", builders.MakeZoneBudget().Partitions(`-(\d+)$`))
	h := handler("test-validate-zdb", &Validate{Cluster: &fakeCluster{}}, &eventRecorder{})
	checkAnswer(t, serve(t, h, echelonRequest(admissionv1.Create, "zonedisruptionbudgets", nil, bad).review(), ""), false,
		http.StatusUnprocessableEntity, `ZoneDisruptionBudget.echelon.dev "store" is invalid: spec.podNamePartitionRegex: Invalid value: "(": error parsing regexp`, "")
	checkAnswer(t, serve(t, h, echelonRequest(admissionv1.Create, "zonedisruptionbudgets", nil, good).review(), ""), true, 0, "", "")
}

// TestValidateZoneFrom: a spec.zoneFrom.nameRegex Go cannot compile is
// refused naming the field; a label or a regex that compiles is not.
func TestValidateZoneFrom(t *testing.T) {
	for _, tc := range []struct {
		name string
		from *v1alpha1.ZoneFrom
		want []string
	}{
		{name: "none"},
		{name: "a label", from: &v1alpha1.ZoneFrom{Label: "topology.kubernetes.io/zone"}},
		{name: "a name suffix", from: &v1alpha1.ZoneFrom{NameRegex: `zone-[a-z]$`}},
		{name: "does not compile", from: &v1alpha1.ZoneFrom{NameRegex: `zone-(`},
			want: []string{"spec.zoneFrom.nameRegex: error parsing regexp: missing closing ): `zone-(`"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			zdb := builders.MakeZoneDisruptionBudget(testNS, "mimir", "app", "mimir", builders.MakeZoneBudget())
			zdb.Spec.ZoneFrom = tc.from
			sameErrors(t, ValidateZoneDisruptionBudget(zdb, NamespaceObjects{}), tc.want)
		})
	}
}
