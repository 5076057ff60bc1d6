package webhooks

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/egress"
	"github.com/echelon-operator/echelon/internal/httptls/httptlstest"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podcall"
	"github.com/echelon-operator/echelon/internal/scaling"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/webhooks/webhookstest"
)

var testNow = time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)

// prepareCase is one request to the prepare-downscale webhook against pods
// a-0 .. a-5 served on loopback IPs.
type prepareCase struct {
	name string
	// setup shapes the cluster and the pods' answers.
	setup func(c *fakeCluster, pods *webhookstest.PodServer)
	req   func() *reqBuilder
	query string // "timeout=10s" unless set

	allowed bool
	reason  string
	code    int32
	message []string // substrings
	warning string
	event   string
	// calls are the pod calls made before the answer, sorted.
	calls []string
	// later are calls made after the answer (cancels to pods whose answer
	// never came).
	later    []string
	recorded bool
	// budget is the answer of the RolloutGroup's disruption budget (allowed
	// when nil), and asked what the webhook must have asked it ("" nothing).
	budget *disruption.Verdict
	// then, when set, is the budget's answer from its second question on.
	then  *disruption.Verdict
	asked string
}

func TestPrepareDownscale(t *testing.T) {
	const path = "/ingester/prepare-shutdown"
	withPolicy := func(c *fakeCluster, pods *webhookstest.PodServer, edit func(*builders.ScalingPolicyWrapper)) {
		b := builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare(path, pods.Port, 2*time.Second)
		if edit != nil {
			edit(b)
		}
		c.policies = append(c.policies, *b.Obj())
	}
	for _, tc := range []prepareCase{
		{name: "5 to 3 prepares pods 3 and 4, records the downscale, admits",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) { withPolicy(c, p, nil) },
			req:   func() *reqBuilder { return stsUpdate("a", 5, 3) }, allowed: true, reason: reasonPrepared,
			calls: []string{"POST a-3", "POST a-4"}, recorded: true},
		{name: "kubectl scale 5 to 3: pods from the cached StatefulSet",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) { withPolicy(c, p, nil) },
			req:   func() *reqBuilder { return scaleUpdate("statefulsets", "a", 5, 3) }, allowed: true, reason: reasonPrepared,
			calls: []string{"POST a-3", "POST a-4"}, recorded: true},
		{name: "spec.ordinals.start shifts the pods removed",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				c.sets = []appsv1.StatefulSet{*builders.MakeStatefulSet(testNS, "a").Replicas(3).TypeMeta().OrdinalsStart(2).Obj()}
			},
			req: func() *reqBuilder { return scaleUpdate("statefulsets", "a", 3, 1) }, allowed: true, reason: reasonPrepared,
			calls: []string{"POST a-3", "POST a-4"}, recorded: true},
		{name: "growth calls nobody",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) { withPolicy(c, p, nil) },
			req:   func() *reqBuilder { return stsUpdate("a", 3, 5) }, allowed: true, reason: reasonNotDecrease},
		{name: "no policy", req: func() *reqBuilder { return stsUpdate("a", 5, 3) }, allowed: true, reason: reasonNoPrepare},
		{name: "a policy without prepare",
			setup: func(c *fakeCluster, _ *webhookstest.PodServer) {
				c.policies = []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").ZoneDelay(time.Hour).Obj()}
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 3) }, allowed: true, reason: reasonNoPrepare},
		{name: "Deployments are not prepared",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) { withPolicy(c, p, nil) },
			req:   func() *reqBuilder { return scaleUpdate("deployments", "a", 5, 3) }, allowed: true, reason: reasonUnhandled,
			warning: "does not handle UPDATE of deployments.apps/scale"},
		{name: "dry run calls nobody and records nothing",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) { withPolicy(c, p, nil) },
			req:   func() *reqBuilder { return stsUpdate("a", 5, 3).dryRun() }, allowed: true, reason: reasonDryRun,
			warning: "dry run: the prepare endpoint of pods a-3, a-4 was not called"},
		{name: "downscale forbidden by the policy: refused before any call",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, func(b *builders.ScalingPolicyWrapper) { b.DownscaleAllowed(false) })
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 3) }, reason: reasonDownscaleNotAllowed, code: http.StatusForbidden,
			message: []string{"ScalingPolicy a-scaling sets spec.downscale.allowed: false"}, event: EventReasonDownscaleDenied},
		{name: "the controller's own downscale under allowed: false is prepared",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, func(b *builders.ScalingPolicyWrapper) { b.DownscaleAllowed(false).Leader("z") })
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 4).operatorOwn() }, allowed: true, reason: reasonPrepared,
			calls: []string{"POST a-4"}, recorded: true},
		{name: "a member of a group: the group's disruption budget is asked before the pods are called, recording nothing, then again, recorded, once they prepared",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				c.group = &scaling.Group{Name: "ingester", Others: []scaling.Member{{Name: "b"}, {Name: "c"}}}
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 3) }, allowed: true, reason: reasonPrepared,
			calls: []string{"POST a-3", "POST a-4"}, recorded: true,
			asked: `ingester Downscale a -2 by "downscale of StatefulSet a by alice" dry-run
ingester Downscale a -2 by "downscale of StatefulSet a by alice"`},
		{name: "another zone disrupted: refused before any call, naming it, recording nothing",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				c.group = &scaling.Group{Name: "ingester", Others: []scaling.Member{{Name: "b"}, {Name: "c"}}}
			},
			budget: &disruption.Verdict{Code: disruption.CodeOtherZoneDisrupted, Message: "zone b (1 terminating) is disrupted"},
			req:    func() *reqBuilder { return stsUpdate("a", 5, 3) }, reason: reasonDisruption, code: http.StatusForbidden,
			message: []string{"downscale of StatefulSet a from 5 to 3 denied: the disruption budget of RolloutGroup ingester lets one zone at a time lose pods: zone b (1 terminating) is disrupted"},
			event:   EventReasonDownscaleTooEarly,
			asked:   `ingester Downscale a -2 by "downscale of StatefulSet a by alice" dry-run`},
		{name: "another zone's recorded downscale not seen going: refused before any call, saying when to retry",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				c.group = &scaling.Group{Name: "ingester", Others: []scaling.Member{{Name: "b"}}}
			},
			budget: &disruption.Verdict{Code: disruption.CodeHeldByOtherZone, RetryAfter: 12 * time.Second,
				Message: "zone b (1 pod that a downscale (downscale of StatefulSet b by bob) was allowed to take at 2026-11-22T11:59:27Z, not seen going yet) holds the disruption budget"},
			req: func() *reqBuilder { return scaleUpdate("statefulsets", "a", 5, 4) }, reason: reasonDisruption, code: http.StatusForbidden,
			message: []string{"zone b (1 pod that a downscale (downscale of StatefulSet b by bob) was allowed to take at 2026-11-22T11:59:27Z, not seen going yet) holds the disruption budget", "; retry in 12s"},
			event:   EventReasonDownscaleTooEarly,
			asked:   `ingester Downscale a -1 by "downscale of StatefulSet a by alice" dry-run`},
		{name: "allowed before the calls, refused once the pods prepared (another zone's decision recorded meanwhile): the pods are told to cancel, nothing recorded",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				c.group = &scaling.Group{Name: "ingester", Others: []scaling.Member{{Name: "b"}}}
			},
			then: &disruption.Verdict{Code: disruption.CodeOtherZoneDisrupted, Message: "zone b (1 terminating) is disrupted"},
			req:  func() *reqBuilder { return stsUpdate("a", 5, 3) }, reason: reasonDisruption, code: http.StatusForbidden,
			message: []string{"downscale of StatefulSet a from 5 to 3 denied: the disruption budget of RolloutGroup ingester lets one zone at a time lose pods: zone b (1 terminating) is disrupted",
				"told the prepared pods a-3, a-4 to cancel"},
			event: EventReasonDownscaleTooEarly,
			calls: []string{"DELETE a-3", "DELETE a-4", "POST a-3", "POST a-4"},
			asked: `ingester Downscale a -2 by "downscale of StatefulSet a by alice" dry-run
ingester Downscale a -2 by "downscale of StatefulSet a by alice"`},
		{name: "zone delay not passed: the budget is not asked",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, func(b *builders.ScalingPolicyWrapper) { b.ZoneDelay(time.Hour) })
				c.group = &scaling.Group{Name: "ingester", Others: []scaling.Member{{Name: "b", LastDownscale: testNow.Add(-10 * time.Minute)}}}
			},
			req: func() *reqBuilder { return scaleUpdate("statefulsets", "a", 5, 3) }, reason: reasonZoneDelay, code: http.StatusForbidden,
			message: []string{"lets it happen at 2026-11-22T12:50:01Z, 1h0m0s after StatefulSet b was downscaled (minTimeBetweenZoneDownscales)"},
			event:   EventReasonDownscaleTooEarly},
		{name: "zone delay passed",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, func(b *builders.ScalingPolicyWrapper) { b.ZoneDelay(time.Hour) })
				c.group = &scaling.Group{Name: "ingester", Others: []scaling.Member{{Name: "b", LastDownscale: testNow.Add(-time.Hour - time.Second)}}}
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 4) }, allowed: true, reason: reasonPrepared, calls: []string{"POST a-4"}, recorded: true,
			asked: `ingester Downscale a -1 by "downscale of StatefulSet a by alice" dry-run
ingester Downscale a -1 by "downscale of StatefulSet a by alice"`},
		{name: "the controller's own downscale skips the gate: it has recorded its intent already",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, func(b *builders.ScalingPolicyWrapper) { b.ZoneDelay(time.Hour).Leader("z") })
				c.group = &scaling.Group{Name: "ingester", Others: []scaling.Member{{Name: "b", LastDownscale: testNow}}}
			},
			budget: &disruption.Verdict{Code: disruption.CodeHeldByOtherZone, Message: "zone a holds the disruption budget"},
			req:    func() *reqBuilder { return stsUpdate("a", 5, 4).operatorOwn() }, allowed: true, reason: reasonPrepared, calls: []string{"POST a-4"}, recorded: true},
		{name: "dry run still applies the gate, asking the budget without a record",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				c.group = &scaling.Group{Name: "ingester", Others: []scaling.Member{{Name: "b"}}}
			},
			budget: &disruption.Verdict{Code: disruption.CodeRolloutInProgress, Message: "a rollout of the group is under way (at b)"},
			req:    func() *reqBuilder { return stsUpdate("a", 5, 3).dryRun() }, reason: reasonDisruption, code: http.StatusForbidden,
			message: []string{"a rollout of the group is under way (at b)"},
			asked:   `ingester Downscale a -2 by "downscale of StatefulSet a by alice" dry-run`},
		{name: "an allowed dry run is not recorded",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				c.group = &scaling.Group{Name: "ingester", Others: []scaling.Member{{Name: "b"}}}
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 4).dryRun() }, allowed: true, reason: reasonDryRun,
			warning: "dry run: the prepare endpoint of pods a-4 was not called",
			asked:   `ingester Downscale a -1 by "downscale of StatefulSet a by alice" dry-run`},
		{name: "one pod answers 500: the prepared pods are cancelled, the failing one named",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				p.Answer("POST", "a-3", webhookstest.Status(500, "ingester is not ACTIVE"))
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 2) }, reason: reasonPrepareFailed, code: http.StatusForbidden,
			message: []string{`pod a-3 did not prepare: POST answered 500: "ingester is not ACTIVE"`, "told the prepared pods a-2, a-4 to cancel"},
			event:   EventReasonPrepareFailed,
			calls:   []string{"DELETE a-2", "DELETE a-4", "POST a-2", "POST a-3", "POST a-4"}},
		{name: "a redirect is not a success",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				p.Answer("POST", "a-4", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/elsewhere", http.StatusFound) })
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 4) }, reason: reasonPrepareFailed, code: http.StatusForbidden,
			message: []string{"pod a-4 did not prepare: POST answered 302"}, event: EventReasonPrepareFailed,
			calls: []string{"POST a-4"}},
		{name: "garbage in a 2xx answer is a success",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				p.Answer("POST", "a-4", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("\x00\xffnot json")) })
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 4) }, allowed: true, reason: reasonPrepared, calls: []string{"POST a-4"}, recorded: true},
		{name: "a pod that hangs is named after the timeout; it is told to cancel after the answer",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, func(b *builders.ScalingPolicyWrapper) { b.Prepare(path, p.Port, 300*time.Millisecond) })
				p.Answer("POST", "a-4", webhookstest.Hang)
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 3) }, reason: reasonPrepareFailed, code: http.StatusForbidden,
			message: []string{"pod a-4 did not prepare: POST http://127.0.0.14:", "no answer within the timeout", "told the prepared pods a-3 to cancel", "telling pods a-4, whose answer never came, to cancel"},
			event:   EventReasonPrepareFailed,
			calls:   []string{"DELETE a-3", "POST a-3", "POST a-4"}, later: []string{"DELETE a-4"}},
		{name: "a pod that does not answer at all",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				c.pods = append(c.pods, *builders.MakePod(testNS, "a", 6).IP("127.0.0.99").Obj()) // nothing listens there
			},
			req: func() *reqBuilder { return stsUpdate("a", 7, 5) }, reason: reasonPrepareFailed, code: http.StatusForbidden,
			message: []string{"pod a-6 did not prepare: POST http://127.0.0.99:", "connection refused", "told the prepared pods a-5 to cancel"},
			event:   EventReasonPrepareFailed,
			calls:   []string{"DELETE a-5", "POST a-5"}},
		{name: "missing and pending pods are not called",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				c.pods = append(c.pods, *builders.MakePod(testNS, "a", 6).Phase(corev1.PodPending).NotReady().Obj())
			},
			req: func() *reqBuilder { return stsUpdate("a", 8, 4) }, allowed: true, reason: reasonPrepared,
			warning: "not called, as not running: a-6 (Pending), a-7 (does not exist)",
			calls:   []string{"POST a-4", "POST a-5"}, recorded: true},
		{name: "a running pod without an IP cannot be called",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				c.pods = append(c.pods, *builders.MakePod(testNS, "a", 6).Obj())
			},
			req: func() *reqBuilder { return stsUpdate("a", 7, 5) }, reason: reasonPrepareFailed, code: http.StatusForbidden,
			message: []string{"pod a-6 cannot be called: the pod has no IP yet"}, event: EventReasonPrepareFailed},
		{name: "the record fails: every prepared pod is cancelled",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, nil)
				c.recordErr = errors.New("the API server said no")
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 3) }, reason: reasonRecordFailed, code: http.StatusInternalServerError,
			message: []string{"the API server said no", "told the prepared pods a-3, a-4 to cancel"}, event: EventReasonPrepareFailed,
			calls: []string{"DELETE a-3", "DELETE a-4", "POST a-3", "POST a-4"}},
		{name: "a per-call timeout past the webhook's deadline is shortened and said",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				withPolicy(c, p, func(b *builders.ScalingPolicyWrapper) { b.Prepare(path, p.Port, 30*time.Second) })
				p.Answer("POST", "a-4", webhookstest.Hang)
			},
			query:  "timeout=1s",
			req:    func() *reqBuilder { return stsUpdate("a", 5, 4) },
			reason: reasonPrepareFailed, code: http.StatusForbidden, message: []string{"no answer within the timeout"}, event: EventReasonPrepareFailed,
			warning: "spec.downscale.prepare.timeout 30s is not shorter than the webhook's timeout",
			calls:   []string{"POST a-4"}, later: []string{"DELETE a-4"}},
		{name: "/scale of a StatefulSet not in the cache",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) { withPolicy(c, p, nil); c.sets = nil },
			req:   func() *reqBuilder { return scaleUpdate("statefulsets", "a", 5, 3) }, reason: reasonLookupFailed, code: http.StatusInternalServerError,
			message: []string{"StatefulSet a is not in the operator's cache yet"}},
		// Mutating webhooks run before the API server validates the object,
		// which then refuses a negative count: no pod may be prepared (nor the
		// downscale recorded) for an update that cannot be stored.
		{name: "negative replicas: refused before any call",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) { withPolicy(c, p, nil) },
			req:   func() *reqBuilder { return stsUpdate("a", 5, -1) }, reason: reasonMalformed, code: http.StatusBadRequest,
			message: []string{"spec.replicas -1 is negative"}},
		{name: "kubectl scale to negative replicas: refused before any call",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) { withPolicy(c, p, nil) },
			req:   func() *reqBuilder { return scaleUpdate("statefulsets", "a", 5, -3) }, reason: reasonMalformed, code: http.StatusBadRequest,
			message: []string{"spec.replicas -3 is negative"}},
		{name: "too many pods for one request",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) { withPolicy(c, p, nil) },
			req:   func() *reqBuilder { return stsUpdate("a", 5000, 3) }, reason: reasonPrepareFailed, code: http.StatusForbidden,
			message: []string{"removes 4997 pods", "downscale in steps"}},
	} {
		t.Run(tc.name, func(t *testing.T) { runPrepareCase(t, tc) })
	}
}

