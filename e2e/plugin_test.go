package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

var _ = Describe("kubectl echelon", func() {
	It("writes each control as its field or annotation, the operator acts on it, and a meaningless control is refused", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 2, unreachableGates)
		startOperator(ctx, "echelon", g.ns)
		g.waitComplete(ctx, time.Minute)

		By("refusing what a complete, unpaused group without failure makes meaningless")
		expectRefused(g.plugin("resume", g.name), "not paused")
		expectRefused(g.plugin("retry", g.name), "nothing to retry: the group has not failed")
		expectRefused(g.plugin("skip-gate", g.name), "no analysis gate is pending or failed")
		expectRefused(g.plugin("abort", g.name), "nothing to roll back: every member runs its stable revision")
		expectRefused(g.plugin("promote", g.name), "no spec.steps")
		rg := g.get(ctx)
		Expect(rg.Spec.Paused).To(BeFalse())
		Expect(rg.Annotations).NotTo(HaveKey(HavePrefix("echelon.dev/")), "a refused control writes nothing")

		By("pause and resume set spec.paused, which the operator reports")
		expectDone(g.plugin("pause", g.name), "paused (spec.paused=true)")
		Expect(g.get(ctx).Spec.Paused).To(BeTrue())
		Eventually(func() bool {
			return meta.IsStatusConditionTrue(g.get(ctx).Status.Conditions, v1alpha1.ConditionPaused)
		}).Should(BeTrue())
		expectRefused(g.plugin("pause", g.name), "already paused")
		expectDone(g.plugin("resume", g.name), "resumed (spec.paused=false)")
		Expect(g.get(ctx).Spec.Paused).To(BeFalse())
		Eventually(func() bool {
			return meta.IsStatusConditionFalse(g.get(ctx).Status.Conditions, v1alpha1.ConditionPaused)
		}).Should(BeTrue())

		By("skip-gate passes the AfterMember gate the first zone waits on")
		g.setVersion(ctx, "v2")
		g.waitAnalysis(ctx, func(gm Gomega, rg *v1alpha1.RolloutGroup) {
			gm.Expect(rg.Status.Analysis.Gate).NotTo(BeNil(), "a pending gate")
			gm.Expect(rg.Status.Analysis.Gate.Member).To(Equal("ingester-zone-a"))
		})
		tree := g.plugin("get", "rg", g.name)
		Expect(tree.Code).To(BeZero(), tree.Stderr)
		Expect(tree.Stdout).To(MatchRegexp(`(?m)^Gate:\s+AfterMember of ingester-zone-a`))
		Expect(tree.Stdout).To(ContainSubstring("never-answers"))
		expectDone(g.plugin("skip-gate", g.name), "the AfterMember gate of ingester-zone-a passes now")
		skip := g.get(ctx).Annotations[v1alpha1.AnnotationSkipGate]
		Expect(skip).NotTo(BeEmpty())
		g.waitAnalysis(ctx, func(gm Gomega, rg *v1alpha1.RolloutGroup) {
			gm.Expect(rg.Status.Analysis.HandledSkip).To(Equal(skip), "the operator acted on the value written")
			gm.Expect(rg.Status.Analysis.Gate).NotTo(BeNil())
			gm.Expect(rg.Status.Analysis.Gate.Member).To(Equal("ingester-zone-b"), "the rollout went on to the next zone and its gate")
		})

		By("abort rolls the group back; then abort and skip-gate have nothing left to do")
		expectDone(g.plugin("abort", g.name), "abort requested (echelon.dev/abort=")
		abort := g.get(ctx).Annotations[v1alpha1.AnnotationAbort]
		g.waitAnalysis(ctx, func(gm Gomega, rg *v1alpha1.RolloutGroup) {
			gm.Expect(rg.Status.Analysis.HandledAbort).To(Equal(abort))
			gm.Expect(rg.Status.Analysis.Rollback).NotTo(BeNil())
			gm.Expect(rg.Status.Analysis.Rollback.CompletionTime).NotTo(BeNil(), "message: %s", rg.Status.Message)
			gm.Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseFailed))
			gm.Expect(readyReason(rg)).To(Equal(v1alpha1.ReasonAborted))
		})
		g.waitPodsOn(ctx, "v1")
		expectRefused(g.plugin("abort", g.name), "already rolled back")
		expectRefused(g.plugin("skip-gate", g.name), "rolling back or rolled back")

		By("retry clears the rollback, and then there is nothing to retry")
		expectDone(g.plugin("retry", g.name), "the rollback is cleared")
		retry := g.get(ctx).Annotations[v1alpha1.AnnotationRetry]
		g.waitAnalysis(ctx, func(gm Gomega, rg *v1alpha1.RolloutGroup) {
			gm.Expect(rg.Status.Analysis.HandledRetry).To(Equal(retry))
			gm.Expect(rg.Status.Analysis.Failure).To(BeNil())
			gm.Expect(rg.Status.Analysis.Rollback).To(BeNil())
		})
		expectRefused(g.plugin("retry", g.name), "nothing to retry")

		By("restart writes spec.restartAt, the time it printed")
		run := g.plugin("restart", g.name)
		expectDone(run, "restart requested (spec.restartAt=")
		printed := regexp.MustCompile(`spec\.restartAt=([^)]+)\)`).FindStringSubmatch(run.Stdout)
		Expect(printed).To(HaveLen(2))
		at := g.get(ctx).Spec.RestartAt
		Expect(at).NotTo(BeNil())
		Expect(at.UTC().Format(time.RFC3339)).To(Equal(printed[1]))
	})

	It("promotes the step of spec.steps that waits for it, and refuses once every step is done", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 2, func(spec *v1alpha1.RolloutGroupSpec) {
			spec.Steps = []v1alpha1.RolloutStep{{Percent: 30, Pause: &v1alpha1.StepPause{}}, {Percent: 100}}
		})
		startOperator(ctx, "echelon", g.ns)
		g.waitComplete(ctx, time.Minute)
		g.setVersion(ctx, "v2")
		var rg *v1alpha1.RolloutGroup
		Eventually(func(gm Gomega) {
			rg = g.get(ctx)
			gm.Expect(rg.Status.Step).NotTo(BeNil())
			gm.Expect(rg.Status.Step.WaitingFor).To(Equal(v1alpha1.StepWaitPromote), "message: %s", rg.Status.Message)
		}).Should(Succeed())
		tree := g.plugin("get", "rg", g.name)
		Expect(tree.Code).To(BeZero(), tree.Stderr)
		Expect(tree.Stdout).To(MatchRegexp(`(?m)^Step:\s+1 of 2: 30% \(2 pods\), waiting for a promote`))
		plan := g.plugin("plan", "rg", g.name)
		Expect(plan.Code).To(BeZero(), plan.Stderr)
		Expect(plan.Stdout).To(ContainSubstring("Next: no pod would be deleted"))
		Expect(plan.Stdout).To(ContainSubstring("(WaitingForPromote)"))

		expectDone(g.plugin("promote", g.name), "the pause of step 1 (30%) ends now")
		promote := g.get(ctx).Annotations[v1alpha1.AnnotationPromote]
		Expect(promote).NotTo(BeEmpty())
		rg = g.waitComplete(ctx, 2*time.Minute)
		Expect(rg.Status.Step).NotTo(BeNil())
		Expect(rg.Status.Step.Promoted).To(Equal(promote), "the operator acted on the value written")
		Expect(rg.Status.Step.WaitingFor).To(Equal(v1alpha1.StepWaitDone))
		expectRefused(g.plugin("promote", g.name), "every step of spec.steps is done")
	})

	It("plans, on a paused group, the pods the operator deletes once it is resumed", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 3, func(spec *v1alpha1.RolloutGroupSpec) {
			spec.MaxUnavailable = ptr.To(intstr.FromInt32(2))
			spec.Paused = true
		})
		startOperator(ctx, "echelon", g.ns)
		mon := g.monitor(ctx)
		g.setVersion(ctx, "v2")
		g.waitPhase(ctx, v1alpha1.PhasePaused, time.Minute)

		run := g.plugin("plan", "rg", g.name)
		Expect(run.Code).To(BeZero(), run.Stderr)
		GinkgoWriter.Println(run.Stdout)
		Expect(run.Stdout).To(ContainSubstring("Next: no pod would be deleted"))
		Expect(run.Stdout).To(MatchRegexp(`Why: ingester-zone-a: 0/3 updated, paused \(Paused\)`))
		Expect(run.Stdout).To(ContainSubstring("Once resumed: delete 2 pods of ingester-zone-a"))
		planned := regexp.MustCompile(`(?m)^  (ingester-zone-a-\d+)\s+revision`).FindAllStringSubmatch(run.Stdout, -1)
		var names []string
		for _, m := range planned {
			names = append(names, m[1])
		}
		Expect(names).To(HaveLen(2), "the batch once resumed: %s", run.Stdout)
		Expect(mon.Deletions()).To(BeEmpty(), "plan deletes nothing")

		expectDone(g.plugin("resume", g.name), "resumed")
		Eventually(func() int { return len(mon.Deletions()) }).Should(BeNumerically(">=", 2))
		var first []string
		for _, d := range mon.Deletions()[:2] {
			first = append(first, d.Pod)
		}
		Expect(first).To(ConsistOf(names), "the operator's first batch is the one plan named")
		g.waitComplete(ctx, 2*time.Minute)
		expectNoBreaches(mon)
	})

	It("follows a rollout with get --watch in a terminal, redrawn in place, until Complete", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 3, func(spec *v1alpha1.RolloutGroupSpec) { spec.MinReadySeconds = 1 })
		startOperator(ctx, "echelon", g.ns)
		g.waitComplete(ctx, time.Minute)
		screen := startTmux(g.ns, fmt.Sprintf("%s get rg %s --watch --namespace=%s --kubeconfig=%s", pluginBin, g.name, g.ns, cp.Kubeconfig()))
		Eventually(func() string { return screen.capture(false) }).Should(MatchRegexp(`(?m)^Phase:\s+Complete`))

		g.setVersion(ctx, "v2")
		started := false
		screens := recordScreens(screen, 2*time.Minute, func(s string) bool {
			f := factsOf(s)
			started = started || f.phase == string(v1alpha1.PhaseProgressing)
			return started && f.phase == string(v1alpha1.PhaseComplete)
		})
		GinkgoWriter.Printf("%d distinct screens; the last:\n%s\n", len(screens), screens[len(screens)-1])

		var rolling, waiting []string
		for _, s := range screens {
			lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
			Expect(lines[0]).To(HavePrefix("Name:"), "every frame is drawn from the top of the screen:\n%s", s)
			expectNothingBelowTheTree(lines, s)
			f := factsOf(s)
			if f.rolling != "" && (len(rolling) == 0 || rolling[len(rolling)-1] != f.rolling) {
				rolling = append(rolling, f.rolling)
			}
			if f.waiting != "" && !slices.Contains(waiting, f.waiting) {
				waiting = append(waiting, f.waiting)
			}
		}
		Expect(rolling).To(Equal([]string{"ingester-zone-a", "ingester-zone-b", "ingester-zone-c"}), "the members roll in order, one after the other")
		Expect(len(waiting)).To(BeNumerically(">=", 4), "the waiting line follows the rollout: %q", waiting)
		last := screens[len(screens)-1]
		Expect(last).To(MatchRegexp(`(?m)^Waiting for:\s+nothing: all members updated and available`))
		Expect(screen.capture(true)).To(ContainSubstring("\x1b["), "a terminal gets colours")
	})

	It("plans a ScalingPolicy's next scale, which the operator then makes", func(ctx SpecContext) {
		g, rec := followingZones(ctx, 2, time.Hour)
		g.scale(ctx, zoneA, 3)
		run := g.plugin("plan", "sp", zoneB)
		Expect(run.Code).To(Equal(0), "stderr: %s", run.Stderr)
		AddReportEntry("plan sp", run.Stdout)
		Expect(run.Stdout).To(And(ContainSubstring("ScalingPolicy "+g.ns+"/"),
			ContainSubstring("Next: scale "+zoneB+" from 2 to 3")))
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		rec.waitChange(ctx, zoneB, 3, time.Minute)
	})

	It("says what is wrong with bad input in one line and exits non-zero", func(ctx SpecContext) {
		g := newZoneGroup(ctx, 1, nil)
		expectRefused(g.plugin("get", "rg", "no-such-group"), `get RolloutGroup "no-such-group" in namespace "`+g.ns+`": not found`)
		expectRefused(g.plugin("pause", "no-such-group"), "not found")
		expectRefused(g.plugin("get", "deployment", g.name), `unknown kind "deployment"`)
		expectRefused(g.plugin("plan", "dd", g.name), "only RolloutGroups (rg) and ScalingPolicies (sp) can be planned")

		// A user bound to no role, as the admin impersonates it (the
		// attached control plane of a parallel process issues no
		// certificates).
		nobody := "--as=plugin-nobody-" + g.ns
		denied := g.plugin("get", "rg", g.name, nobody)
		expectRefused(denied, "not allowed")
		Expect(denied.Stderr).To(ContainSubstring(`cannot get resource "rolloutgroups"`))
		expectRefused(g.plugin("pause", g.name, nobody), "not allowed")

		By("kubectl finds the plugin on PATH, as `kubectl echelon`")
		cmd := exec.CommandContext(ctx, cp.Assets().Kubectl, "echelon", "version", "--client")
		cmd.Env = append(os.Environ(), "PATH="+filepath.Dir(pluginBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
		out, err := cmd.CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), "%s", out)
		Expect(string(out)).To(Equal("kubectl-echelon: v0.0.0-e2e\n"))
	})
})
