package e2e

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"log"
	"maps"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/hooks"
	"github.com/echelon-operator/echelon/internal/httptls/httptlstest"
	"github.com/echelon-operator/echelon/internal/podname"
	"github.com/echelon-operator/echelon/test/builders"
)

// hookReceiver is an HTTP server on every loopback address: it answers as
// the health endpoint of http checks, as every kwok pod's beforePodRemoval
// endpoint (the pod is named in the call) and as the member hooks' URL.
type hookReceiver struct {
	port   int
	scheme string

	mu      sync.Mutex
	healthy bool
	health  []string // paths of the health requests
	removal []hooks.RemovalPayload
	// late are the pods whose removal call came when they were gone,
	// terminating, or already released by their StatefulSet's partition.
	late    []string
	members []hooks.MemberPayload
	failing map[string]bool // pods whose removal call answers 503
}

func startHookReceiver() *hookReceiver {
	GinkgoHelper()
	l, err := net.Listen("tcp", "0.0.0.0:0")
	Expect(err).NotTo(HaveOccurred())
	h := &hookReceiver{port: l.Addr().(*net.TCPAddr).Port, scheme: "http", failing: map[string]bool{}}
	srv := &http.Server{Handler: http.HandlerFunc(h.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)
	return h
}

// startTLSHookReceiver is a hookReceiver answering https on 127.0.0.1 with a
// certificate ca signed.
func startTLSHookReceiver(ca *httptlstest.CA) *hookReceiver {
	GinkgoHelper()
	pair, err := ca.Server("127.0.0.1")
	Expect(err).NotTo(HaveOccurred())
	cert, err := pair.TLS()
	Expect(err).NotTo(HaveOccurred())
	l, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}})
	Expect(err).NotTo(HaveOccurred())
	h := &hookReceiver{port: l.Addr().(*net.TCPAddr).Port, scheme: "https", failing: map[string]bool{}}
	// The handshakes the operator fails before it trusts the CA are expected.
	srv := &http.Server{Handler: http.HandlerFunc(h.serve), ReadHeaderTimeout: 5 * time.Second, ErrorLog: log.New(io.Discard, "", 0)}
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)
	return h
}

func (h *hookReceiver) url(path string) string {
	return fmt.Sprintf("%s://127.0.0.1:%d%s", h.scheme, h.port, path)
}

func (h *hookReceiver) serve(w http.ResponseWriter, r *http.Request) {
	var removal hooks.RemovalPayload
	var late bool
	if r.URL.Path == "/prepare-removal" {
		// No assertion here (a handler's goroutine must not fail the spec):
		// a body that does not carry the query's reason is recorded as
		// reason "mismatch", which no expectation accepts.
		if err := json.NewDecoder(r.Body).Decode(&removal); err != nil || r.URL.Query().Get("reason") != string(removal.Reason) {
			removal.Reason = "mismatch"
		}
		late = !stillUnreleased(r.Context(), removal)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case strings.HasPrefix(r.URL.Path, "/health/"):
		h.health = append(h.health, r.URL.Path)
		if !h.healthy {
			_, _ = w.Write([]byte(`[]`))
			return
		}
		_, _ = w.Write([]byte(`[{"Checks": [{"Status": "passing"}]}, {"Checks": [{"Status": "passing"}]}]`))
	case r.URL.Path == "/prepare-removal":
		p := removal
		h.removal = append(h.removal, p)
		if late {
			h.late = append(h.late, p.Pod)
		}
		if h.failing[p.Pod] {
			http.Error(w, "still in the ring", http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	case strings.HasPrefix(r.URL.Path, "/member/"):
		var p hooks.MemberPayload
		if err := json.NewDecoder(r.Body).Decode(&p); err != nil {
			p.Hook = "undecodable"
		}
		h.members = append(h.members, p)
		w.WriteHeader(http.StatusNoContent)
	default:
		http.NotFound(w, r)
	}
}

// stillUnreleased reports whether the pod a removal call names is still
// there, not terminating, and below its StatefulSet's partition when it has
// one: nothing has started to remove it yet.
func stillUnreleased(ctx context.Context, p hooks.RemovalPayload) bool {
	pod := &corev1.Pod{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Pod}, pod); err != nil || pod.DeletionTimestamp != nil {
		return false
	}
	sts := &appsv1.StatefulSet{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Member}, sts); err != nil {
		return false
	}
	if sts.Spec.UpdateStrategy.Type == appsv1.OnDeleteStatefulSetStrategyType {
		return true
	}
	var partition int32
	if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
		partition = *ru.Partition
	}
	ord, ok := podname.Ordinal(sts.Name, p.Pod)
	return ok && int32(ord)-podname.Start(sts) < partition
}