func runPrepareCase(t *testing.T, tc prepareCase) {
	pods := newPodServer(t, "a", 0, 1, 2, 3, 4, 5)
	cluster := &fakeCluster{
		sets: []appsv1.StatefulSet{*builders.MakeStatefulSet(testNS, "a").Replicas(5).TypeMeta().Obj()},
		pods: runningPods("a", pods),
	}
	if tc.setup != nil {
		tc.setup(cluster, pods)
	}
	events := &eventRecorder{}
	webhook := "test-prepare"
	decision := decisionOf(tc.allowed, tc.code)
	before := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues(webhook, decision, tc.reason))
	budget := allowingBudget()
	if tc.budget != nil {
		budget.answer = *tc.budget
	}
	budget.then = tc.then
	prep := &PrepareDownscale{Cluster: cluster, Budget: budget, Identity: Identity{Username: operatorUser}, Pods: NewPodClient(),
		Addressing: podcall.Addressing{PodAddressIP: true}, Now: func() time.Time { return testNow }}
	query := tc.query
	if query == "" {
		query = "timeout=10s"
	}
	a := serve(t, handler(webhook, prep, events), tc.req().review(), query)
	calls := pods.Calls()
	message := ""
	if len(tc.message) > 0 {
		message = tc.message[0]
	}
	checkAnswer(t, a, tc.allowed, tc.code, message, tc.warning)
	for _, m := range tc.message[min(1, len(tc.message)):] {
		if !strings.Contains(a.message(), m) {
			t.Errorf("message %q, want it to contain %q", a.message(), m)
		}
	}
	if got := testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues(webhook, decision, tc.reason)) - before; got != 1 {
		t.Errorf("%s/%s counted %v times, want 1", decision, tc.reason, got)
	}
	// Calls made in the background (later) may or may not have landed by the
	// time the answer is read; every call of tc.calls must have.
	if early := slices.DeleteFunc(slices.Clone(calls), func(c string) bool { return slices.Contains(tc.later, c) }); !slices.Equal(early, tc.calls) {
		t.Errorf("pod calls before the answer %q (background ones aside), want %q", calls, tc.calls)
	}
	prep.cancels.Wait()
	all := slices.Sorted(slices.Values(append(slices.Clone(tc.calls), tc.later...)))
	if got := pods.Calls(); !slices.Equal(got, all) {
		t.Errorf("pod calls in all %q, want %q", got, all)
	}
	if _, ok := cluster.recorded["a-scaling"]; ok != tc.recorded {
		t.Errorf("downscale recorded %v, want %v", ok, tc.recorded)
	} else if ok && !cluster.recorded["a-scaling"].Equal(testNow) {
		t.Errorf("downscale recorded at %v, want %v", cluster.recorded["a-scaling"], testNow)
	}
	if got := budget.questions(); got != tc.asked {
		t.Errorf("asked the disruption budget %q, want %q", got, tc.asked)
	}
	if tc.event == "" {
		checkEvent(t, events.list(), "", "", "")
	} else {
		checkEvent(t, events.list(), tc.event, "StatefulSet/a", a.message())
	}
}

