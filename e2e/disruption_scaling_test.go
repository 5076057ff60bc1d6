package e2e

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// scaleRollRoundsEnv sets the number of rounds of the scale-and-roll spec,
// e.g. for a soak: E2E_SCALE_ROLL_ROUNDS=30 ginkgo --focus='scales and rolls' ./e2e/.
// Without it the spec starts rounds for scaleRollTime, and at least
// minScaleRollRounds. Every change of the disrupted zone waits for the last
// zone's hold to lapse (up to 15s), so a round sends at most three changes
// (at most two such waits) and takes from a few seconds to about 35; a
// fixed count would let the seed decide whether the spec stays near a
// minute on CI's two cores.
const scaleRollRoundsEnv = "E2E_SCALE_ROLL_ROUNDS"

const (
	scaleRollTime      = 30 * time.Second
	minScaleRollRounds = 2
)

// timedAction is one change a round sends, at a random offset from the
// round's start.
type timedAction struct {
	what  string
	after time.Duration
	do    func(context.Context) error
}

var _ = Describe("One disruption budget", func() {
	Context("scaling and rolling one group at the same moment", func() {
		It("scales and rolls in randomized order, round after round, with never two zones short at once", func(ctx SpecContext) {
			rounds := -1
			if v := os.Getenv(scaleRollRoundsEnv); v != "" {
				n, err := strconv.Atoi(v)
				Expect(err).NotTo(HaveOccurred(), "%s", scaleRollRoundsEnv)
				rounds = n
			}
			more := func(round int, since time.Time) bool {
				if rounds >= 0 {
					return round < rounds
				}
				return round < minScaleRollRounds || time.Since(since) < scaleRollTime
			}
			seed := GinkgoRandomSeed()
			rng := rand.New(rand.NewPCG(uint64(seed), 21))
			By(fmt.Sprintf("random seed %d (ginkgo --seed=%d replays the same rounds)", seed, seed))
			AddReportEntry("seed", seed)

			g := newZoneGroup(ctx, 3, nil)
			for _, z := range g.zones {
				createPolicy(ctx, g.ns, z, selfScaled(3))
			}
			// With the webhooks, as the chart installs them: the policies'
			// own downscales pass the prepare-downscale webhook.
			startWebhookOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
			waitStable(ctx, g.ns, g.zones...)
			mon := g.monitor(ctx)
			mon.JudgeEveryMoment()

			version := map[string]string{}
			for _, z := range g.zones {
				version[z] = "v1"
			}
			began := time.Now()
			round := 0
			for ; more(round, began); round++ {
				var actions []timedAction
				// A rollout of one or two zones, each patched on its own.
				v := fmt.Sprintf("v%d", round+2)
				rolled := 1 + rng.IntN(2)
				for _, zi := range rng.Perm(len(g.zones))[:rolled] {
					z := g.zones[zi]
					version[z] = v
					actions = append(actions, rollAction(g, z, v))
				}
				// One zone scaled, or two beside a rollout of one, up or
				// down, by a merge patch of the policy or through its scale
				// subresource.
				for _, zi := range rng.Perm(len(g.zones))[:1+rng.IntN(3-rolled)] {
					z := g.zones[zi]
					from := g.replicasOf(z)
					to := from
					for to == from {
						to = int32(2 + rng.IntN(4))
					}
					// Told before it is sent: the pods a scale-down removes
					// are never taken for rolled ones, and a scale-up's pods
					// count only once they were Ready, whenever the
					// StatefulSet adds them.
					mon.SetReplicas(z, int(to))
					g.scaled[z] = to
					actions = append(actions, scaleAction(g, z, from, to, rng.IntN(2) == 0))
				}
				for i := range actions {
					actions[i].after = time.Duration(rng.IntN(300)) * time.Millisecond
				}
				By(fmt.Sprintf("round %d: %s", round+1, strings.Join(actionNames(actions), ", ")))
				start := time.Now()
				runAtOnce(ctx, actions)
				for _, z := range g.zones {
					waitReplicas(ctx, g.ns, z, g.replicasOf(z), 2*time.Minute)
				}
				g.waitComplete(ctx, 2*time.Minute)
				waitStable(ctx, g.ns, g.zones...)
				for _, z := range g.zones {
					g.only(z).waitPodsOn(ctx, version[z])
				}
				AddReportEntry(fmt.Sprintf("round %d settled after", round+1), time.Since(start).String())
				Expect(mon.Breaches()).To(BeEmpty(), "round %d: %s", round+1, strings.Join(actionNames(actions), ", "))
			}
			AddReportEntry("rounds", round)
			expectNoBreaches(mon)
		})
	})
})

