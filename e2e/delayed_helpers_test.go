package e2e

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/test/builders"
)

// preparePath is the endpoint the test pods serve, as Mimir ingesters do.
const preparePath = "/ingester/prepare-partition-downscale"

// podAnswer is how a test pod answers a POST.
type podAnswer int

const (
	// answerWell prepares the pod and answers {"timestamp": <since when>}.
	answerWell podAnswer = iota
	// answer500 answers 500 Internal Server Error.
	answer500
	// answerGarbage answers 200 with a body that is not the protocol's JSON.
	answerGarbage
	// answerNothing never answers: the request hangs until the caller gives up.
	answerNothing
)

// podCall is one request the test pods received.
type podCall struct {
	At     time.Time
	Method string
	// Pod is the pod's name, or "unknown <ip>" for an address no pod had when
	// the spec learnt them.
	Pod string
	// Fresh marks a POST that prepared a pod not prepared before (or since its
	// last DELETE): the start of a new wait for the delay.
	Fresh bool
}

// preparation is one preparation of a pod, which lasts until a DELETE: when
// its first POST came, and since when the pod said it had been prepared.
type preparation struct {
	Pod            string
	From, Answered time.Time
}

// preparePods is an HTTP server that answers the delayed-downscale protocol as
// every kwok pod of a spec. kwok gives each pod its own loopback address and
// the server listens on all of them, so the host a request is sent to says
// which pod it is for.
type preparePods struct {
	port int

	mu       sync.Mutex
	names    map[string]string        // pod IP -> pod name
	answers  map[string]podAnswer     // by pod name; answerWell when absent
	backdate map[string]time.Duration // a fresh POST answers this long before now
	prepared map[string]*preparation  // current preparation, by pod name
	history  []*preparation
	calls    []podCall
}

// startPreparePods starts the server on a free port of every address and
// closes it when the spec ends (which also ends requests left hanging).
func startPreparePods() *preparePods {
	GinkgoHelper()
	l, err := net.Listen("tcp", "0.0.0.0:0")
	Expect(err).NotTo(HaveOccurred())
	p := &preparePods{
		port:  l.Addr().(*net.TCPAddr).Port,
		names: map[string]string{}, answers: map[string]podAnswer{},
		backdate: map[string]time.Duration{}, prepared: map[string]*preparation{},
	}
	srv := &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	DeferCleanup(srv.Close)
	return p
}

// learnPods maps the IP of every pod of ns to its name; each pod must have one.
func (p *preparePods) learnPods(ctx context.Context, ns string) {
	GinkgoHelper()
	var pods corev1.PodList
	Expect(k8s.List(ctx, &pods, client.InNamespace(ns))).To(Succeed())
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pod := range pods.Items {
		Expect(pod.Status.PodIP).NotTo(BeEmpty(), "pod %s has an IP", pod.Name)
		p.names[pod.Status.PodIP] = pod.Name
	}
}

// answer sets how pod answers POSTs from now on.
func (p *preparePods) answer(pod string, a podAnswer) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers[pod] = a
}

// preparedBefore makes pod's next fresh preparation answer a time d before
// the POST, as a pod prepared by an earlier downscale would.
func (p *preparePods) preparedBefore(pod string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backdate[pod] = d
}

func (p *preparePods) serve(w http.ResponseWriter, r *http.Request) {
	now := time.Now()
	host, _, _ := net.SplitHostPort(r.Host)
	if r.URL.Path != preparePath {
		http.NotFound(w, r)
		return
	}
	p.mu.Lock()
	pod, known := p.names[host]
	if !known {
		pod = "unknown " + host
	}
	call := podCall{At: now, Method: r.Method, Pod: pod}
	var status int
	var body string
	switch {
	case r.Method == http.MethodDelete:
		status, body = http.StatusOK, "{}"
		if _, ok := p.prepared[pod]; ok {
			delete(p.prepared, pod)
		} else {
			// A 409 is an answer the protocol's callers take as success.
			status, body = http.StatusConflict, "not prepared"
		}
	case r.Method != http.MethodPost:
		status, body = http.StatusMethodNotAllowed, ""
	case p.answers[pod] == answer500:
		status, body = http.StatusInternalServerError, "prepare failed: the partition is busy"
	case p.answers[pod] == answerGarbage:
		status, body = http.StatusOK, "<html>prepared, probably</html>"
	case p.answers[pod] == answerNothing:
		p.calls = append(p.calls, call)
		p.mu.Unlock()
		<-r.Context().Done()
		return
	default:
		prep, ok := p.prepared[pod]
		if !ok {
			// Unix seconds, as the protocol answers: what the operator sees.
			answered := time.Unix(now.Add(-p.backdate[pod]).Unix(), 0)
			prep = &preparation{Pod: pod, From: now, Answered: answered}
			p.prepared[pod] = prep
			p.history = append(p.history, prep)
			call.Fresh = true
		}
		status, body = http.StatusOK, fmt.Sprintf(`{"timestamp": %d}`, prep.Answered.Unix())
	}
	p.calls = append(p.calls, call)
	p.mu.Unlock()
	w.WriteHeader(status)
	_, _ = w.Write([]byte(body))
}