// TestPrepareCancelledRequest: when the API server gives up (the request's
// context ends) while pods are being prepared, the pods that prepared are
// told to cancel all the same.
func TestPrepareCancelledRequest(t *testing.T) {
	pods := newPodServer(t, "a", 3, 4)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	a3Answered := make(chan struct{})
	pods.Answer("POST", "a-3", func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusNoContent)
		close(a3Answered)
	})
	pods.Answer("POST", "a-4", func(w http.ResponseWriter, r *http.Request) {
		<-a3Answered
		cancel() // the API server gives up while a-4 is preparing
		webhookstest.Hang(w, r)
	})
	cluster := &fakeCluster{
		policies: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare("/p", pods.Port, time.Minute).Obj()},
		pods:     runningPods("a", pods),
	}
	prep := &PrepareDownscale{Cluster: cluster, Pods: NewPodClient(), Addressing: podcall.Addressing{PodAddressIP: true}, Now: time.Now}
	req := stsUpdate("a", 5, 3)
	v := prep.decide(ctx, &req.r)
	prep.cancels.Wait()
	if v.allowed || v.reason != reasonPrepareFailed {
		t.Fatalf("verdict %+v, want a denial", v)
	}
	want := []string{"DELETE a-3", "DELETE a-4", "POST a-3", "POST a-4"}
	if got := pods.Calls(); !slices.Equal(got, want) {
		t.Errorf("pod calls %q, want %q", got, want)
	}
	if len(cluster.recorded) != 0 {
		t.Errorf("downscale recorded: %v", cluster.recorded)
	}
}

