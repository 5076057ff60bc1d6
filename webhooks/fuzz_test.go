package webhooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/disruption"
	"github.com/echelon-operator/echelon/internal/fuzzinput"
	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/internal/podcall"
	"github.com/echelon-operator/echelon/internal/scaling"
	"github.com/echelon-operator/echelon/test/builders"
	"github.com/echelon-operator/echelon/webhooks/webhookstest"
)

// fuzzPods are the pods of StatefulSet a the fuzzers' cluster serves; a-6
// refuses to prepare.
var fuzzPods = []int{0, 1, 2, 3, 4, 5, 6, 7}

const fuzzFailingPod = "a-6"

// fuzzWebhooks are the three handlers over one fixed cluster: StatefulSet a
// with a policy that forbids downscales and prepares them, Deployment gateway
// with a policy that forbids them, and a group whose disruption budget
// answers as the fuzzer says.
type fuzzWebhooks struct {
	pods     *webhookstest.PodServer
	cluster  *fakeCluster
	budget   *fakeBudget
	prepare  *PrepareDownscale
	handlers map[string]http.Handler
}

func newFuzzWebhooks(t testing.TB) *fuzzWebhooks {
	pods := newPodServer(t, "a", fuzzPods...)
	pods.Answer("POST", fuzzFailingPod, webhookstest.Status(500, "not now"))
	cluster := &fakeCluster{
		policies: []v1alpha1.ScalingPolicy{
			*builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").DownscaleAllowed(false).Prepare("/prepare", pods.Port, time.Second).Obj(),
			*builders.MakeScalingPolicy(testNS, "gateway").Target("Deployment", "gateway").DownscaleAllowed(false).Obj(),
		},
		sets:  []appsv1.StatefulSet{*builders.MakeStatefulSet(testNS, "a").Replicas(5).TypeMeta().Obj()},
		pods:  runningPods("a", pods),
		group: &scaling.Group{Name: "g", Others: []scaling.Member{{Name: "b"}}},
		objs: NamespaceObjects{
			RolloutGroups:   []v1alpha1.RolloutGroup{*builders.MakeRolloutGroup(testNS, "g").Members("a", "b").Obj()},
			ScalingPolicies: []v1alpha1.ScalingPolicy{*builders.MakeScalingPolicy(testNS, "a-scaling").Target("StatefulSet", "a").Obj()},
		},
	}
	id := Identity{Username: operatorUser}
	budget := allowingBudget()
	prepare := &PrepareDownscale{Cluster: cluster, Budget: budget, Identity: id, Pods: NewPodClient(),
		Addressing: podcall.Addressing{PodAddressIP: true}, Now: func() time.Time { return testNow }}
	return &fuzzWebhooks{pods: pods, cluster: cluster, budget: budget, prepare: prepare, handlers: map[string]http.Handler{
		"fuzz-no-downscale":      handler("fuzz-no-downscale", &NoDownscale{Cluster: cluster, Identity: id}, &eventRecorder{}),
		"fuzz-prepare-downscale": handler("fuzz-prepare-downscale", prepare, &eventRecorder{}),
		"fuzz-validate":          handler("fuzz-validate", &Validate{Cluster: cluster}, &eventRecorder{}),
	}}
}

// serveRaw answers body as the handler answers the API server.
func serveRaw(h http.Handler, body []byte) (int, []byte) {
	r := httptest.NewRequest(http.MethodPost, "/admission/x?timeout=10s", bytes.NewReader(body))
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w.Code, w.Body.Bytes()
}

func panicsOf(webhook string) float64 {
	return testutil.ToFloat64(metrics.WebhookRequests.WithLabelValues(webhook, metrics.DecisionError, reasonPanic))
}

