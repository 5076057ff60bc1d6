package e2e

import (
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/echelon-operator/echelon/test/soak"
)

// A short soak keeps `make soak`'s harness from rotting: ten rollouts on
// three groups at once, drawn from seed 123, which gives every kind of
// release (a flip, reverts, scale changes, a pause, a crash loop reverted
// and one rolled back by onFailure Rollback, a failing gate), one SIGKILL
// handover and three evictions through the eviction webhook, one of them
// into a crash loop. The API server and the nodes are shared with the other
// specs, so it neither restarts nor throttles the API server nor drains a
// node here; `make soak` does all three.
var _ = Describe("The soak harness", func() {
	It("runs ten randomized rollouts on three groups, each ending as its script expects, with no breach", func(ctx SpecContext) {
		opts := soak.Options{
			Config:         soak.Config{Seed: 123, Rollouts: 10, Groups: 3, Handovers: true, Evictions: true},
			Replicas:       2,
			RolloutTimeout: 2 * time.Minute,
		}
		rep, err := soak.Run(ctx, soak.Env{ControlPlane: cp, OperatorBin: operatorBin, OperatorUser: operatorUser,
			LogDir: logDir, Log: GinkgoWriter}, opts)
		Expect(err).NotTo(HaveOccurred())
		var table strings.Builder
		rep.Print(&table)
		AddReportEntry("soak table", table.String())
		Expect(rep.Results).To(HaveLen(10), table.String())
		Expect(rep.Breaches).To(BeEmpty(), table.String())
		Expect(rep.Problems()).To(BeEmpty(), table.String())
		Expect(rep.ChaosErrors).To(BeEmpty(), table.String())
		Expect(rep.Handovers).To(Equal(1), "seed 123 draws one handover\n%s", table.String())
		Expect(rep.Evictions.Admitted).To(BeNumerically(">", 0), "the eviction webhook admitted the soak's evictions once the budget allowed\n%s", table.String())
		outcomes := map[soak.Outcome]int{}
		for _, r := range rep.Results {
			outcomes[r.Got]++
		}
		// The pause may come only after its rollout completed, when an
		// earlier step held its script up: then it ends Complete.
		Expect(outcomes).To(HaveKeyWithValue(soak.RolledBack, 2))
		Expect(outcomes[soak.Paused] + outcomes[soak.Complete]).To(Equal(8))
	}, SpecTimeout(6*time.Minute))
})