func TestCallTimeout(t *testing.T) {
	five := &metav1.Duration{Duration: 5 * time.Second}
	for _, tc := range []struct {
		name       string
		configured *metav1.Duration
		deadline   time.Duration // 0: none
		want       time.Duration // ±50ms when clamped
		warns      bool
	}{
		{"default, no deadline", nil, 0, defaultPrepareTimeout, false},
		{"5s within 10s", five, 10 * time.Second, 5 * time.Second, false},
		{"5s against 5s: halved", five, 5 * time.Second, 2500 * time.Millisecond, true},
		{"30s against 10s: halved", &metav1.Duration{Duration: 30 * time.Second}, 10 * time.Second, 5 * time.Second, true},
		{"zero means the default", &metav1.Duration{}, 0, defaultPrepareTimeout, false},
	} {
		ctx := context.Background()
		if tc.deadline > 0 {
			var cancel context.CancelFunc
			ctx, cancel = context.WithTimeout(ctx, tc.deadline)
			defer cancel()
		}
		got, warning := callTimeout(ctx, tc.configured)
		if (warning != "") != tc.warns || got > tc.want || got < tc.want-50*time.Millisecond {
			t.Errorf("%s: %v %q, want %v (warning: %v)", tc.name, got, warning, tc.want, tc.warns)
		}
		if tc.warns && !strings.Contains(warning, "spec.downscale.prepare.timeout") {
			t.Errorf("%s: warning %q does not name the field", tc.name, warning)
		}
	}
}