// FuzzReview feeds arbitrary bodies to the three webhooks' HTTP handlers: no
// body makes one panic; each gets an HTTP 4xx error or an AdmissionReview
// answering its uid; the same body gets the same answer twice.
func FuzzReview(f *testing.F) {
	for _, seed := range [][]byte{
		stsUpdate("a", 5, 3).review(),
		stsUpdate("a", 5, 7).dryRun().review(),
		stsUpdate("a", 8, 6).operatorOwn().review(),
		scaleUpdate("statefulsets", "a", 5, 0).review(),
		scaleUpdate("deployments", "gateway", 3, 1).review(),
		echelonRequest(admissionv1.Create, "scalingpolicies", nil, builders.MakeScalingPolicy(testNS, "p").Target("StatefulSet", "a").Obj()).review(),
		echelonRequest(admissionv1.Update, "rolloutgroups", builders.MakeRolloutGroup(testNS, "h").Members("c").Obj(), builders.MakeRolloutGroup(testNS, "h").Members("a").Obj()).review(),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"UPDATE","resource":{"group":"apps","version":"v1","resource":"statefulsets"},"object":{"spec":{"replicas":-1}},"oldObject":{"spec":{}}}}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"UPDATE","resource":{"group":"apps","version":"v1","resource":"statefulsets"},"subResource":"scale","object":null,"oldObject":7}}`),
		[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"CREATE","resource":{"group":"echelon.dev","version":"v1alpha1","resource":"rolloutgroups"},"object":{"spec":{"selector":{"matchExpressions":[{"operator":"In"}]}}}}}`),
		[]byte("{}"), []byte("null"), []byte("[]"), nil,
	} {
		f.Add(seed)
	}
	w := newFuzzWebhooks(f)
	f.Fuzz(func(t *testing.T, body []byte) {
		var sent admissionv1.AdmissionReview
		_ = json.Unmarshal(body, &sent)
		for name, h := range w.handlers {
			before := panicsOf(name)
			code, answer := serveRaw(h, body)
			if panicsOf(name) != before {
				t.Fatalf("%s panicked on %q", name, body)
			}
			switch {
			case code == http.StatusOK:
				var review admissionv1.AdmissionReview
				if err := json.Unmarshal(answer, &review); err != nil || review.Response == nil || sent.Request == nil || review.Response.UID != sent.Request.UID {
					t.Fatalf("%s answered 200 with %s to %q", name, answer, body)
				}
			case code < 400 || code >= 500 || len(answer) == 0:
				t.Fatalf("%s answered %d %q to %q, want 200 or a 4xx that says why", name, code, answer, body)
			}
			w.prepare.cancels.Wait()
			again, answerAgain := serveRaw(h, body)
			if again != code || !bytes.Equal(answer, answerAgain) {
				t.Fatalf("%s answered %q to %q, then %q", name, answer, body, answerAgain)
			}
			w.prepare.cancels.Wait()
		}
	})
}

