package e2e

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
)

const (
	zoneA = "ingester-zone-a"
	zoneB = "ingester-zone-b"
	zoneC = "ingester-zone-c"
)

var _ = Describe("ScalingPolicy", func() {
	Context("followers of a leader zone", func() {
		It("scale up together at once and down one zone at a time, the zone delay apart, as the StatefulSets see it", func(ctx SpecContext) {
			const delay = 5 * time.Second
			g, rec := followingZones(ctx, 3, delay)
			startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			waitStable(ctx, g.ns, zoneB, zoneC)

			up := time.Now()
			g.scale(ctx, zoneA, 5)
			for _, z := range []string{zoneB, zoneC} {
				c := rec.waitChange(ctx, z, 5, 30*time.Second)
				AddReportEntry(z+" upscaled after the leader's patch", c.At.Sub(up).String())
				Expect(c.At.Sub(up)).To(BeNumerically("<", delay),
					"%s scales up without waiting for the zone delay: upscales are never spaced", z)
				g.scaled[z] = 5
			}
			g.waitPodsOn(ctx, "v1")
			waitStable(ctx, g.ns, zoneB, zoneC)

			g.scale(ctx, zoneA, 2)
			b := rec.waitChange(ctx, zoneB, 2, 30*time.Second)
			c := rec.waitChange(ctx, zoneC, 2, 30*time.Second)
			first, second := b, c
			if c.At.Before(b.At) {
				first, second = c, b
			}
			AddReportEntry("zone downscales apart", second.At.Sub(first.At).String())
			Expect(second.At.Sub(first.At)).To(BeNumerically(">=", delay),
				"%s scaled down %s after %s; the zone delay is %s", second.StatefulSet, second.At.Sub(first.At), first.StatefulSet, delay)
			for _, z := range []string{zoneB, zoneC} {
				Expect(rec.of(z)).To(HaveLen(2), "%s changed once up and once down: %v", z, rec.of(z))
			}
			g.scaled[zoneB], g.scaled[zoneC] = 2, 2
			g.waitPodsOn(ctx, "v1")
			waitStable(ctx, g.ns, zoneB, zoneC)
		})

		It("holds an upscale while a leader pod is not Ready (upscaleOnlyWhenLeaderReady), then scales", func(ctx SpecContext) {
			g := newZones(ctx, 3)
			g.createStatefulSets(ctx, nil)
			g.waitPodsOn(ctx, "v1")
			rec := recordReplicas(ctx, g.ns)
			createPolicy(ctx, g.ns, zoneB, func(s *v1alpha1.ScalingPolicySpec) {
				followLeader(zoneA, 0)(s)
				s.UpscaleOnlyWhenLeaderReady = true
			})
			startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			waitStable(ctx, g.ns, zoneB)

			// As a failing readiness probe would: kwok leaves a Running pod's
			// conditions alone, so the leader keeps a pod not Ready.
			g.setPodReady(ctx, zoneA+"-0", false)
			Eventually(func() int32 { return getStatefulSet(ctx, g.ns, zoneA).Status.ReadyReplicas }).Should(Equal(int32(2)))
			g.scale(ctx, zoneA, 5)
			Eventually(func() int32 { return getStatefulSet(ctx, g.ns, zoneA).Status.ReadyReplicas }).Should(Equal(int32(4)),
				"the leader's new pods are Ready, its pod 0 is not")
			sp := waitPolicy(ctx, g.ns, zoneB, v1alpha1.ScalingPhaseWaiting, v1alpha1.ScalingReasonLeaderNotReady, 30*time.Second)
			Expect(sp.Status.Message).To(ContainSubstring(zoneA))
			Expect(sp.Status.DesiredReplicas).To(Equal(ptr.To[int32](5)))
			Consistently(func() int32 { return *getStatefulSet(ctx, g.ns, zoneB).Spec.Replicas }).WithTimeout(3*time.Second).
				Should(Equal(int32(3)), "no upscale while a leader pod is not Ready")

			readyAt := time.Now()
			g.setPodReady(ctx, zoneA+"-0", true)
			c := rec.waitChange(ctx, zoneB, 5, 30*time.Second)
			Expect(c.At).To(BeTemporally(">", readyAt), "the follower scaled up once the leader was Ready")
			Expect(rec.of(zoneB)).To(HaveLen(1))
			waitStable(ctx, g.ns, zoneB)
		})

		It("still honours the zone delay when the operator is SIGKILLed between two zone downscales and started again", func(ctx SpecContext) {
			// Long enough to kill the operator, start another and let it take the
			// Lease over (4s) well inside it.
			const delay = 15 * time.Second
			g, rec := followingZones(ctx, 4, delay)
			first := startOperator(ctx, "first", g.ns, fastLeaderElection...)
			waitStable(ctx, g.ns, zoneB, zoneC)

			g.scale(ctx, zoneA, 2)
			var down replicasChange
			Eventually(func() []replicasChange {
				changes := append(rec.of(zoneB), rec.of(zoneC)...)
				if len(changes) > 0 {
					down = changes[0]
				}
				return changes
			}).Should(HaveLen(1), "one follower scales down")
			first.Kill()
			Eventually(first.Exited()).Should(BeClosed())
			second := startOperator(ctx, "second", g.ns, fastLeaderElection...)
			Eventually(second.IsLeader).WithTimeout(30 * time.Second).Should(BeTrue())
			leadingAt := time.Now()
			Expect(leadingAt.Sub(down.At)).To(BeNumerically("<", delay-3*time.Second),
				"the restarted operator leads well inside the zone delay, or this spec proves nothing")

			other := zoneC
			if down.StatefulSet == zoneC {
				other = zoneB
			}
			sp := waitPolicy(ctx, g.ns, other, v1alpha1.ScalingPhaseWaiting, v1alpha1.ScalingReasonZoneDelay, 30*time.Second)
			Expect(sp.Status.Message).To(ContainSubstring(down.StatefulSet))
			last := rec.waitChange(ctx, other, 2, time.Minute)
			AddReportEntry("zone downscales apart across the restart", last.At.Sub(down.At).String())
			Expect(last.At.Sub(down.At)).To(BeNumerically(">=", delay),
				"%s scaled down %s after %s, across an operator restart; the zone delay is %s", other, last.At.Sub(down.At), down.StatefulSet, delay)
			g.scaled[zoneB], g.scaled[zoneC] = 2, 2
			g.waitPodsOn(ctx, "v1")
		})
	})

	Context("scaled through its own scale subresource", func() {
		It("is a target a HorizontalPodAutoscaler accepts, and `kubectl scale sp/...` drives its StatefulSet", func(ctx SpecContext) {
			g := newZones(ctx, 3)
			g.createStatefulSets(ctx, nil)
			g.waitPodsOn(ctx, "v1")
			rec := recordReplicas(ctx, g.ns)
			createPolicy(ctx, g.ns, zoneB, selfScaled(3))
			startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			waitStable(ctx, g.ns, zoneB)

			// The API server accepts an HPA aimed at the ScalingPolicy. The HPA
			// controller would scale it from pod metrics, which need a metrics
			// server the test control plane does not run (nor does
			// kube-controller-manager run the HPA controller here); `kubectl
			// scale` below writes the same scale subresource the HPA writes.
			hpa := &autoscalingv2.HorizontalPodAutoscaler{
				ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: zoneB},
				Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
					ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: v1alpha1.GroupVersion.String(), Kind: "ScalingPolicy", Name: zoneB},
					MinReplicas:    ptr.To[int32](1),
					MaxReplicas:    10,
					Metrics: []autoscalingv2.MetricSpec{{
						Type: autoscalingv2.ResourceMetricSourceType,
						Resource: &autoscalingv2.ResourceMetricSource{Name: corev1.ResourceCPU,
							Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To[int32](70)}},
					}},
				},
			}
			Expect(k8s.Create(ctx, hpa)).To(Succeed())
			// What the HPA controller reads: the replicas, and the selector of
			// the pods whose metrics it averages.
			Eventually(func() string {
				return kubectl(ctx, "-n", g.ns, "get", "--raw",
					fmt.Sprintf("/apis/%s/namespaces/%s/scalingpolicies/%s/scale", v1alpha1.GroupVersion, g.ns, zoneB))
			}).Should(And(ContainSubstring(`"replicas":3`), ContainSubstring(`"selector":"app=ingester-zone-b"`)))

			kubectl(ctx, "-n", g.ns, "scale", "sp/"+zoneB, "--replicas=5")
			rec.waitChange(ctx, zoneB, 5, 30*time.Second)
			g.scaled[zoneB] = 5
			g.waitPodsOn(ctx, "v1")
			sp := waitPolicy(ctx, g.ns, zoneB, v1alpha1.ScalingPhaseStable, v1alpha1.ScalingReasonAtDesiredReplicas, 30*time.Second)
			Expect(sp.Status.Replicas).To(Equal(int32(5)))
			Expect(sp.Status.Source).To(Equal("self"))

			kubectl(ctx, "-n", g.ns, "scale", "sp/"+zoneB, "--replicas=2")
			rec.waitChange(ctx, zoneB, 2, 30*time.Second)
			Expect(kubectl(ctx, "-n", g.ns, "get", "sp", zoneB, "-o", "jsonpath={.status.replicas}")).To(Equal("2"))
			Expect(rec.of(zoneA)).To(BeEmpty())
			Expect(rec.of(zoneC)).To(BeEmpty())
		})
	})

	Context("following a resource with a scale subresource", func() {
		BeforeEach(func(ctx SpecContext) { installScaleSources(ctx) })

		It("scales its StatefulSet to a custom resource's scale and writes the replicas back into its status", func(ctx SpecContext) {
			g := newZones(ctx, 3)
			g.createStatefulSets(ctx, nil)
			g.waitPodsOn(ctx, "v1")
			rec := recordReplicas(ctx, g.ns)
			createSource(ctx, replicaTemplateKind, g.ns, "ingester", 3)
			createPolicy(ctx, g.ns, zoneB, func(s *v1alpha1.ScalingPolicySpec) {
				s.ReplicasFrom = &v1alpha1.ReplicasSource{Resource: &v1alpha1.ScaleResourceReference{
					APIVersion: scaleSourceAPI, Kind: replicaTemplateKind.Kind, Name: "ingester"}}
			})
			startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			waitStable(ctx, g.ns, zoneB)
			statusReplicas := func() (int64, error) {
				n, _, err := unstructured.NestedInt64(getSource(ctx, replicaTemplateKind, g.ns, "ingester").Object, "status", "replicas")
				return n, err
			}
			Eventually(statusReplicas).Should(Equal(int64(3)), "write-back of the target's replicas")

			src := &unstructured.Unstructured{}
			src.SetGroupVersionKind(replicaTemplateKind)
			src.SetNamespace(g.ns)
			src.SetName("ingester")
			Expect(k8s.Patch(ctx, src, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":6}}`)))).To(Succeed())
			rec.waitChange(ctx, zoneB, 6, 30*time.Second)
			Eventually(statusReplicas).Should(Equal(int64(6)))
			// The status of the pass that scaled may land after the write-back.
			Eventually(func(gm Gomega) {
				sp := waitPolicy(ctx, g.ns, zoneB, v1alpha1.ScalingPhaseStable, v1alpha1.ScalingReasonAtDesiredReplicas, time.Minute)
				gm.Expect(sp.Status.Source).To(Equal("ReplicaTemplate ingester"))
				gm.Expect(sp.Status.SourceReplicas).To(Equal(ptr.To[int32](6)))
			}).WithTimeout(30 * time.Second).Should(Succeed())

			// Through the resource's own scale subresource, as an HPA aimed at it would.
			kubectl(ctx, "-n", g.ns, "scale", "replicatemplates.scaling.e2e.echelon.dev/ingester", "--replicas=4")
			rec.waitChange(ctx, zoneB, 4, 30*time.Second)
			Eventually(statusReplicas).Should(Equal(int64(4)))
			Expect(rec.of(zoneB)).To(HaveLen(2))
		})

		It("blocks, touching nothing, on a source of an unknown kind and on a source without a scale subresource", func(ctx SpecContext) {
			g := newZones(ctx, 3)
			g.createStatefulSets(ctx, nil)
			g.waitPodsOn(ctx, "v1")
			createSource(ctx, scalelessTemplateKind, g.ns, "plain", 6)
			createPolicy(ctx, g.ns, zoneB, func(s *v1alpha1.ScalingPolicySpec) {
				s.ReplicasFrom = &v1alpha1.ReplicasSource{Resource: &v1alpha1.ScaleResourceReference{
					APIVersion: scaleSourceAPI, Kind: "NoSuchTemplate", Name: "ingester"}}
			})
			createPolicy(ctx, g.ns, zoneC, func(s *v1alpha1.ScalingPolicySpec) {
				s.ReplicasFrom = &v1alpha1.ReplicasSource{Resource: &v1alpha1.ScaleResourceReference{
					APIVersion: scaleSourceAPI, Kind: scalelessTemplateKind.Kind, Name: "plain"}}
			})
			startOperator(ctx, "echelon", g.ns, fastLeaderElection...)

			for z, want := range map[string]string{
				zoneB: "the API server serves no kind NoSuchTemplate in " + scaleSourceAPI,
				zoneC: "ScalelessTemplate plain has no scale subresource",
			} {
				sp := waitPolicy(ctx, g.ns, z, v1alpha1.ScalingPhaseBlocked, v1alpha1.ScalingReasonSourceUnreadable, 30*time.Second)
				Expect(sp.Status.Message).To(ContainSubstring(want))
				Expect(sp.Status.DesiredReplicas).To(BeNil())
				Eventually(func() []string { return policyEvents(ctx, g.ns, z) }).
					Should(ContainElement(HavePrefix("Warning "+v1alpha1.ScalingReasonSourceUnreadable)), "a Warning Event says why")
			}
			for _, z := range []string{zoneB, zoneC} {
				sts := getStatefulSet(ctx, g.ns, z)
				Expect(sts.Generation).To(Equal(int64(1)), "%s: its spec was never written", z)
				Expect(*sts.Spec.Replicas).To(Equal(int32(3)))
			}
		})
	})

	Context("and a RolloutGroup rolling the same StatefulSets", func() {
		It("holds a scale of a member while the group rolls it (Waiting, WaitingForRollout), then scales, with no breach", func(ctx SpecContext) {
			// Paced so that rolling zone-b's six pods one by one takes seconds.
			g := newZoneGroup(ctx, 6, func(s *v1alpha1.RolloutGroupSpec) { s.MinReadySeconds = 2 })
			rec := recordReplicas(ctx, g.ns)
			createPolicy(ctx, g.ns, zoneB, selfScaled(6))
			startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
			waitStable(ctx, g.ns, zoneB)
			mon := g.monitor(ctx)

			g.setVersion(ctx, "v2", zoneB)
			Eventually(func(gm Gomega) {
				rg := g.get(ctx)
				gm.Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseProgressing))
				gm.Expect(rg.Status.CurrentStatefulSet).To(Equal(zoneB))
			}).Should(Succeed())
			mon.SetReplicas(zoneB, 4)
			g.scaled[zoneB] = 4
			patchPolicy(ctx, g.ns, zoneB, `{"spec":{"replicas":4}}`)
			sp := waitPolicy(ctx, g.ns, zoneB, v1alpha1.ScalingPhaseWaiting, v1alpha1.ScalingReasonRollout, 30*time.Second)
			Expect(sp.Status.Message).To(ContainSubstring("RolloutGroup " + g.name))
			Expect(rec.of(zoneB)).To(BeEmpty(), "zone-b keeps its replicas while the group rolls it")
			// Until the group has finished with zone-b, zone-b keeps its replicas.
			// The StatefulSet is read first: a scale seen there while the group
			// still rolls zone-b afterwards was made during the rollout.
			Eventually(func(gm Gomega) {
				replicas := *getStatefulSet(ctx, g.ns, zoneB).Spec.Replicas
				rg := g.get(ctx)
				if rolling := rg.Status.Phase == v1alpha1.PhaseProgressing && rg.Status.CurrentStatefulSet == zoneB; rolling && replicas != 6 {
					StopTrying(fmt.Sprintf("zone-b scaled to %d while the group rolls it: %s", replicas, rg.Status.Message)).Now()
				}
				gm.Expect(replicas).To(Equal(int32(4)))
			}).WithTimeout(2 * time.Minute).Should(Succeed())

			g.waitComplete(ctx, time.Minute)
			g.only(zoneB).waitPodsOn(ctx, "v2")
			g.only(zoneA, zoneC).waitPodsOn(ctx, "v1")
			waitStable(ctx, g.ns, zoneB)
			expectNoBreaches(mon)
			Expect(rec.of(zoneB)).To(HaveLen(1))
		})

		// A downscale waits while a rollout of the group is open, and a
		// rollout waits while a downscale's recorded intent is not seen done
		// (docs/safety.md, guarantee 5): the downscale goes first here, and
		// the rollout started behind it waits until the pods it removes are
		// gone.
		It("holds the group's rollout while a policy scales a member down, until the removed pods are gone, with no breach", func(ctx SpecContext) {
			g := newZoneGroup(ctx, 10, betweenBatches)
			createPolicy(ctx, g.ns, zoneC, selfScaled(10))
			startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
			g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
			waitStable(ctx, g.ns, zoneC)
			// The pods the scale-down removes stay Terminating until released, so
			// that the group has to wait for them for a while.
			var leaving []*corev1.Pod
			for ordinal := 7; ordinal < 10; ordinal++ {
				pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: g.ns, Name: fmt.Sprintf("%s-%d", zoneC, ordinal)}}
				setFinalizer(ctx, pod, true)
				DeferCleanup(setFinalizer, pod, false)
				leaving = append(leaving, pod)
			}
			mon := g.monitor(ctx)
			// Two zones short at once is a breach whoever made them short: the
			// downscale and the rollout must not overlap.
			mon.JudgeEveryMoment()

			mon.SetReplicas(zoneC, 7)
			g.scaled[zoneC] = 7
			patchPolicy(ctx, g.ns, zoneC, `{"spec":{"replicas":7}}`)
			waitReplicas(ctx, g.ns, zoneC, 7, 30*time.Second)
			hold := g.get(ctx).Status.Disruption
			Expect(hold).NotTo(BeNil(), "the downscale records its intent on the group's budget before it scales")
			Expect(hold.Intents).NotTo(BeEmpty(), "the downscale records its intent on the group's budget before it scales")
			last := hold.Intents[len(hold.Intents)-1]
			var removed []string
			for _, p := range last.Pods {
				removed = append(removed, p.Name)
			}
			Expect([]string{last.Zone, string(last.Reason), last.Holder, strings.Join(removed, ",")}).To(Equal(
				[]string{zoneC, string(v1alpha1.DisruptionDownscale), "ScalingPolicy " + zoneC, zoneC + "-9," + zoneC + "-8," + zoneC + "-7"}),
				"the intent names the ordinals the downscale removes")
			Eventually(func(gm Gomega) {
				for _, pod := range leaving {
					gm.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(pod), pod)).To(Succeed())
					gm.Expect(pod.DeletionTimestamp).NotTo(BeNil(), "pod %s", pod.Name)
				}
			}).Should(Succeed(), "the StatefulSet controller removes the pods above the new replicas")

			g.setVersion(ctx, "v2")
			Eventually(func(gm Gomega) {
				rg := g.get(ctx)
				gm.Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseProgressing), "%s", rg.Status.Message)
				gm.Expect(rg.Status.Message).To(ContainSubstring(zoneC))
			}).Should(Succeed(), "the rollout opens and says it waits for zone-c")
			AddReportEntry("the group waiting for the downscale", g.get(ctx).Status.Message)
			// Left alone, the group would roll zone-a's first batch within a
			// reconcile of the template change; 5s waits out many.
			Consistently(func() []framework.Deletion { return mon.Rolls() }).WithTimeout(5*time.Second).Should(BeEmpty(),
				"no member is rolled while zone-c's removed pods are leaving")
			sp := waitPolicy(ctx, g.ns, zoneC, v1alpha1.ScalingPhaseScalingDown, v1alpha1.ScalingReasonAtDesiredReplicas, 30*time.Second)
			Expect(sp.Status.Message).To(ContainSubstring("still leaving"))

			// The downscale's intent ends once its ordinals are seen gone,
			// and not before: none is gone until released here.
			released := time.Now()
			for _, pod := range leaving {
				setFinalizer(ctx, pod, false)
			}
			g.patchSpec(ctx, `{"minReadySeconds":0}`)
			g.waitComplete(ctx, 3*time.Minute)
			g.waitPodsOn(ctx, "v2")
			waitStable(ctx, g.ns, zoneC)
			expectNoBreaches(mon)
			rolls := mon.Rolls()
			Expect(rolls).To(HaveLen(27), "each outdated pod is replaced once: 10 + 10 + the 7 zone-c keeps")
			Expect(rolls[0].At).To(BeTemporally(">=", released),
				"the first pod (%s) is rolled only once zone-c's removed pods, released at %s, are gone: its downscale's intent seen done",
				rolls[0].Pod, released.Format(time.StampMilli))
			Expect(*getStatefulSet(ctx, g.ns, zoneC).Spec.Replicas).To(Equal(int32(7)))
			Expect(strings.Join(policyEvents(ctx, g.ns, zoneC), "\n")).To(ContainSubstring(v1alpha1.ScalingReasonScaledDown))
		})
	})
})