func TestPodHost(t *testing.T) {
	pod := builders.MakePod(testNS, "ingester-zone-a", 3).IP("10.1.2.3").Obj()
	fqdn := &PrepareDownscale{Addressing: podcall.Addressing{ClusterDomain: "cluster.local"}}
	if host, why := fqdn.Addressing.Host(pod, "ingester-zone-a"); host != "ingester-zone-a-3.ingester-zone-a.mimir.svc.cluster.local" || why != "" {
		t.Errorf("fqdn: %q %q", host, why)
	}
	if _, why := fqdn.Addressing.Host(pod, ""); !strings.Contains(why, "--pod-address=ip") {
		t.Errorf("fqdn without a service: %q", why)
	}
	ip := &PrepareDownscale{Addressing: podcall.Addressing{PodAddressIP: true}}
	if host, why := ip.Addressing.Host(pod, ""); host != "10.1.2.3" || why != "" {
		t.Errorf("ip: %q %q", host, why)
	}
}

// TestPodCallMetrics: each pod call is timed, and failures are counted by
// call: a 500 to a prepare is one, a 409 to a cancel is none.
func TestPodCallMetrics(t *testing.T) {
	pods := newPodServer(t, "a", 3, 4)
	pods.Answer(http.MethodPost, "a-4", webhookstest.Status(http.StatusInternalServerError, "no"))
	pods.Answer(http.MethodDelete, "a-3", webhookstest.Status(http.StatusConflict, "locked"))
	cluster := &fakeCluster{
		policies: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare("/p", pods.Port, time.Second).Obj()},
		pods:     runningPods("a", pods),
	}
	prep := &PrepareDownscale{Cluster: cluster, Pods: NewPodClient(), Addressing: podcall.Addressing{PodAddressIP: true}, Now: time.Now}
	count := func(call string) (calls uint64, failures float64) {
		return histogramCount(t, metrics.WebhookPodCallDuration.WithLabelValues(call)), testutil.ToFloat64(metrics.WebhookPodCallFailures.WithLabelValues(call))
	}
	prepares, prepareFailures := count(metrics.PodCallPrepare)
	cancels, cancelFailures := count(metrics.PodCallCancel)
	req := stsUpdate("a", 5, 3)
	if v := prep.decide(context.Background(), &req.r); v.allowed {
		t.Fatalf("allowed: %+v", v)
	}
	p, pf := count(metrics.PodCallPrepare)
	c, cf := count(metrics.PodCallCancel)
	if p-prepares != 2 || pf-prepareFailures != 1 || c-cancels != 1 || cf-cancelFailures != 0 {
		t.Errorf("prepare calls %d (failed %v), cancel calls %d (failed %v); want 2 (1), 1 (0)", p-prepares, pf-prepareFailures, c-cancels, cf-cancelFailures)
	}
}