// latePods are the pods whose removal call came after their removal began.
func (h *hookReceiver) latePods() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.late)
}

// refuseRollout makes pod's beforePodRemoval hook refuse, rolls the group
// to version, and waits until the group's HookFailed condition is True
// saying pod is not removed and pod was called at least calls times.
func (g *zoneGroup) refuseRollout(ctx context.Context, recv *hookReceiver, pod, version string, calls int) {
	GinkgoHelper()
	recv.setFailing(pod, true)
	g.setVersion(ctx, version)
	Eventually(func(gm Gomega) {
		c := meta.FindStatusCondition(g.get(ctx).Status.Conditions, v1alpha1.ConditionHookFailed)
		gm.Expect(c).NotTo(BeNil())
		gm.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		gm.Expect(c.Message).To(ContainSubstring("pod " + pod + " not removed"))
	}).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
	Eventually(func() int { return recv.removals(v1alpha1.RemovalRollout)[pod] }).WithContext(ctx).WithTimeout(30*time.Second).
		Should(BeNumerically(">=", calls), "the refusing pod is called again")
}

func (h *hookReceiver) setHealthy(v bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.healthy = v
}

func (h *hookReceiver) setFailing(pod string, v bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.failing[pod] = v
}

func (h *hookReceiver) healthRequests(path string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, p := range h.health {
		if p == path {
			n++
		}
	}
	return n
}

// removals counts the beforePodRemoval calls of each pod with reason.
func (h *hookReceiver) removals(reason v1alpha1.RemovalReason) map[string]int {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := map[string]int{}
	for _, p := range h.removal {
		if p.Reason == reason {
			out[p.Pod]++
		}
	}
	return out
}

// memberCalls lists the member hook calls as "<hook> <member>", in order.
func (h *hookReceiver) memberCalls() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []string
	for _, p := range h.members {
		out = append(out, p.Hook+" "+p.Member)
	}
	return out
}

