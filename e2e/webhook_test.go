package e2e

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/test/builders"
)

// guardOnly makes a policy that scales nothing and refuses every downscale
// but its own.
func guardOnly(s *v1alpha1.ScalingPolicySpec) {
	s.Downscale = &v1alpha1.DownscaleRules{Allowed: ptr.To(false)}
}

// preparedBy makes a policy's downscales call pods on the test pods' server.
func preparedBy(pods *preparePods) func(*v1alpha1.ScalingPolicySpec) {
	return func(s *v1alpha1.ScalingPolicySpec) {
		s.Downscale = &v1alpha1.DownscaleRules{Prepare: &v1alpha1.PrepareDownscaleEndpoint{PrepareEndpoint: v1alpha1.PrepareEndpoint{Path: preparePath, Port: int32(pods.port)}, Timeout: &metav1.Duration{Duration: 2 * time.Second}}}
	}
}

// newDeployment is a Deployment of replicas kwok pods in ns.
func newDeployment(ns, name string, replicas int32) *appsv1.Deployment {
	sts := zoneStatefulSet(ns, name, replicas, "v1").Obj()
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec:       appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: sts.Spec.Selector, Template: sts.Spec.Template},
	}
}

var _ = Describe("The no-downscale webhook", func() {
	It("refuses kubectl scale and spec updates that shrink a guarded StatefulSet or Deployment, naming the policy, and lets them grow", func(ctx SpecContext) {
		g := newZones(ctx, 3)
		g.zones = g.zones[:1]
		g.createStatefulSets(ctx, nil)
		Expect(k8s.Create(ctx, newDeployment(g.ns, "web", 3))).To(Succeed())
		createPolicy(ctx, g.ns, g.zones[0], guardOnly)
		createPolicy(ctx, g.ns, "web", func(s *v1alpha1.ScalingPolicySpec) {
			s.TargetRef.Kind = v1alpha1.TargetKindDeployment
			guardOnly(s)
		})
		startWebhookOperator(ctx, "echelon", g.ns)

		for _, target := range []struct{ kind, name string }{{"StatefulSet", g.zones[0]}, {"Deployment", "web"}} {
			By(fmt.Sprintf("kubectl scale %s %s down", target.kind, target.name))
			out, ok := scaleWithKubectl(ctx, g.ns, target.kind, target.name, 2)
			Expect(ok).To(BeFalse(), "kubectl scale down was admitted: %s", out)
			Expect(out).To(ContainSubstring("ScalingPolicy " + target.name))
			Expect(out).To(ContainSubstring("downscale.allowed"))

			By("a spec update that shrinks it")
			out, ok = tryKubectl(ctx, "-n", g.ns, "patch", target.kind, target.name, "--type=merge", "-p", `{"spec":{"replicas":1}}`)
			Expect(ok).To(BeFalse(), "a spec update down was admitted: %s", out)
			Expect(out).To(ContainSubstring("ScalingPolicy " + target.name))

			By("growth is allowed")
			out, ok = scaleWithKubectl(ctx, g.ns, target.kind, target.name, 4)
			Expect(ok).To(BeTrue(), out)
			Eventually(func() []string { return warningEvents(ctx, g.ns, target.name) }).WithContext(ctx).
				Should(ContainElement(ContainSubstring("ScalingPolicy " + target.name)))
		}
	})

	It("lets the operator's own ScalingPolicy downscale a follower that refuses everyone else's", func(ctx SpecContext) {
		g := newZones(ctx, 4)
		g.zones = g.zones[:2]
		g.createStatefulSets(ctx, nil)
		leader, follower := g.zones[0], g.zones[1]
		createPolicy(ctx, g.ns, follower, func(s *v1alpha1.ScalingPolicySpec) {
			followLeader(leader, 0)(s)
			guardOnly(s)
		})
		startWebhookOperator(ctx, "echelon", g.ns)

		out, ok := scaleWithKubectl(ctx, g.ns, "StatefulSet", follower, 3)
		Expect(ok).To(BeFalse(), "a person's downscale of the follower was admitted: %s", out)

		kubectl(ctx, "-n", g.ns, "scale", "statefulset/"+leader, "--replicas=2")
		waitReplicas(ctx, g.ns, follower, 2, time.Minute)
		sp := waitPolicy(ctx, g.ns, follower, v1alpha1.ScalingPhaseStable, v1alpha1.ScalingReasonAtDesiredReplicas, time.Minute)
		Expect(sp.Status.LastDownscaleTime).NotTo(BeNil())
	})
})