func histogramCount(t *testing.T, o prometheus.Observer) uint64 {
	t.Helper()
	var m dto.Metric
	if err := o.(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram().GetSampleCount()
}

// TestPrepareOverHTTPS: with scheme https the pod's certificate, which names
// neither its IP nor a name the webhook uses, is not verified.
func TestPrepareOverHTTPS(t *testing.T) {
	var calls []string
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Method+" "+r.URL.Path)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	p := *builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare("/prepare", int32(port), time.Second).Obj()
	p.Spec.Downscale.Prepare.Scheme = "https"
	cluster := &fakeCluster{policies: []v1alpha1.ScalingPolicy{p}, pods: []corev1.Pod{*builders.MakePod(testNS, "a", 4).IP("127.0.0.1").Obj()}}
	prep := &PrepareDownscale{Cluster: cluster, Pods: NewPodClient(), Addressing: podcall.Addressing{PodAddressIP: true}, Now: time.Now}
	req := stsUpdate("a", 5, 4)
	if v := prep.decide(context.Background(), &req.r); !v.allowed || !slices.Equal(calls, []string{"POST /prepare"}) {
		t.Errorf("verdict %+v, calls %q; want allowed after one POST over TLS", v, calls)
	}
}

// TestPrepareOverMutualTLS: with spec.downscale.prepare.tls the pod's
// certificate is verified against the CA from a Secret, and the client
// certificate from another is presented (the call is still observed in the
// webhook's metrics); while a Secret is missing the downscale is denied,
// naming the field, and no pod is called.
func TestPrepareOverMutualTLS(t *testing.T) {
	var calls []string
	srv, err := httptlstest.NewMutualTLS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Method+" "+r.URL.Path)
		w.WriteHeader(http.StatusNoContent)
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	p := *builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare("/prepare", int32(port), time.Second).Obj()
	p.Spec.Downscale.Prepare.Scheme = "https"
	p.Spec.Downscale.Prepare.TLS = &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "pods-ca"},
		ClientCertSecretRef: &v1alpha1.LocalSecretReference{Name: "echelon-client"}}
	cluster := &fakeCluster{policies: []v1alpha1.ScalingPolicy{p}, pods: []corev1.Pod{*builders.MakePod(testNS, "a", 4).IP("127.0.0.1").Obj()}}
	secrets := fake.NewClientBuilder().WithObjects(httptlstest.CASecret(testNS, "pods-ca", srv.Material.CAPEM)).Build()
	prep := &PrepareDownscale{Cluster: cluster, Pods: NewPodClient(), Addressing: podcall.Addressing{PodAddressIP: true}, Secrets: secrets, Now: time.Now}
	req := stsUpdate("a", 5, 4)
	v := prep.decide(context.Background(), &req.r)
	if v.allowed || !strings.Contains(v.message, "spec.downscale.prepare.tls.clientCertSecretRef: Secret echelon-client not found in namespace "+testNS) || len(calls) != 0 {
		t.Errorf("verdict %+v, calls %q; want denied naming the missing client certificate Secret, no call", v, calls)
	}

	if err := secrets.Create(context.Background(), httptlstest.TLSSecret(testNS, "echelon-client", srv.Material.CertPEM, srv.Material.KeyPEM)); err != nil {
		t.Fatal(err)
	}
	before := histogramCount(t, metrics.WebhookPodCallDuration.WithLabelValues(metrics.PodCallPrepare))
	req = stsUpdate("a", 5, 4)
	if v := prep.decide(context.Background(), &req.r); !v.allowed || !slices.Equal(calls, []string{"POST /prepare"}) {
		t.Errorf("verdict %+v, calls %q; want allowed after one POST over mutual TLS", v, calls)
	}
	if n := histogramCount(t, metrics.WebhookPodCallDuration.WithLabelValues(metrics.PodCallPrepare)) - before; n != 1 {
		t.Errorf("%d prepare calls observed, want the one over TLS", n)
	}
}