var _ = Describe("HTTP gates and hooks", func() {
	It("holds the next zone while an http check against a Consul-style health endpoint fails, then rolls on once it passes", func(ctx SpecContext) {
		recv := startHookReceiver()
		g := newZoneGroup(ctx, 3, func(s *v1alpha1.RolloutGroupSpec) {
			s.Analysis = &v1alpha1.RolloutAnalysis{Checks: []v1alpha1.AnalysisCheck{{
				Name: "consul", Gate: v1alpha1.GateAfterMember,
				HTTP:      &v1alpha1.HTTPCheck{URL: recv.url("/health/{{ .Member }}") + "?passing", JSONPath: "#"},
				Condition: v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: v1alpha1.OperatorGreaterOrEqual, Threshold: "2"}},
				Interval:  &metav1.Duration{Duration: time.Second}, FailureThreshold: 1000,
			}}}
		})
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		g.setVersion(ctx, "v2")
		Eventually(func() int { return recv.healthRequests("/health/ingester-zone-a") }).WithContext(ctx).
			WithTimeout(time.Minute).Should(BeNumerically(">=", 3), "zone-a's gate asks the health endpoint each interval")
		rg := g.get(ctx)
		Expect(rg.Status.Phase).To(Equal(v1alpha1.PhaseAnalyzing))
		Expect(rg.Status.Analysis.Checks).To(HaveLen(1))
		Expect(rg.Status.Analysis.Checks[0].LastValue).To(Equal("0"))
		Expect(mon.MemberOrder()).To(Equal([]string{"ingester-zone-a"}), "no pod of another zone rolled while zone-a's gate fails")
		Expect(recv.healthRequests("/health/ingester-zone-b")).To(BeZero())

		recv.setHealthy(true)
		g.waitComplete(ctx, 2*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.MemberOrder()).To(Equal(g.zones))
		Expect(recv.healthRequests("/health/ingester-zone-c")).To(BeNumerically(">=", 1), "each zone's gate expands the URL for its zone")
		Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(HaveKeyWithValue("GatePassed", 3))
	})

	It("refuses, with the guard's default, an http check to a loopback address: holds the zone with an error naming the field and the rule, and never calls it", func(ctx SpecContext) {
		recv := startHookReceiver()
		recv.setHealthy(true)
		g := newZoneGroup(ctx, 3, func(s *v1alpha1.RolloutGroupSpec) {
			s.Analysis = &v1alpha1.RolloutAnalysis{Checks: []v1alpha1.AnalysisCheck{{
				Name: "metrics", Gate: v1alpha1.GateAfterMember,
				HTTP:      &v1alpha1.HTTPCheck{URL: recv.url("/health/{{ .Member }}") + "?passing", JSONPath: "#"},
				Condition: v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: v1alpha1.OperatorGreaterOrEqual, Threshold: "2"}},
				Interval:  &metav1.Duration{Duration: time.Second}, FailureThreshold: 1000, ErrorThreshold: 1000,
			}}}
		})
		// A later flag wins: the allowlist is empty again, as in production.
		startOperator(ctx, "echelon", g.ns, append([]string{"--egress-allow="}, fastLeaderElection...)...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)

		g.setVersion(ctx, "v2")
		lastError := func(gm Gomega) string { return checkOf(gm, g.get(ctx).Status.Analysis, "metrics").LastError }
		Eventually(lastError).WithContext(ctx).WithTimeout(time.Minute).Should(And(
			ContainSubstring(`spec.analysis.checks[metrics].http.url: refused by the egress guard (rule "loopback")`),
			ContainSubstring("--egress-allow")))
		Expect(recv.healthRequests("/health/ingester-zone-a")).To(BeZero(), "the guard refuses before connecting")
	})

	It("trusts a private CA from a Secret for an https check: holds the zone with an error naming the field while the Secret is missing or holds another CA, rolls on once it holds the right one", func(ctx SpecContext) {
		ca, err := httptlstest.NewCA("consul-ca")
		Expect(err).NotTo(HaveOccurred())
		other, err := httptlstest.NewCA("another-ca")
		Expect(err).NotTo(HaveOccurred())
		recv := startTLSHookReceiver(ca)
		recv.setHealthy(true)
		g := newZoneGroup(ctx, 3, func(s *v1alpha1.RolloutGroupSpec) {
			s.Analysis = &v1alpha1.RolloutAnalysis{Checks: []v1alpha1.AnalysisCheck{{
				Name: "consul", Gate: v1alpha1.GateAfterMember,
				HTTP: &v1alpha1.HTTPCheck{URL: recv.url("/health/{{ .Member }}") + "?passing", JSONPath: "#",
					TLS: &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "consul-ca"}}},
				Condition: v1alpha1.CheckCondition{Compare: &v1alpha1.Comparison{Operator: v1alpha1.OperatorGreaterOrEqual, Threshold: "2"}},
				Interval:  &metav1.Duration{Duration: time.Second}, FailureThreshold: 1000, ErrorThreshold: 1000,
			}}}
		})
		// The operator reads no Secret unless granted, namespace by namespace.
		Expect(cp.GrantAnalysisSecrets(ctx, operatorUser.Name, g.ns)).To(Succeed())
		startOperator(ctx, "echelon", g.ns, fastLeaderElection...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)
		lastError := func(gm Gomega) string { return checkOf(gm, g.get(ctx).Status.Analysis, "consul").LastError }

		g.setVersion(ctx, "v2")
		Eventually(lastError).WithContext(ctx).WithTimeout(time.Minute).Should(Equal(
			"spec.analysis.checks[consul].http.tls.caSecretRef: Secret consul-ca not found in namespace "+g.ns), "the missing Secret is named with its field")
		Expect(recv.healthRequests("/health/ingester-zone-a")).To(BeZero(), "no request without the tls block's CA")

		secret := httptlstest.CASecret(g.ns, "consul-ca", other.PEM)
		Expect(k8s.Create(ctx, secret)).To(Succeed())
		Eventually(lastError).WithContext(ctx).WithTimeout(time.Minute).Should(ContainSubstring("certificate signed by unknown authority"),
			"a CA that did not sign the server's certificate is refused")
		Expect(recv.healthRequests("/health/ingester-zone-a")).To(BeZero(), "no request reaches a server that is not trusted")
		Expect(mon.MemberOrder()).To(Equal([]string{"ingester-zone-a"}), "no pod of another zone rolled while zone-a's gate errs")
		Expect(g.get(ctx).Status.Phase).To(Equal(v1alpha1.PhaseAnalyzing))

		// The Secret is rotated to the right CA: read again on the next
		// check, with no restart.
		secret.Data["ca.crt"] = ca.PEM
		Expect(k8s.Update(ctx, secret)).To(Succeed())
		g.waitComplete(ctx, 2*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.MemberOrder()).To(Equal(g.zones))
		Expect(recv.healthRequests("/health/ingester-zone-c")).To(BeNumerically(">=", 1))
		Eventually(func() map[string]int { return g.eventReasons(ctx) }).Should(HaveKeyWithValue("GatePassed", 3))
	})

	It("tells each pod why it goes: rollout, rotation and eviction; calls the member hooks once per zone in order; an eviction whose hook fails is refused", func(ctx SpecContext) {
		recv := startHookReceiver()
		g := newBudgetGroup(ctx, 2, func(s *v1alpha1.RolloutGroupSpec) {
			evictionBudget(1)(s)
			s.Hooks = &v1alpha1.RolloutGroupHooks{
				BeforePodRemoval: &v1alpha1.PodRemovalHook{
					Endpoint:   v1alpha1.PrepareEndpoint{Port: int32(recv.port), Path: "/prepare-removal"},
					HookPolicy: v1alpha1.HookPolicy{Retries: ptr.To[int32](0), Timeout: &metav1.Duration{Duration: 2 * time.Second}},
				},
				BeforeMember: &v1alpha1.MemberHook{URL: recv.url("/member/before/{{ .Member }}")},
				AfterMember:  &v1alpha1.MemberHook{URL: recv.url("/member/after/{{ .Member }}")},
			}
		})
		allPods := func() []string {
			var out []string
			for _, z := range g.zones {
				out = append(out, z+"-0", z+"-1")
			}
			return out
		}()

		By("a rollout: every pod once with reason rollout, the member hooks around each zone")
		g.setVersion(ctx, "v2")
		g.waitComplete(ctx, 2*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(g.mon)
		rolled := recv.removals(v1alpha1.RemovalRollout)
		for _, pod := range allPods {
			Expect(rolled).To(HaveKeyWithValue(pod, 1), "pod %s told once that a rollout removes it", pod)
		}
		Eventually(recv.memberCalls).WithContext(ctx).WithTimeout(30 * time.Second).Should(Equal([]string{
			"beforeMember ingester-zone-a", "afterMember ingester-zone-a",
			"beforeMember ingester-zone-b", "afterMember ingester-zone-b",
			"beforeMember ingester-zone-c", "afterMember ingester-zone-c",
		}))

		By("a rotation: reason rotation, no member hook (no new revision)")
		restartAt := time.Now().Add(2 * time.Second).Truncate(time.Second).UTC()
		g.patchSpec(ctx, fmt.Sprintf(`{"restartAt":%q}`, restartAt.Format(time.RFC3339)))
		g.waitRestarted(ctx, restartAt, 2*time.Minute)
		rotated := recv.removals(v1alpha1.RemovalRotation)
		for _, pod := range allPods {
			Expect(rotated).To(HaveKeyWithValue(pod, 1), "pod %s told once that a rotation removes it", pod)
		}
		Expect(recv.memberCalls()).To(HaveLen(6))

		By("an eviction: reason eviction, and the pod goes")
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		pod := "ingester-zone-b-1"
		Eventually(func() error { return evict(ctx, g.ns, pod, false) }).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		Expect(recv.removals(v1alpha1.RemovalEviction)).To(Equal(map[string]int{pod: 1}))

		By("an eviction whose hook fails (Fail): refused with 429, the pod stays, the group names it in an Event")
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		Eventually(func() bool { return g.mon.Available("ingester-zone-b") }).WithContext(ctx).WithTimeout(time.Minute).Should(BeTrue())
		victim := "ingester-zone-c-0"
		recv.setFailing(victim, true)
		var err error
		Eventually(func() string {
			err = evict(ctx, g.ns, victim, false)
			if err == nil {
				return ""
			}
			return err.Error()
		}).WithContext(ctx).WithTimeout(time.Minute).Should(ContainSubstring("beforePodRemoval of pod " + victim + " failed (failurePolicy Fail)"))
		Expect(apierrors.IsTooManyRequests(err)).To(BeTrue(), "a refusal a drain retries: %v", err)
		Expect(livePodUIDs(ctx, g.ns)).To(HaveLen(6), "the pod stays")
		Eventually(func() []string { return g.eventNotes(ctx, v1alpha1.ReasonHookFailed) }).WithContext(ctx).WithTimeout(30 * time.Second).
			Should(ContainElement(ContainSubstring(victim)))
		recv.setFailing(victim, false)
		Eventually(func() error { return evict(ctx, g.ns, victim, false) }).WithContext(ctx).WithTimeout(time.Minute).Should(Succeed())
		Expect(slices.Sorted(maps.Keys(recv.removals(v1alpha1.RemovalEviction)))).To(Equal([]string{pod, victim}))
		Expect(recv.removals("mismatch")).To(BeEmpty(), "every call's query and body agree on the reason")
	})

	It("tells each pod of RollingUpdate members, once, that a rollout replaces it, before the partition releases it; holds the partition while a pod refuses", func(ctx SpecContext) {
		recv := startHookReceiver()
		g := newZones(ctx, 3)
		g.createStatefulSets(ctx, rollingUpdate)
		g.waitPodsOn(ctx, "v1")
		g.createGroup(ctx, func(s *v1alpha1.RolloutGroupSpec) {
			s.MaxUnavailable = ptrIntOrString(intstr.FromInt32(2))
			s.Hooks = &v1alpha1.RolloutGroupHooks{BeforePodRemoval: &v1alpha1.PodRemovalHook{
				Endpoint:   v1alpha1.PrepareEndpoint{Port: int32(recv.port), Path: "/prepare-removal"},
				HookPolicy: v1alpha1.HookPolicy{Retries: ptr.To[int32](0), Timeout: &metav1.Duration{Duration: 2 * time.Second}},
			}}
		})
		startOperator(ctx, "echelon", g.ns, append([]string{"--pod-address=ip"}, fastLeaderElection...)...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		for _, z := range g.zones {
			Eventually(func() *int32 { return partitionOf(ctx, g.ns, z) }).Should(HaveValue(BeEquivalentTo(3)), "%s held at its replicas", z)
		}
		mon := g.monitor(ctx)
		var allPods []string
		for _, z := range g.zones {
			allPods = append(allPods, z+"-0", z+"-1", z+"-2")
		}

		By("a rollout: every replaced pod told once, with reason rollout, while it was still below the partition")
		g.setVersion(ctx, "v2")
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.MemberOrder()).To(Equal(g.zones))
		Expect(mon.DeletionsWhere(versionAnnotation, "v1")).To(HaveLen(9), "every pod replaced once, by the StatefulSet controller")
		rolled := recv.removals(v1alpha1.RemovalRollout)
		Expect(rolled).To(HaveLen(len(allPods)))
		for _, pod := range allPods {
			Expect(rolled).To(HaveKeyWithValue(pod, 1), "pod %s told once that a rollout replaces it", pod)
		}
		Expect(recv.latePods()).To(BeEmpty(), "no pod called after its partition released it")

		By("Fail: zone-a's highest pod refuses; its partition stays, no pod is replaced, HookFailed names it")
		held := "ingester-zone-a-2"
		g.refuseRollout(ctx, recv, held, "v3", 3)
		Expect(partitionOf(ctx, g.ns, "ingester-zone-a")).To(HaveValue(BeEquivalentTo(3)), "the partition is not lowered past a refusing pod")
		Expect(mon.DeletionsWhere(versionAnnotation, "v2")).To(BeEmpty(), "no pod replaced while the highest one refuses")
		Eventually(func() []string { return g.eventNotes(ctx, v1alpha1.ReasonHookFailed) }).WithContext(ctx).WithTimeout(30 * time.Second).
			Should(ContainElement(ContainSubstring("pod " + held + " not released")))

		By("Ignore: the partition goes down all the same and the rollout completes")
		g.patchSpec(ctx, `{"hooks":{"beforePodRemoval":{"failurePolicy":"Ignore"}}}`)
		g.waitComplete(ctx, 3*time.Minute)
		g.waitPodsOn(ctx, "v3")
		expectNoBreaches(mon)
		Expect(mon.DeletionsWhere(versionAnnotation, "v2")).To(HaveLen(9))
		Expect(recv.latePods()).To(BeEmpty())
		Expect(recv.removals("mismatch")).To(BeEmpty())
		Expect(g.eventNotes(ctx, v1alpha1.ReasonHookFailed)).To(ContainElement(ContainSubstring(held + " failed, ignored (failurePolicy Ignore)")))
	})

	It("holds a pod whose hook fails under Fail with the HookFailed condition, rolls on under Ignore, and tells the pods a ScalingPolicy downscale removes", func(ctx SpecContext) {
		recv := startHookReceiver()
		g := newZoneGroup(ctx, 3, func(s *v1alpha1.RolloutGroupSpec) {
			s.Hooks = &v1alpha1.RolloutGroupHooks{BeforePodRemoval: &v1alpha1.PodRemovalHook{
				Endpoint:   v1alpha1.PrepareEndpoint{Port: int32(recv.port), Path: "/prepare-removal"},
				HookPolicy: v1alpha1.HookPolicy{Retries: ptr.To[int32](0), Timeout: &metav1.Duration{Duration: 2 * time.Second}},
			}}
		})
		startOperator(ctx, "echelon", g.ns, append([]string{"--pod-address=ip"}, fastLeaderElection...)...)
		g.waitPhase(ctx, v1alpha1.PhaseComplete, time.Minute)
		mon := g.monitor(ctx)

		By("Fail: the refusing pod stays and the condition names it; no other zone starts")
		held := "ingester-zone-a-1"
		g.refuseRollout(ctx, recv, held, "v2", 2)
		Expect(mon.MemberOrder()).To(Equal([]string{"ingester-zone-a"}), "the next zone waits for the held pod's zone")

		By("Ignore: the rollout goes on and completes")
		g.patchSpec(ctx, `{"hooks":{"beforePodRemoval":{"failurePolicy":"Ignore"}}}`)
		g.waitComplete(ctx, 2*time.Minute)
		g.waitPodsOn(ctx, "v2")
		expectNoBreaches(mon)
		Expect(mon.MemberOrder()).To(Equal(g.zones))
		c := meta.FindStatusCondition(g.get(ctx).Status.Conditions, v1alpha1.ConditionHookFailed)
		Expect(c).NotTo(BeNil())
		Expect(c.Status).To(Equal(metav1.ConditionFalse))
		Expect(g.eventNotes(ctx, v1alpha1.ReasonHookFailed)).To(ContainElement(ContainSubstring("failed, ignored (failurePolicy Ignore)")))
		mon.Stop()

		By("a ScalingPolicy downscale: reason downscale for the pods it removes")
		sp := builders.MakeScalingPolicy(g.ns, "ingester-zone-c").Target("", "ingester-zone-c").Obj()
		sp.Spec.Replicas = ptr.To[int32](1)
		sp.Spec.Hooks = &v1alpha1.ScalingPolicyHooks{BeforePodRemoval: &v1alpha1.PodRemovalHook{
			Endpoint: v1alpha1.PrepareEndpoint{Port: int32(recv.port), Path: "/prepare-removal"},
			Reasons:  []v1alpha1.RemovalReason{v1alpha1.RemovalDownscale},
		}}
		Expect(k8s.Create(ctx, sp)).To(Succeed())
		Eventually(func() int32 {
			sts := &appsv1.StatefulSet{}
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: g.ns, Name: "ingester-zone-c"}, sts)).To(Succeed())
			return *sts.Spec.Replicas
		}).WithContext(ctx).WithTimeout(time.Minute).Should(Equal(int32(1)))
		Expect(recv.removals(v1alpha1.RemovalDownscale)).To(Equal(map[string]int{"ingester-zone-c-1": 1, "ingester-zone-c-2": 1}))
		Expect(recv.removals("mismatch")).To(BeEmpty())
	})
})