var _ = Describe("The prepare-downscale webhook", func() {
	// preparedZone is one StatefulSet of replicas Ready pods whose policy
	// prepares its downscales on the test pods' server.
	preparedZone := func(ctx context.Context, replicas int32) (*zoneGroup, *preparePods) {
		g := newZones(ctx, replicas)
		g.zones = g.zones[:1]
		pods := startPreparePods()
		g.createStatefulSets(ctx, nil)
		g.waitPodsOn(ctx, "v1")
		pods.learnPods(ctx, g.ns)
		createPolicy(ctx, g.ns, g.zones[0], preparedBy(pods))
		startWebhookOperator(ctx, "echelon", g.ns)
		return g, pods
	}

	It("calls every pod being removed before admitting, and records the downscale", func(ctx SpecContext) {
		g, pods := preparedZone(ctx, 5)
		sts := g.zones[0]
		before := time.Now()
		out, ok := scaleWithKubectl(ctx, g.ns, "StatefulSet", sts, 2)
		Expect(ok).To(BeTrue(), out)
		for _, ordinal := range []int{2, 3, 4} {
			Expect(pods.callsTo(fmt.Sprintf("%s-%d", sts, ordinal), "POST")).To(HaveLen(1), "pod %d prepared once", ordinal)
		}
		for _, ordinal := range []int{0, 1} {
			Expect(pods.callsTo(fmt.Sprintf("%s-%d", sts, ordinal), "")).To(BeEmpty(), "pod %d stays: not called", ordinal)
		}
		sp := &v1alpha1.ScalingPolicy{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: sts}, sp)).To(Succeed())
		Expect(sp.Status.LastDownscaleTime).NotTo(BeNil(), "the admitted downscale is recorded where the controller reads it")
		Expect(sp.Status.LastDownscaleTime.Time).To(BeTemporally(">=", before.Add(-time.Second)))
	})

	It("cancels the pods it prepared with DELETE and refuses, naming the pod that failed", func(ctx SpecContext) {
		g, pods := preparedZone(ctx, 5)
		sts := g.zones[0]
		failing := sts + "-3"
		pods.answer(failing, answer500)
		out, ok := scaleWithKubectl(ctx, g.ns, "StatefulSet", sts, 2)
		Expect(ok).To(BeFalse(), "admitted although %s failed: %s", failing, out)
		Expect(out).To(ContainSubstring(failing))
		Expect(out).To(ContainSubstring("500"))
		for _, pod := range []string{sts + "-2", sts + "-4"} {
			Expect(pods.callsTo(pod, "POST")).To(HaveLen(1))
			Expect(pods.callsTo(pod, "DELETE")).To(HaveLen(1), "%s prepared, then cancelled", pod)
		}
		Expect(*getStatefulSet(ctx, g.ns, sts).Spec.Replicas).To(Equal(int32(5)))
		Eventually(func() []string { return warningEvents(ctx, g.ns, sts) }).WithContext(ctx).
			Should(ContainElement(ContainSubstring(failing)))
	})

	It("calls no pod for a server-side dry run", func(ctx SpecContext) {
		g, pods := preparedZone(ctx, 4)
		out, ok := scaleWithKubectl(ctx, g.ns, "StatefulSet", g.zones[0], 1, "--dry-run=server")
		Expect(ok).To(BeTrue(), out)
		Expect(pods.allCalls()).To(BeEmpty())
		Expect(*getStatefulSet(ctx, g.ns, g.zones[0]).Spec.Replicas).To(Equal(int32(4)))
	})

	It("refuses a downscale within the zone delay of another member's, and admits it once the delay has passed", func(ctx SpecContext) {
		const delay = 5 * time.Second
		g := newZones(ctx, 3)
		g.zones = g.zones[:2]
		pods := startPreparePods()
		g.createStatefulSets(ctx, nil)
		g.createGroup(ctx, nil)
		g.waitPodsOn(ctx, "v1")
		pods.learnPods(ctx, g.ns)
		for _, z := range g.zones {
			createPolicy(ctx, g.ns, z, func(s *v1alpha1.ScalingPolicySpec) {
				preparedBy(pods)(s)
				s.MinTimeBetweenZoneDownscales = &metav1.Duration{Duration: delay}
			})
		}
		startWebhookOperator(ctx, "echelon", g.ns)

		out, ok := scaleWithKubectl(ctx, g.ns, "StatefulSet", g.zones[0], 2)
		Expect(ok).To(BeTrue(), out)
		first := time.Now()
		out, ok = scaleWithKubectl(ctx, g.ns, "StatefulSet", g.zones[1], 2)
		Expect(ok).To(BeFalse(), "a second zone was downscaled within the delay: %s", out)
		Expect(out).To(ContainSubstring("minTimeBetweenZoneDownscales"))
		Expect(pods.callsTo(g.zones[1]+"-2", "")).To(BeEmpty(), "a refused downscale calls no pod")

		// Once the first zone's removed pod is gone (every member Ready) and the
		// delay has passed, the same request is admitted.
		var admittedAt time.Time
		Eventually(func() bool {
			_, ok := scaleWithKubectl(ctx, g.ns, "StatefulSet", g.zones[1], 2)
			admittedAt = time.Now()
			return ok
		}).WithContext(ctx).WithTimeout(time.Minute).WithPolling(500 * time.Millisecond).Should(BeTrue())
		Expect(admittedAt.Sub(first)).To(BeNumerically(">=", delay-time.Second))
	})
})