// TestPrepareAnswersWithinTheDeadline: a pod that hangs on its prepare call
// and a prepared pod that is slow to cancel must not hold the denial past the
// API server's timeout, which a per-call timeout shorter than it does not
// guarantee alone (a prepare call and then a cancel call, each up to the
// timeout). The cancel is still sent, and finishes after the answer.
func TestPrepareAnswersWithinTheDeadline(t *testing.T) {
	pods := newPodServer(t, "a", 3, 4)
	pods.Answer(http.MethodPost, "a-4", webhookstest.Hang)
	cancelling := make(chan struct{})
	pods.Answer(http.MethodDelete, "a-3", func(w http.ResponseWriter, r *http.Request) {
		<-cancelling // slow to cancel: answers once the test has its answer
		w.WriteHeader(http.StatusNoContent)
	})
	cluster := &fakeCluster{
		policies: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare("/p", pods.Port, 1500*time.Millisecond).Obj()},
		pods:     runningPods("a", pods),
	}
	prep := &PrepareDownscale{Cluster: cluster, Pods: NewPodClient(), Addressing: podcall.Addressing{PodAddressIP: true}, Now: time.Now}
	start := time.Now()
	a := serve(t, handler("test-prepare", prep, nil), stsUpdate("a", 5, 3).review(), "timeout=2s")
	took := time.Since(start)
	close(cancelling)
	prep.cancels.Wait()
	// The answer is due 1.8s in (a tenth of 2s before the deadline, which
	// TestPrepareRecordWithinTheDeadline checks on the deadlines). A webhook
	// that waited for the slow cancel would answer only once the test lets
	// the pod answer, and one that ran the prepare call and then the cancel
	// call each to their 1.5s timeout would answer at 3s: 2.9s tells both
	// apart from a correct answer delayed by a loaded machine's scheduling.
	if took >= 2900*time.Millisecond {
		t.Errorf("answered after %v: the webhook waited for the slow cancel, or ran the calls one after the other", took)
	}
	checkAnswer(t, a, false, http.StatusForbidden, "pod a-4 did not prepare", "")
	if !strings.Contains(a.message(), "a-3") {
		t.Errorf("message %q does not say that a-3 is told to cancel", a.message())
	}
	want := []string{"DELETE a-3", "DELETE a-4", "POST a-3", "POST a-4"}
	if got := pods.Calls(); !slices.Equal(got, want) {
		t.Errorf("pod calls %q, want %q", got, want)
	}
}