// callsTo lists the calls of method to pod ("" for every pod), oldest first.
func (p *preparePods) callsTo(pod, method string) []podCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []podCall
	for _, c := range p.calls {
		if (pod == "" || c.Pod == pod) && c.Method == method {
			out = append(out, c)
		}
	}
	return out
}

// allCalls lists every call received, oldest first.
func (p *preparePods) allCalls() []podCall {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]podCall(nil), p.calls...)
}

// preparedSince is since when pod says it is prepared now; false when it is not.
func (p *preparePods) preparedSince(pod string) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	prep, ok := p.prepared[pod]
	if !ok {
		return time.Time{}, false
	}
	return prep.Answered, true
}

// eligibleAt is when the StatefulSet could first shrink past pod, as of
// moment at: the latest preparation of the pod begun by then, plus delay.
// False when the pod had not been prepared by then. A DELETE that came later
// does not count against the moment: the operator may cancel a pod right after
// it shrinks past it, before the spec's watch receives the change.
func (p *preparePods) eligibleAt(pod string, at time.Time, delay time.Duration) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var latest *preparation
	for _, prep := range p.history {
		if prep.Pod == pod && !prep.From.After(at) {
			latest = prep
		}
	}
	if latest == nil {
		return time.Time{}, false
	}
	return latest.Answered.Add(delay), true
}

// expectShrunkOnlyPastEligible fails when a change of the StatefulSet's
// spec.replicas, at the moment the spec's watch received it, removed a pod
// that was not prepared or not prepared for delay by then. The watch receives
// a change after it is made, so a shrink it finds early was early.
func (p *preparePods) expectShrunkOnlyPastEligible(changes []replicasChange, sts string, delay time.Duration) {
	GinkgoHelper()
	for _, c := range changes {
		for ord := c.To; ord < c.From; ord++ {
			pod := fmt.Sprintf("%s-%d", sts, ord)
			eligible, prepared := p.eligibleAt(pod, c.At, delay)
			Expect(prepared).To(BeTrue(), "%s shrunk from %d to %d at %s past %s, which was not prepared then",
				sts, c.From, c.To, c.At.Format(time.StampMilli), pod)
			Expect(c.At).NotTo(BeTemporally("<", eligible), "%s shrunk from %d to %d at %s past %s, which was eligible only at %s",
				sts, c.From, c.To, c.At.Format(time.StampMilli), pod, eligible.Format(time.StampMilli))
		}
	}
}

// delayedSetup is one spec's namespace with a StatefulSet of Ready kwok pods,
// the test pods' server answering as them, a watch recording every change of
// the StatefulSet's replicas, a ScalingPolicy (self mode) at its replicas and
// a DelayedDownscale. No operator runs yet.
type delayedSetup struct {
	*zoneGroup
	sts  string
	pods *preparePods
	rec  *replicasRecorder
}

// newDelayedSetup creates it all, the DelayedDownscale with delay and with
// spec.timeout when timeout is not zero.
func newDelayedSetup(ctx context.Context, replicas int32, delay string, timeout time.Duration) *delayedSetup {
	GinkgoHelper()
	g := newZones(ctx, replicas)
	g.zones = g.zones[:1]
	s := &delayedSetup{zoneGroup: g, sts: g.zones[0], pods: startPreparePods()}
	g.createStatefulSets(ctx, nil)
	g.waitPodsOn(ctx, "v1")
	s.pods.learnPods(ctx, g.ns)
	s.rec = recordReplicas(ctx, g.ns)
	dd := builders.MakeDelayedDownscale(g.ns, s.sts).Delay(delay).PrepareEndpoint(preparePath, int32(s.pods.port))
	if timeout > 0 {
		dd.Timeout(timeout)
	}
	Expect(k8s.Create(ctx, dd.Obj())).To(Succeed())
	createPolicy(ctx, g.ns, s.sts, selfScaled(replicas))
	return s
}

// operatorFlags are the flags every operator of these specs runs with: pods
// called on their IP, leader election fast enough for take-overs in seconds.
var delayedOperatorFlags = append([]string{"--pod-address=ip"}, fastLeaderElection...)

// startDelayedOperator starts an operator for the spec's namespace.
func (s *delayedSetup) startOperator(ctx context.Context, name string) *framework.Operator {
	GinkgoHelper()
	return startOperator(ctx, name, s.ns, delayedOperatorFlags...)
}