// FuzzDownscaleDecision builds UPDATEs of replicas (direct or /scale, any
// change, dry run or not, any user) and checks each answer of the two
// downscale webhooks against the rules, and that the pods called are
// exactly those removed (never one that stays), with every prepared pod
// cancelled when the downscale is denied.
func FuzzDownscaleDecision(f *testing.F) {
	f.Add([]byte{0, 5, 3, 0, 0, 0})
	f.Add([]byte{1, 5, 3, 0, 1, 0})
	f.Add([]byte{0, 8, 2, 0, 0, 1})
	f.Add([]byte{1, 7, 6, 1, 0, 0})
	f.Add([]byte{2, 3, 1, 0, 0, 0})
	w := newFuzzWebhooks(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		in := fuzzinput.New(data)
		resource := []string{"statefulsets", "statefulsets/scale", "deployments/scale"}[in.Intn(3)]
		old, new := int32(in.Intn(9)), int32(in.Intn(9))
		dryRun, own, ready, forbid := in.Rare(4), in.Rare(3), !in.Rare(5), !in.Rare(2)
		w.budget.answer = disruption.Verdict{Allowed: true}
		if !ready {
			w.budget.answer = disruption.Verdict{Code: disruption.CodeOtherZoneDisrupted, Message: "zone b (1 missing) is disrupted"}
		}
		w.budget.asked = nil
		for i := range w.cluster.policies {
			w.cluster.policies[i].Spec.Downscale.Allowed = ptr.To(!forbid)
		}
		var req *reqBuilder
		switch resource {
		case "statefulsets":
			req = stsUpdate("a", old, new)
		case "statefulsets/scale":
			req = scaleUpdate("statefulsets", "a", old, new)
		default:
			req = scaleUpdate("deployments", "gateway", old, new)
		}
		if dryRun {
			req.dryRun()
		}
		if own {
			req.operatorOwn()
		}
		body := req.review()
		decrease := new < old
		desc := fmt.Sprintf("%s %d->%d dryRun=%v own=%v budgetAllows=%v forbid=%v", resource, old, new, dryRun, own, ready, forbid)

		_, answer := serveRaw(w.handlers["fuzz-no-downscale"], body)
		if got := allowedIn(t, answer); got != (!decrease || !forbid || own) {
			t.Fatalf("no-downscale: %s: allowed %v: %s", desc, got, answer)
		}

		if resource == "deployments/scale" {
			return
		}
		w.pods.Reset()
		_, answer = serveRaw(w.handlers["fuzz-prepare-downscale"], body)
		w.prepare.cancels.Wait()
		allowed := allowedIn(t, answer)
		calls := w.pods.Calls()
		var removed []string
		for i := new; i < old; i++ {
			removed = append(removed, fmt.Sprintf("a-%d", i))
		}
		failing := slices.Contains(removed, fuzzFailingPod)
		// Refused before any call: a downscale the policy forbids, or one the
		// gate holds (the operator's own skips both).
		refused := decrease && !own && (forbid || !ready)
		called := decrease && !refused && !dryRun
		wantAllowed := !decrease || !refused && (dryRun || !failing)
		if allowed != wantAllowed {
			t.Fatalf("prepare-downscale: %s: allowed %v, want %v: %s", desc, allowed, wantAllowed, answer)
		}
		// The budget is asked, recording nothing, for every downscale by
		// another than the operator that the policy lets through, before
		// any pod is called; and asked again, recorded, once every pod
		// prepared, unless it is a dry run.
		asked := w.budget.questions()
		question := fmt.Sprintf(`g Downscale a -%d by "downscale of StatefulSet a by alice"`, old-new)
		want := question + " dry-run"
		if ready && !dryRun && !failing {
			want += "\n" + question
		}
		switch {
		case !decrease || own || forbid:
			if asked != "" {
				t.Fatalf("prepare-downscale: %s: asked the disruption budget %q", desc, asked)
			}
		case asked != want:
			t.Fatalf("prepare-downscale: %s: asked the disruption budget %q, want %q", desc, asked, want)
		}
		for _, c := range calls {
			method, pod, _ := cut(c)
			if !slices.Contains(removed, pod) {
				t.Fatalf("prepare-downscale: %s: called pod %s, which stays (%q)", desc, pod, calls)
			}
			if method == http.MethodDelete && allowed {
				t.Fatalf("prepare-downscale: %s: admitted, yet cancelled %s", desc, pod)
			}
		}
		if !called && len(calls) > 0 || called && countMethod(calls, http.MethodPost) != len(removed) {
			t.Fatalf("prepare-downscale: %s: calls %q, want a POST to each of %q: %v", desc, calls, removed, called)
		}
		if called && failing && countMethod(calls, http.MethodDelete) != len(removed)-1 { // a-6 refused: nothing to cancel
			t.Fatalf("prepare-downscale: %s: denied, but cancelled only %q of %q", desc, calls, removed)
		}
	})
}

func allowedIn(t *testing.T, answer []byte) bool {
	t.Helper()
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(answer, &review); err != nil || review.Response == nil {
		t.Fatalf("not an AdmissionReview: %s", answer)
	}
	return review.Response.Allowed
}

func cut(call string) (method, pod string, ok bool) {
	for i := range call {
		if call[i] == ' ' {
			return call[:i], call[i+1:], true
		}
	}
	return call, "", false
}

func countMethod(calls []string, method string) int {
	n := 0
	for _, c := range calls {
		if m, _, _ := cut(c); m == method {
			n++
		}
	}
	return n
}