// TestPrepareRecordWithinTheDeadline: a record of the downscale that the API
// server is slow to take is given up before the API server's timeout, and the
// prepared pods are told to cancel: admitted after the API server gave up,
// the downscale would not happen and its pods would stay prepared.
func TestPrepareRecordWithinTheDeadline(t *testing.T) {
	pods := newPodServer(t, "a", 3, 4)
	cluster := &fakeCluster{
		policies:    []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare("/p", pods.Port, time.Second).Obj()},
		pods:        runningPods("a", pods),
		recordHangs: true,
	}
	prep := &PrepareDownscale{Cluster: cluster, Pods: NewPodClient(), Addressing: podcall.Addressing{PodAddressIP: true}, Now: time.Now}
	spy := &deadlineSpy{decider: prep}
	a := serve(t, handler("test-prepare", spy, nil), stsUpdate("a", 5, 3).review(), "timeout=2s")
	prep.cancels.Wait()
	// The wait for the record ends a tenth of the request's time before
	// the API server's deadline, so that the answer reaches it in time.
	// Judged on the deadlines themselves, not on how long the answer took:
	// on a loaded machine the answer may be late by a scheduling delay the
	// webhook cannot help.
	// The margin is a tenth of what is left when the pod calls begin: at
	// most 200ms here, less by a tenth of any delay before them.
	if margin := spy.deadline.Sub(cluster.recordDeadline); margin < 10*time.Millisecond || margin > 200*time.Millisecond {
		t.Errorf("the record's wait ends %v before the request's deadline, want a tenth of the time left, at most 200ms", margin)
	}
	checkAnswer(t, a, false, http.StatusInternalServerError, "context deadline exceeded", "")
	want := []string{"DELETE a-3", "DELETE a-4", "POST a-3", "POST a-4"}
	if got := pods.Calls(); !slices.Equal(got, want) {
		t.Errorf("pod calls %q, want %q", got, want)
	}
}

// TestPrepareOperatorExemptionOnlyForScalingPolicies: the operator's user
// with the ScalingPolicy controller's field manager skips the gate and
// allowed: false only when the policy scales its target; a policy that only
// guards or prepares has no controller downscaling its target.
func TestPrepareOperatorExemptionOnlyForScalingPolicies(t *testing.T) {
	const path = "/ingester/prepare-shutdown"
	for _, tc := range []prepareCase{
		{name: "guard-only policy with allowed: false: refused before any call",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				c.policies = append(c.policies, *builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare(path, p.Port, 2*time.Second).DownscaleAllowed(false).Obj())
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 4).operatorOwn() }, reason: reasonDownscaleNotAllowed, code: http.StatusForbidden,
			message: []string{"ScalingPolicy a-scaling sets spec.downscale.allowed: false"}, event: EventReasonDownscaleDenied},
		{name: "prepare-only policy: the gate applies",
			setup: func(c *fakeCluster, p *webhookstest.PodServer) {
				c.policies = append(c.policies, *builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare(path, p.Port, 2*time.Second).ZoneDelay(time.Hour).Obj())
				c.group = &scaling.Group{Name: "ingester", Others: []scaling.Member{{Name: "b", LastDownscale: testNow.Add(-10 * time.Minute)}}}
			},
			req: func() *reqBuilder { return stsUpdate("a", 5, 4).operatorOwn() }, reason: reasonZoneDelay, code: http.StatusForbidden,
			message: []string{"after StatefulSet b was downscaled"}, event: EventReasonDownscaleTooEarly},
	} {
		t.Run(tc.name, func(t *testing.T) { runPrepareCase(t, tc) })
	}
}

// TestPrepareRefusedByTheEgressGuard: with the guard's default (loopback
// not allowed), a pod endpoint on a loopback address is not called, and the
// denial names the field and the rule.
func TestPrepareRefusedByTheEgressGuard(t *testing.T) {
	var calls []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls = append(calls, r.Method+" "+r.URL.Path)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	strict, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	restore := egress.Default()
	egress.SetDefault(strict)
	defer egress.SetDefault(restore)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	p := *builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Prepare("/prepare", int32(port), time.Second).Obj()
	cluster := &fakeCluster{policies: []v1alpha1.ScalingPolicy{p}, pods: []corev1.Pod{*builders.MakePod(testNS, "a", 4).IP("127.0.0.1").Obj()}}
	prep := &PrepareDownscale{Cluster: cluster, Pods: NewPodClient(), Addressing: podcall.Addressing{PodAddressIP: true}, Now: time.Now}
	req := stsUpdate("a", 5, 4)
	v := prep.decide(context.Background(), &req.r)
	want := `spec.downscale.prepare: refused by the egress guard (rule "loopback"): 127.0.0.1 is a loopback address`
	if v.allowed || !strings.Contains(v.message, want) || len(calls) != 0 {
		t.Errorf("verdict %+v, calls %q; want denied with a message containing %q and no call", v, calls, want)
	}
}

// deadlineSpy is a decider that keeps the deadline of the context it is
// called with: the request's, as the API server's timeout sets it.
type deadlineSpy struct {
	decider
	deadline time.Time
}

func (s *deadlineSpy) decide(ctx context.Context, req *admissionv1.AdmissionRequest) verdict {
	s.deadline, _ = ctx.Deadline()
	return s.decider.decide(ctx, req)
}
