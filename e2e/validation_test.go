package e2e

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

var _ = Describe("RolloutGroup admission", func() {
	members := func(names ...string) []v1alpha1.RolloutMember {
		var out []v1alpha1.RolloutMember
		for _, n := range names {
			out = append(out, v1alpha1.RolloutMember{Name: n})
		}
		return out
	}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"app": "ingester"}}
	intOrStr := func(v intstr.IntOrString) *intstr.IntOrString { return &v }
	dur := func(s string) *metav1.Duration {
		// Durations are sent as written, so build them through JSON-compatible strings.
		d, err := parseDuration(s)
		Expect(err).NotTo(HaveOccurred())
		return d
	}

	DescribeTable("rejects a bad spec with an error naming the field",
		func(ctx SpecContext, spec v1alpha1.RolloutGroupSpec, wantField, wantText string) {
			ns := newNamespace(ctx)
			err := k8s.Create(ctx, &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: spec})
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(And(ContainSubstring(wantField), ContainSubstring(wantText)))
		},
		Entry("neither members nor selector", v1alpha1.RolloutGroupSpec{},
			"spec", "exactly one of spec.statefulSets or spec.selector"),
		Entry("both members and selector", v1alpha1.RolloutGroupSpec{StatefulSets: members("a"), Selector: selector},
			"spec", "exactly one of spec.statefulSets or spec.selector"),
		Entry("duplicate members", v1alpha1.RolloutGroupSpec{StatefulSets: members("a", "b", "a")},
			"spec.statefulSets", "Duplicate value"),
		Entry("maxUnavailable 0", v1alpha1.RolloutGroupSpec{StatefulSets: members("a"), MaxUnavailable: intOrStr(intstr.FromInt32(0))},
			"spec.maxUnavailable", "integer >= 1 or a percentage from 1% to 100%"),
		Entry("maxUnavailable 0%", v1alpha1.RolloutGroupSpec{StatefulSets: members("a"), MaxUnavailable: intOrStr(intstr.FromString("0%"))},
			"spec.maxUnavailable", "integer >= 1 or a percentage from 1% to 100%"),
		Entry("maxUnavailable 101%", v1alpha1.RolloutGroupSpec{StatefulSets: members("a"), MaxUnavailable: intOrStr(intstr.FromString("101%"))},
			"spec.maxUnavailable", "integer >= 1 or a percentage from 1% to 100%"),
		Entry("member maxUnavailable not a number", v1alpha1.RolloutGroupSpec{StatefulSets: []v1alpha1.RolloutMember{{Name: "a", MaxUnavailable: intOrStr(intstr.FromString("two"))}}},
			"spec.statefulSets[0].maxUnavailable", "integer >= 1 or a percentage from 1% to 100%"),
		Entry("negative minReadySeconds", v1alpha1.RolloutGroupSpec{StatefulSets: members("a"), MinReadySeconds: -1},
			"spec.minReadySeconds", "greater than or equal to 0"),
		Entry("negative batchInterval", v1alpha1.RolloutGroupSpec{StatefulSets: members("a"), BatchInterval: dur("-5s")},
			"spec.batchInterval", "should match"),
		Entry("negative progressDeadline", v1alpha1.RolloutGroupSpec{StatefulSets: members("a"), ProgressDeadline: dur("-1m")},
			"spec.progressDeadline", "should match"),
		Entry("unknown podDeletion", v1alpha1.RolloutGroupSpec{StatefulSets: members("a"), PodDeletion: "Kill"},
			"spec.podDeletion", "Unsupported value"),
		Entry("empty member name", v1alpha1.RolloutGroupSpec{StatefulSets: members("")},
			"spec.statefulSets[0].name", "at least 1 chars long"),
		Entry("empty selector", v1alpha1.RolloutGroupSpec{Selector: &metav1.LabelSelector{}},
			"spec.selector", "spec.selector must not be empty"),
	)

	It("accepts a valid spec and shows the defaults in effect", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		rg := &v1alpha1.RolloutGroup{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "good"},
			Spec: v1alpha1.RolloutGroupSpec{StatefulSets: members("a", "b"), BatchInterval: dur("1m30s")}}
		Expect(k8s.Create(ctx, rg)).To(Succeed())
		Expect(rg.Spec.PodDeletion).To(Equal(v1alpha1.PodDeletionDelete))
		Expect(rg.Spec.MaxUnavailable).To(Equal(intOrStr(intstr.FromInt32(1))))
		Expect(rg.Spec.ProgressDeadline).To(Equal(dur("15m")))
	})
})