var _ = Describe("Cross-object validation", func() {
	It("refuses a second RolloutGroup claiming a StatefulSet, naming the field", func(ctx SpecContext) {
		g := newZones(ctx, 1)
		g.createStatefulSets(ctx, nil)
		g.createGroup(ctx, nil)
		startWebhookOperator(ctx, "echelon", g.ns)
		// The validate webhook fails open: until the operator's cache holds
		// the first group, a second one may be admitted. Ask until it is
		// refused, removing what was admitted meanwhile.
		var err error
		Eventually(func() error {
			second := builders.MakeRolloutGroup(g.ns, "second").Members(g.zones[1]).Obj()
			if err = k8s.Create(ctx, second); err == nil {
				Expect(k8s.Delete(ctx, second)).To(Succeed())
				return errors.New("admitted before the operator's cache held the first group")
			}
			return nil
		}).WithContext(ctx).WithTimeout(30 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())
		Expect(err.Error()).To(ContainSubstring("spec.statefulSets[0].name"))
		Expect(err.Error()).To(ContainSubstring(g.name))
	})
})

var _ = Describe("Webhook certificates and availability", func() {
	It("rotates the serving certificate and CA under a steady stream of admission requests without failing one", func(ctx SpecContext) {
		g := newZones(ctx, 2)
		g.zones = g.zones[:1]
		g.createStatefulSets(ctx, nil)
		createPolicy(ctx, g.ns, g.zones[0], guardOnly)
		// One-minute certificates: renewed after 40 s.
		startWebhookOperator(ctx, "echelon", g.ns, "--webhook-cert-validity=1m", "--webhook-ca-validity=1m")
		secret := &corev1.Secret{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: webhookCertSecret}, secret)).To(Succeed())
		firstCert := string(secret.Data["tls.crt"])

		var requests, failures atomic.Int64
		var mu sync.Mutex
		var lastFailure string
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					// A denied downscale is an answer from the webhook; a failure to
					// call it (TLS, connection) would be a different error.
					out, _ := scaleWithKubectl(ctx, g.ns, "StatefulSet", g.zones[0], 1, "--dry-run=server")
					requests.Add(1)
					if !strings.Contains(out, "ScalingPolicy "+g.zones[0]) {
						failures.Add(1)
						mu.Lock()
						lastFailure = out
						mu.Unlock()
					}
				}
			}()
		}
		Eventually(func(g Gomega) {
			s := &corev1.Secret{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(secret), s)).To(Succeed())
			g.Expect(string(s.Data["tls.crt"])).NotTo(Equal(firstCert))
		}).WithContext(ctx).WithTimeout(90 * time.Second).WithPolling(time.Second).Should(Succeed())
		// Keep the stream going a little past the swap.
		time.Sleep(5 * time.Second)
		close(stop)
		wg.Wait()
		GinkgoWriter.Printf("admission requests during rotation: %d, failures: %d\n", requests.Load(), failures.Load())
		Expect(requests.Load()).To(BeNumerically(">", 20))
		Expect(failures.Load()).To(BeZero(), "last failure: %s", lastFailure)
	})

	It("refuses guarded downscales while the operator is stopped (failurePolicy Fail) and admits RolloutGroups (validation's Ignore)", func(ctx SpecContext) {
		g := newZones(ctx, 2)
		g.zones = g.zones[:1]
		g.createStatefulSets(ctx, nil)
		createPolicy(ctx, g.ns, g.zones[0], guardOnly)
		op := startWebhookOperator(ctx, "echelon", g.ns)
		Expect(op.Stop(15 * time.Second)).To(Succeed())

		out, ok := scaleWithKubectl(ctx, g.ns, "StatefulSet", g.zones[0], 1)
		Expect(ok).To(BeFalse(), "a downscale was admitted with the operator stopped: %s", out)
		Expect(out).To(ContainSubstring("failed calling webhook"))
		Expect(*getStatefulSet(ctx, g.ns, g.zones[0]).Spec.Replicas).To(Equal(int32(2)))

		g.createGroup(ctx, nil)
	})
})