// pod is the name of the pod of ordinal.
func (s *delayedSetup) pod(ordinal int) string { return fmt.Sprintf("%s-%d", s.sts, ordinal) }

// scaleTo sets the ScalingPolicy's spec.replicas.
func (s *delayedSetup) scaleTo(ctx context.Context, replicas int32) {
	GinkgoHelper()
	patchPolicy(ctx, s.ns, s.sts, fmt.Sprintf(`{"spec":{"replicas":%d}}`, replicas))
}

// waitDelayed polls the DelayedDownscale until check passes for its current
// generation.
func (s *delayedSetup) waitDelayed(ctx context.Context, timeout time.Duration, check func(Gomega, *v1alpha1.DelayedDownscale)) {
	GinkgoHelper()
	Eventually(func(gm Gomega) {
		dd := &v1alpha1.DelayedDownscale{}
		gm.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: s.ns, Name: s.sts}, dd)).To(Succeed())
		gm.Expect(dd.Status.ObservedGeneration).To(Equal(dd.Generation))
		check(gm, dd)
	}).WithContext(ctx).WithTimeout(timeout).Should(Succeed())
}

// idleAt is a check that the DelayedDownscale is Idle at replicas: no
// downscale pending, every cancel made.
func idleAt(replicas int32) func(Gomega, *v1alpha1.DelayedDownscale) {
	return func(gm Gomega, dd *v1alpha1.DelayedDownscale) {
		gm.Expect(dd.Status.Phase).To(Equal(v1alpha1.DelayedPhaseIdle), "message: %s", dd.Status.Message)
		gm.Expect(dd.Status.Replicas).To(Equal(replicas))
		gm.Expect(dd.Status.PreparedPods).To(BeEmpty())
	}
}

// finish waits until the StatefulSet has replicas Ready pods and its policy is
// Stable at them.
func (s *delayedSetup) finish(ctx context.Context, replicas int32) {
	GinkgoHelper()
	waitReplicas(ctx, s.ns, s.sts, replicas, time.Minute)
	s.scaled[s.sts] = replicas
	s.waitPodsOn(ctx, "v1")
	waitStable(ctx, s.ns, s.sts)
}

// minReplicas is the lowest spec.replicas the watch saw, starting from start.
func (s *delayedSetup) minReplicas(start int32) int32 {
	low := start
	for _, c := range s.rec.of(s.sts) {
		low = min(low, c.To)
	}
	return low
}

// delayedEvents lists the Events recorded on the DelayedDownscale, as
// "<type> <reason>: <message>".
func (s *delayedSetup) delayedEvents(ctx context.Context) []string {
	GinkgoHelper()
	var out []string
	for _, e := range settledEvents(ctx, s.ns, func(e corev1.Event) bool {
		return e.InvolvedObject.Kind == "DelayedDownscale" && e.InvolvedObject.Name == s.sts
	}) {
		out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Message))
	}
	return out
}

// podCallsMetric sums the operator's echelon_delayeddownscale_pod_calls_total
// series of namespace; false when it exports none.
func podCallsMetric(op *framework.Operator, namespace string) (float64, bool) {
	GinkgoHelper()
	code, body, err := op.Get("/metrics")
	Expect(err).NotTo(HaveOccurred())
	Expect(code).To(Equal(http.StatusOK))
	sum, found := 0.0, false
	sc := bufio.NewScanner(strings.NewReader(body))
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "echelon_delayeddownscale_pod_calls_total{") ||
			!strings.Contains(line, fmt.Sprintf(`namespace=%q`, namespace)) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndex(line, " ")+1:], 64)
		Expect(err).NotTo(HaveOccurred(), "metric line %q", line)
		sum, found = sum+v, true
	}
	return sum, found
}

// replicasSteps lists the values a StatefulSet's spec.replicas took, in order.
func replicasSteps(changes []replicasChange) []int32 {
	var out []int32
	for _, c := range changes {
		out = append(out, c.To)
	}
	return out
}

// freshPrepares counts the POSTs that started a new preparation of pod.
func (p *preparePods) freshPrepares(pod string) int {
	n := 0
	for _, c := range p.callsTo(pod, http.MethodPost) {
		if c.Fresh {
			n++
		}
	}
	return n
}

// expectPreparedOnce fails when a pod of ordinals was prepared more than once:
// pods the downscale removes keep their one preparation until they are gone.
func (s *delayedSetup) expectPreparedOnce(ordinals ...int) {
	GinkgoHelper()
	for _, ord := range ordinals {
		pod := s.pod(ord)
		Expect(s.pods.freshPrepares(pod)).To(Equal(1), "%s is prepared once", pod)
	}
}
