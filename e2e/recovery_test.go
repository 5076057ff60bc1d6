package e2e

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/controlplane"
)

// crashLoopRelease is the template of a bad release: version, and pods that
// never become Ready (kwok plays a crash loop for them).
func (g *zoneGroup) crashLoopRelease(ctx context.Context, version string) {
	GinkgoHelper()
	g.patchTemplates(ctx, fmt.Sprintf(`{%q:%q,%q:"true"}`, versionAnnotation, version, controlplane.CrashLoopAnnotation))
}

// revertTo puts every zone's template back to version without the crash
// loop: byte for byte the template of version's revision.
func (g *zoneGroup) revertTo(ctx context.Context, version string) {
	GinkgoHelper()
	g.patchTemplates(ctx, fmt.Sprintf(`{%q:%q,%q:null}`, versionAnnotation, version, controlplane.CrashLoopAnnotation))
}

// crashLooping lists the live pods of zone that kwok plays as crash-looping:
// Running, not Ready.
func (g *zoneGroup) crashLooping(ctx context.Context, zone string) []string {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(g.ns), client.MatchingLabels{"app": zone})).To(Succeed())
	var out []string
	for _, p := range pods.Items {
		if _, bad := p.Annotations[controlplane.CrashLoopAnnotation]; bad && p.DeletionTimestamp == nil &&
			p.Status.Phase == corev1.PodRunning && !isReady(&p) {
			out = append(out, p.Name)
		}
	}
	return out
}

// stuckOnCrashLoop starts the bad release on a group of three zones of five
// pods with maxUnavailable 2 (mutate edits the spec further) and waits until
// the first zone's budget is full of crash-looping pods: the rollout can go
// no further.
func stuckOnCrashLoop(ctx SpecContext, mutate func(*v1alpha1.RolloutGroupSpec)) (*zoneGroup, *framework.Monitor) {
	GinkgoHelper()
	g := newZoneGroup(ctx, 5, func(s *v1alpha1.RolloutGroupSpec) {
		s.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2))
		if mutate != nil {
			mutate(s)
		}
	})
	startOperator(ctx, "operator", g.ns)
	g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
	mon := g.monitor(ctx)

	g.crashLoopRelease(ctx, "v2")
	Eventually(func() []string { return g.crashLooping(ctx, "ingester-zone-a") }).Should(HaveLen(2),
		"the first batch of zone-a fills its budget with crash-looping pods")
	Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(2), "nothing beyond the budget was deleted")
	return g, mon
}

var _ = Describe("RolloutGroup recovery from a release whose pods never become Ready", func() {
	It("replaces the crash-looping pods at once when the template is reverted, with no pod deleted by hand", func(ctx SpecContext) {
		g, mon := stuckOnCrashLoop(ctx, nil)

		g.revertTo(ctx, "v1")
		// A revert must not wait for the progress deadline (15 minutes by
		// default) nor for a person: the two not-Ready pods of the bad
		// revision are outdated and already unavailable, so they go at once.
		g.waitComplete(ctx, time.Minute)
		g.waitPodsOn(ctx, "v1")
		expectNoBreaches(mon)
		Expect(mon.DeletionsWhere(versionAnnotation, "v2")).To(HaveLen(2), "each crash-looping pod is replaced once")
		Expect(mon.Deletions()).To(HaveLen(4), "the first batch of v1 pods and their crash-looping replacements, nothing else")
		Expect(g.eventReasons(ctx)).NotTo(HaveKey(v1alpha1.ReasonProgressDeadlineExceeded))
	})

	It("rolls back by itself, with onFailure Rollback, once the progress deadline passes", func(ctx SpecContext) {
		g, mon := stuckOnCrashLoop(ctx, func(s *v1alpha1.RolloutGroupSpec) {
			s.OnFailure = v1alpha1.FailureRollback
			s.ProgressDeadline = &metav1.Duration{Duration: 5 * time.Second}
		})

		rg := g.waitPhase(ctx, v1alpha1.PhaseFailed, time.Minute)
		Expect(rg.Status.Analysis).NotTo(BeNil())
		Expect(rg.Status.Analysis.Failure).NotTo(BeNil())
		Expect(rg.Status.Analysis.Failure.Reason).To(Equal(v1alpha1.ReasonProgressDeadlineExceeded))
		Expect(rg.Status.Analysis.Rollback).NotTo(BeNil())
		Expect(rg.Status.Analysis.Rollback.CompletionTime).NotTo(BeNil(), "Failed comes once the rollback is complete")
		g.waitPodsOn(ctx, "v1")
		expectNoBreaches(mon)
		Expect(mon.DeletionsWhere(versionAnnotation, "v2")).To(HaveLen(2), "each crash-looping pod is replaced once")
		Expect(mon.Deletions()).To(HaveLen(4), "the first batch of v1 pods and their crash-looping replacements, nothing else")
		Expect(g.eventReasons(ctx)).To(And(HaveKey(v1alpha1.ReasonProgressDeadlineExceeded),
			HaveKeyWithValue("RollbackStarted", 1), HaveKeyWithValue("RollbackComplete", 1)))
	})
})
