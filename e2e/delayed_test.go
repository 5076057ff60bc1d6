package e2e

import (
	"net/http"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
)

var _ = Describe("DelayedDownscale", func() {
	It("shrinks a StatefulSet from 5 to 2 in steps as its pods become eligible, never past a pod not prepared for the delay", func(ctx SpecContext) {
		const delay = 12 * time.Second
		s := newDelayedSetup(ctx, 5, "12s", 0)
		// Eligibility comes pod by pod, 4s apart: pod 4 says it was prepared
		// 8s before it is first called, pod 3 4s before, pod 2 when called.
		s.pods.preparedBefore(s.pod(4), 8*time.Second)
		s.pods.preparedBefore(s.pod(3), 4*time.Second)
		s.startOperator(ctx, "echelon")
		waitStable(ctx, s.ns, s.sts)
		s.waitDelayed(ctx, 30*time.Second, idleAt(5))

		s.scaleTo(ctx, 2)
		s.waitDelayed(ctx, 30*time.Second, func(gm Gomega, dd *v1alpha1.DelayedDownscale) {
			gm.Expect(dd.Status.PreparedPods).To(HaveLen(3), "message: %s", dd.Status.Message)
			for i, ord := range []int{4, 3, 2} {
				p := dd.Status.PreparedPods[i]
				gm.Expect(p.Name).To(Equal(s.pod(ord)), "preparedPods are highest ordinal first")
				since, ok := s.pods.preparedSince(p.Name)
				gm.Expect(ok).To(BeTrue(), "%s is prepared", p.Name)
				gm.Expect(p.PreparedAt).NotTo(BeNil(), "%s has preparedAt", p.Name)
				gm.Expect(p.PreparedAt.Time).To(BeTemporally("==", since), "%s's preparedAt is what it answered", p.Name)
				gm.Expect(p.EligibleAt.Time).To(BeTemporally("==", since.Add(delay)))
			}
		})

		s.finish(ctx, 2)
		changes := s.rec.of(s.sts)
		Expect(replicasSteps(changes)).To(Equal([]int32{4, 3, 2}), "one step per pod as it becomes eligible: %v", changes)
		s.pods.expectShrunkOnlyPastEligible(changes, s.sts, delay)
		s.expectPreparedOnce(2, 3, 4)
		s.waitDelayed(ctx, 30*time.Second, idleAt(2))
	})

	// Pods a downscale removes keep their preparation to the end: cancelling
	// it as they shut down would undo, for a Mimir ingester, the preparation of
	// the partition it leaves. The Grafana operator cancels only pods below
	// spec.replicas too.
	It("sends no DELETE to the pods a downscale removes, and DELETE to those that stay", func(ctx SpecContext) {
		s := newDelayedSetup(ctx, 5, "3s", 0)
		s.startOperator(ctx, "echelon")
		waitStable(ctx, s.ns, s.sts)

		s.scaleTo(ctx, 2)
		s.finish(ctx, 2)
		s.waitDelayed(ctx, 30*time.Second, idleAt(2))
		for _, ord := range []int{2, 3, 4} {
			Expect(s.pods.callsTo(s.pod(ord), http.MethodDelete)).To(BeEmpty(), "%s, removed by the downscale, gets no DELETE", s.pod(ord))
		}
		for _, ord := range []int{0, 1} {
			Expect(s.pods.callsTo(s.pod(ord), http.MethodDelete)).NotTo(BeEmpty(), "%s, which stays, gets DELETE once no downscale is pending", s.pod(ord))
		}
	})

	DescribeTable("holds the downscale above a pod that answers badly, loses no replica, and goes on once the pod answers well",
		func(ctx SpecContext, answer podAnswer, wantError string) {
			const delay = 3 * time.Second
			s := newDelayedSetup(ctx, 5, "3s", time.Second)
			bad := s.pod(3)
			s.pods.answer(bad, answer)
			s.startOperator(ctx, "echelon")
			waitStable(ctx, s.ns, s.sts)

			s.scaleTo(ctx, 2)
			// Pod 4 becomes eligible and goes; pod 3 holds itself and pod 2.
			s.waitDelayed(ctx, time.Minute, func(gm Gomega, dd *v1alpha1.DelayedDownscale) {
				gm.Expect(dd.Status.Phase).To(Equal(v1alpha1.DelayedPhaseBlocked), "message: %s", dd.Status.Message)
				gm.Expect(dd.Status.Replicas).To(Equal(int32(4)), "the StatefulSet shrinks past pod 4, which answers well")
				gm.Expect(dd.Status.EligibleReplicas).To(HaveValue(Equal(int32(4))))
				gm.Expect(dd.Status.Message).To(And(ContainSubstring(bad), ContainSubstring(wantError)))
				var errs []string
				for _, p := range dd.Status.PreparedPods {
					if p.Error != "" {
						errs = append(errs, p.Name+": "+p.Error)
					}
				}
				gm.Expect(errs).To(ConsistOf(And(HavePrefix(bad+": "), ContainSubstring(wantError))))
			})
			Eventually(func() []string { return s.delayedEvents(ctx) }).Should(ContainElement(
				And(HavePrefix("Warning DownscaleHeld: "), ContainSubstring(bad), ContainSubstring(wantError))))

			// Pod 2, below the bad pod, has been eligible since eligible2. Once
			// the bad pod has been called three times after that, the passes
			// before the last one knew all they needed to shrink past it, and
			// the ScalingPolicy had a retry interval to act on them.
			eligible2, ok := s.pods.eligibleAt(s.pod(2), time.Now(), delay)
			Expect(ok).To(BeTrue(), "pod 2 is prepared")
			Eventually(func() int {
				n := 0
				for _, c := range s.pods.callsTo(bad, http.MethodPost) {
					if c.At.After(eligible2) {
						n++
					}
				}
				return n
			}).WithTimeout(time.Minute).Should(BeNumerically(">=", 3))
			Expect(s.minReplicas(5)).To(Equal(int32(4)), "the StatefulSet is never shrunk past %s: %v", bad, s.rec.of(s.sts))
			Expect(*getStatefulSet(ctx, s.ns, s.sts).Spec.Replicas).To(Equal(int32(4)))
			s.scaled[s.sts] = 4
			s.waitPodsOn(ctx, "v1")

			s.pods.answer(bad, answerWell)
			s.finish(ctx, 2)
			changes := s.rec.of(s.sts)
			Expect(replicasSteps(changes)).To(Equal([]int32{4, 2}), "%v", changes)
			// Pod 3 was prepared only once it answered well: the last step waited for
			// the delay from then.
			s.pods.expectShrunkOnlyPastEligible(changes, s.sts, delay)
			s.waitDelayed(ctx, 30*time.Second, idleAt(2))
		},
		Entry("500", answer500, "POST answered 500"),
		Entry("a body that is not JSON", answerGarbage, "not JSON"),
		Entry("no answer within spec.timeout", answerNothing, "no answer within the timeout"),
	)

	It("cancels with DELETE on every prepared pod when the ScalingPolicy is raised mid-way", func(ctx SpecContext) {
		s := newDelayedSetup(ctx, 5, "1h", 0)
		s.startOperator(ctx, "echelon")
		waitStable(ctx, s.ns, s.sts)

		s.scaleTo(ctx, 2)
		s.waitDelayed(ctx, 30*time.Second, func(gm Gomega, dd *v1alpha1.DelayedDownscale) {
			gm.Expect(dd.Status.Phase).To(Equal(v1alpha1.DelayedPhaseWaiting), "message: %s", dd.Status.Message)
			gm.Expect(dd.Status.PreparedCount).To(Equal(int32(3)))
		})
		prepared := []string{s.pod(2), s.pod(3), s.pod(4)}
		for _, pod := range prepared {
			_, ok := s.pods.preparedSince(pod)
			Expect(ok).To(BeTrue(), "%s is prepared", pod)
		}
		Expect(s.pods.callsTo("", http.MethodDelete)).To(BeEmpty(), "nothing is cancelled before the upscale")

		s.scaleTo(ctx, 6)
		for _, pod := range prepared {
			Eventually(func() []podCall { return s.pods.callsTo(pod, http.MethodDelete) }).
				WithTimeout(30*time.Second).ShouldNot(BeEmpty(), "%s gets DELETE", pod)
			_, ok := s.pods.preparedSince(pod)
			Expect(ok).To(BeFalse(), "%s is no longer prepared", pod)
		}
		s.waitDelayed(ctx, 30*time.Second, func(gm Gomega, dd *v1alpha1.DelayedDownscale) {
			gm.Expect(dd.Status.Phase).To(Equal(v1alpha1.DelayedPhaseIdle), "message: %s", dd.Status.Message)
			gm.Expect(dd.Status.PreparedPods).To(BeEmpty())
			gm.Expect(dd.Status.EligibleReplicas).To(BeNil())
		})
		s.finish(ctx, 6)
		Expect(replicasSteps(s.rec.of(s.sts))).To(Equal([]int32{6}), "no replica was removed")
	})

	It("resumes after the operator is SIGKILLed mid-way from what the pods report, preparing no pod again", func(ctx SpecContext) {
		const delay = 20 * time.Second
		s := newDelayedSetup(ctx, 5, "20s", 0)
		// Pod 4 has been prepared for the whole delay already, so the first
		// step comes at once; pods 3 and 2 say they were prepared 10s before
		// they are first called, and wait the other 10s.
		s.pods.preparedBefore(s.pod(4), delay)
		s.pods.preparedBefore(s.pod(3), delay/2)
		s.pods.preparedBefore(s.pod(2), delay/2)
		first := s.startOperator(ctx, "first")
		waitStable(ctx, s.ns, s.sts)

		s.scaleTo(ctx, 2)
		s.rec.waitChange(ctx, s.sts, 4, 30*time.Second)
		s.waitDelayed(ctx, 30*time.Second, func(gm Gomega, dd *v1alpha1.DelayedDownscale) {
			gm.Expect(dd.Status.Phase).To(Equal(v1alpha1.DelayedPhaseWaiting), "message: %s", dd.Status.Message)
			gm.Expect(dd.Status.Replicas).To(Equal(int32(4)))
			gm.Expect(dd.Status.PreparedCount).To(Equal(int32(2)))
		})
		first.Kill()
		Eventually(first.Exited()).Should(BeClosed())
		eligible, ok := s.pods.eligibleAt(s.pod(2), time.Now(), delay)
		Expect(ok).To(BeTrue())
		Expect(time.Now()).To(BeTemporally("<", eligible), "the operator is killed before pods 3 and 2 are eligible")

		restarted := time.Now()
		s.startOperator(ctx, "second")
		s.finish(ctx, 2)
		changes := s.rec.of(s.sts)
		Expect(replicasSteps(changes)).To(Equal([]int32{4, 2}), "%v", changes)
		s.pods.expectShrunkOnlyPastEligible(changes, s.sts, delay)
		s.expectPreparedOnce(2, 3, 4)
		// An operator that started the wait over on restart would shrink a
		// whole delay after it; the pods' answers put the end 10s earlier.
		Expect(changes[1].At).To(BeTemporally("<", restarted.Add(delay)),
			"the downscale ends when the pods' preparation says, not a delay after the restart")
	})

	It("calls pods only from the leader: a standby operator calls none", func(ctx SpecContext) {
		s := newDelayedSetup(ctx, 5, "3s", 0)
		ops := []*framework.Operator{s.startOperator(ctx, "one"), s.startOperator(ctx, "two")}
		leader := leaderOf(ops)
		standby := ops[0]
		if standby == leader {
			standby = ops[1]
		}
		waitStable(ctx, s.ns, s.sts)

		s.scaleTo(ctx, 2)
		s.finish(ctx, 2)
		s.waitDelayed(ctx, 30*time.Second, idleAt(2))
		Expect(leaderOf(ops)).To(BeIdenticalTo(leader), "one instance led throughout")
		calls := len(s.pods.allCalls())
		Expect(calls).To(BeNumerically(">", 0))
		Eventually(func() float64 { n, _ := podCallsMetric(leader, s.ns); return n }).
			Should(Equal(float64(calls)), "the leader counted every call the pods received")
		_, found := podCallsMetric(standby, s.ns)
		Expect(found).To(BeFalse(), "the standby exports no pod calls")

		// The standby counts its calls once it leads, so the absence above
		// means it made none.
		leader.Kill()
		Expect(leaderOf(ops)).To(BeIdenticalTo(standby), "the standby takes over")
		before := len(s.pods.allCalls())
		s.scaleTo(ctx, 1)
		s.finish(ctx, 1)
		after := len(s.pods.allCalls())
		Expect(after).To(BeNumerically(">", before), "the new leader calls pod 1")
		Eventually(func() float64 { n, _ := podCallsMetric(standby, s.ns); return n }).
			Should(Equal(float64(after-before)), "the new leader counted every call since it took over")
	})
})