var _ = Describe("One disruption budget", func() {
	Context("kubectl scale of two zones at the same moment", func() {
		It("admits one through the prepare-downscale webhook and refuses the other, naming the zone that holds the budget, until it lapses", func(ctx SpecContext) {
			g := newZoneGroup(ctx, 4, nil)
			pods := startPreparePods()
			pods.learnPods(ctx, g.ns)
			zones := []string{zoneA, zoneB}
			for _, z := range zones {
				createPolicy(ctx, g.ns, z, preparedBy(pods))
			}
			startWebhookOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
			mon := g.monitor(ctx)
			mon.JudgeEveryMoment()
			// Told before: whichever is admitted, its removed pods are not
			// rolled ones. The refused zone's pods stay Ready, above the
			// wanted ordinals, which costs it nothing.
			for _, z := range zones {
				mon.SetReplicas(z, 2)
			}

			outs, oks := make([]string, 2), make([]bool, 2)
			var wg sync.WaitGroup
			for i, z := range zones {
				wg.Go(func() { outs[i], oks[i] = scaleWithKubectl(ctx, g.ns, "StatefulSet", z, 2) })
			}
			wg.Wait()
			Expect(oks).To(ConsistOf(true, false), "one of two downscales sent at once is admitted: %q", outs)
			admitted, refused := 0, 1
			if !oks[0] {
				admitted, refused = 1, 0
			}
			AddReportEntry("the refused kubectl scale", outs[refused])
			Expect(outs[refused]).To(And(ContainSubstring("RolloutGroup "+g.name), ContainSubstring(zones[admitted])),
				"the refusal names the budget and the zone that holds it")
			Expect(pods.callsTo(zones[refused]+"-2", "")).To(BeEmpty(), "the refused downscale called no pod")
			mon.SetReplicas(zones[refused], 4)
			g.scaled[zones[admitted]] = 2
			g.only(zones[admitted]).waitPodsOn(ctx, "v1")

			// As a person would: ask again until the hold has lapsed.
			Eventually(func() bool {
				mon.SetReplicas(zones[refused], 2)
				_, ok := scaleWithKubectl(ctx, g.ns, "StatefulSet", zones[refused], 2)
				if !ok {
					mon.SetReplicas(zones[refused], 4)
				}
				return ok
			}).WithTimeout(time.Minute).WithPolling(2 * time.Second).Should(BeTrue())
			g.scaled[zones[refused]] = 2
			g.waitPodsOn(ctx, "v1")
			// A retry may be refused after its pods were prepared (they
			// are called before the recorded decision): each such prepare
			// is followed by a cancel, so every pod ends prepared once.
			for _, z := range zones {
				for _, ordinal := range []int{2, 3} {
					pod := fmt.Sprintf("%s-%d", z, ordinal)
					Expect(len(pods.callsTo(pod, "POST"))).To(Equal(len(pods.callsTo(pod, "DELETE"))+1), "%s prepared once more than cancelled", pod)
				}
			}
			expectNoBreaches(mon)
		})
	})
})

// rollAction changes zone's pod template to version.
func rollAction(g *zoneGroup, zone, version string) timedAction {
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{%q:%q}}}}}`, versionAnnotation, version)
	return timedAction{what: fmt.Sprintf("roll %s to %s", zone, version), do: func(ctx context.Context) error {
		sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: zone}}
		return k8s.Patch(ctx, sts, client.RawPatch(types.MergePatchType, []byte(patch)))
	}}
}

// scaleAction sets the replicas of zone's policy: with kubectl scale of its
// scale subresource (as an autoscaler would), or a merge patch of its spec.
func scaleAction(g *zoneGroup, zone string, from, to int32, subresource bool) timedAction {
	if subresource {
		return timedAction{what: fmt.Sprintf("kubectl scale sp/%s %d->%d", zone, from, to), do: func(ctx context.Context) error {
			if out, ok := scaleWithKubectl(ctx, g.ns, "sp", zone, to); !ok {
				return fmt.Errorf("kubectl scale sp/%s: %s", zone, out)
			}
			return nil
		}}
	}
	return timedAction{what: fmt.Sprintf("patch sp/%s %d->%d", zone, from, to), do: func(ctx context.Context) error {
		sp := &v1alpha1.ScalingPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: zone}}
		return k8s.Patch(ctx, sp, client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"replicas":%d}}`, to))))
	}}
}

// runAtOnce starts every action at its offset from now and waits for all.
func runAtOnce(ctx context.Context, actions []timedAction) {
	GinkgoHelper()
	errs := make([]error, len(actions))
	start := time.Now()
	var wg sync.WaitGroup
	for i, a := range actions {
		wg.Go(func() {
			time.Sleep(time.Until(start.Add(a.after)))
			errs[i] = a.do(ctx)
		})
	}
	wg.Wait()
	for i, err := range errs {
		Expect(err).NotTo(HaveOccurred(), actions[i].what)
	}
}

// actionNames describes a round's actions, in the order they are sent.
func actionNames(actions []timedAction) []string {
	sorted := slices.Clone(actions)
	slices.SortStableFunc(sorted, func(a, b timedAction) int { return cmp.Compare(a.after, b.after) })
	out := make([]string, len(sorted))
	for i, a := range sorted {
		out[i] = fmt.Sprintf("%s at +%s", a.what, a.after)
	}
	return out
}
