package e2e

import (
	"context"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/builders"
)

// serviceLabel marks the pods of every component of the spec's service:
// what its ZoneDisruptionBudget selects.
const serviceLabel = "echelon.dev/e2e-service"

var _ = Describe("A disruption budget shared by two groups", func() {
	It("rolls two components of one service one zone at a time between them, where alone each breaches the other's zone", func(ctx SpecContext) {
		// Ingesters roll zone a first, store-gateways zone c first: alone,
		// each group keeps to one zone of its own, and the service has two
		// zones down together.
		ing := &zoneGroup{ns: newNamespace(ctx), name: "ingester", replicas: 2, scaled: map[string]int32{},
			zones: []string{"ingester-zone-a", "ingester-zone-b", "ingester-zone-c"}}
		sg := &zoneGroup{ns: ing.ns, name: "store-gateway", replicas: 2, scaled: map[string]int32{},
			zones: []string{"store-gateway-zone-c", "store-gateway-zone-b", "store-gateway-zone-a"}}
		paced := func(s *v1alpha1.RolloutGroupSpec) { s.MinReadySeconds = 2 }
		for _, g := range []*zoneGroup{ing, sg} {
			g.createStatefulSets(ctx, func(sts *appsv1.StatefulSet) { sts.Spec.Template.Labels[serviceLabel] = "mimir" })
		}
		for _, g := range []*zoneGroup{ing, sg} {
			g.waitPodsOn(ctx, "v1")
			g.createGroup(ctx, paced)
		}
		zdb := builders.MakeZoneDisruptionBudget(ing.ns, "mimir", serviceLabel, "mimir", builders.MakeZoneBudget())
		zdb.Spec.ZoneFrom = &v1alpha1.ZoneFrom{NameRegex: `zone-[a-z]$`}
		Expect(k8s.Create(ctx, zdb)).To(Succeed())
		startOperator(ctx, "echelon", ing.ns)
		for _, g := range []*zoneGroup{ing, sg} {
			g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		}
		mon := serviceMonitor(ctx, ing, sg)

		By("rolling both groups alone: the monitor sees two zones down together")
		rollBoth(ctx, "v2", ing, sg)
		Expect(mon.Breaches()).NotTo(BeEmpty(), "alone, the ingesters' zone a and the store-gateways' zone c roll together")
		alone := len(mon.Breaches())

		By("sharing the ZoneDisruptionBudget: one zone at a time between them")
		sharedAt := time.Now().Add(-time.Second)
		for _, g := range []*zoneGroup{ing, sg} {
			g.patchSpec(ctx, `{"sharedDisruptionBudget":"mimir"}`)
		}
		rollBoth(ctx, "v3", ing, sg)
		Expect(mon.Breaches()[alone:]).To(BeEmpty(), "the guarantees were breached while the groups shared the budget")
		Expect(mon.ForcedDeletions()).To(BeEmpty())
		Expect(mon.DeletionsWhere(versionAnnotation, "v2")).To(HaveLen(12), "every pod of both groups rolled once")

		// The shared record is the budget's: the groups' own hold nothing
		// decided since they share it.
		for _, g := range []*zoneGroup{ing, sg} {
			if own := g.get(ctx).Status.Disruption; own != nil {
				for _, in := range own.Intents {
					Expect(in.DecidedAt.Time).To(BeTemporally("<", sharedAt), "RolloutGroup %s records its intents in the shared budget: %+v", g.name, in)
				}
			}
		}
		Eventually(func(gm Gomega) {
			got := &v1alpha1.ZoneDisruptionBudget{}
			gm.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(zdb), got)).To(Succeed())
			gm.Expect(got.Status.Disruption).NotTo(BeNil(), "the last batches' intents are recorded in the budget")
			for _, in := range got.Status.Disruption.Intents {
				gm.Expect(in.Holder).To(Or(Equal("RolloutGroup ingester"), Equal("RolloutGroup store-gateway")))
			}
		}).WithContext(ctx).WithTimeout(10 * time.Second).Should(Succeed())
	})
})

// serviceMonitor watches every member of the groups, each in the failure
// domain its name ends with, and judges every moment.
func serviceMonitor(ctx context.Context, groups ...*zoneGroup) *framework.Monitor {
	GinkgoHelper()
	var members []framework.WatchedMember
	for _, g := range groups {
		for _, z := range g.zones {
			members = append(members, framework.WatchedMember{Name: z, Replicas: int(g.replicas),
				MaxUnavailable: intstr.FromInt32(1), Domain: z[strings.LastIndex(z, "zone-"):]})
		}
	}
	mon, err := framework.StartMonitor(ctx, clientset, groups[0].ns, members)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(mon.Stop)
	Eventually(mon.Armed).Should(BeTrue(), "every pod of every member must be Ready before the rollout")
	mon.JudgeEveryMoment()
	return mon
}

// rollBoth changes every template of the groups to version at once and
// waits until both are Complete on it.
func rollBoth(ctx context.Context, version string, groups ...*zoneGroup) {
	GinkgoHelper()
	done := make(chan struct{})
	for _, g := range groups {
		go func() {
			defer GinkgoRecover()
			g.setVersion(ctx, version)
			done <- struct{}{}
		}()
	}
	for range groups {
		<-done
	}
	for _, g := range groups {
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, version)
	}
}
