package rolloutgroup

// Controller-tier tests of spec.hooks: the reconciler against a real API
// server, the test playing the StatefulSet controller, and an HTTP server
// answering as every pod (beforePodRemoval) and as the member hooks' endpoint.

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/e2e/framework"
	"github.com/echelon-operator/echelon/internal/hooks"
	"github.com/echelon-operator/echelon/internal/httptls/httptlstest"
)

// hookCall is one call the hook server received.
type hookCall struct {
	path   string
	reason string // the query's reason
	body   hooks.RemovalPayload
	member hooks.MemberPayload
	// podLive is true when the pod named was still there, not terminating and
	// on the revision it had before, when its call came.
	podLive bool
	// partition is the member's rollingUpdate.partition when the call came,
	// -1 when it has none.
	partition int32
}

// hookServer answers hook calls: 204, or 500 for the keys (pod names, or
// paths of member hooks) set to fail.
type hookServer struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []hookCall
	fail  map[string]bool
	// during, when set, runs in each call before it is answered.
	during func(hookCall)
}

func (e *env) startHookServer() *hookServer {
	e.T.Helper()
	h := &hookServer{fail: map[string]bool{}}
	h.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := hookCall{path: r.URL.Path, reason: r.URL.Query().Get("reason")}
		raw := map[string]any{}
		_ = json.NewDecoder(r.Body).Decode(&raw)
		data, _ := json.Marshal(raw)
		key := r.URL.Path
		if c.reason != "" {
			_ = json.Unmarshal(data, &c.body)
			key = c.body.Pod
			pod := &corev1.Pod{}
			err := e.Admin.Get(r.Context(), client.ObjectKey{Namespace: e.NS, Name: c.body.Pod}, pod)
			c.podLive = err == nil && pod.DeletionTimestamp == nil
			c.partition = -1
			sts := &appsv1.StatefulSet{}
			if err := e.Admin.Get(r.Context(), client.ObjectKey{Namespace: e.NS, Name: c.body.Member}, sts); err == nil {
				if ru := sts.Spec.UpdateStrategy.RollingUpdate; ru != nil && ru.Partition != nil {
					c.partition = *ru.Partition
				}
			}
		} else {
			_ = json.Unmarshal(data, &c.member)
		}
		h.mu.Lock()
		h.calls = append(h.calls, c)
		failing, during := h.fail[key], h.during
		h.mu.Unlock()
		if during != nil {
			during(c)
		}
		if failing {
			http.Error(w, "not now: the ring is busy", http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	e.T.Cleanup(h.srv.Close)
	// Every pod is reached at its name, and every name dials this server.
	addr := h.srv.Listener.Addr().String()
	e.r.podHost = func(pod *corev1.Pod, _ string) (string, string) { return pod.Name, "" }
	e.r.hookCaller = &hooks.Caller{HTTP: &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
	}}}
	return h
}

func (h *hookServer) setFailing(key string, failing bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.fail[key] = failing
}

func (h *hookServer) recorded() []hookCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls)
}

// removalCalls counts the beforePodRemoval calls each pod received with reason.
func (h *hookServer) removalCalls(reason v1alpha1.RemovalReason) map[string]int {
	out := map[string]int{}
	for _, c := range h.recorded() {
		if c.reason == string(reason) {
			out[c.body.Pod]++
		}
	}
	return out
}

// hookedMembers creates two-pod members on r1 (revisions r1 to r4) and a
// group of them with hooks; once the group is Complete it plays the
// StatefulSet controller and returns a monitor of the guarantees.
func (e *env) hookedMembers(h *v1alpha1.RolloutGroupHooks, members ...string) *framework.Monitor {
	e.T.Helper()
	for _, m := range members {
		sts := e.versionedStatefulSet(m, 2, "r1", "r1", "r2", "r3", "r4")
		e.Pods(sts, 2, revisionName(m, "r1"), controllertest.PodSpec{})
	}
	rg := &v1alpha1.RolloutGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "ingester", Namespace: e.NS},
		Spec:       v1alpha1.RolloutGroupSpec{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Hooks: h},
	}
	for _, m := range members {
		rg.Spec.StatefulSets = append(rg.Spec.StatefulSets, v1alpha1.RolloutMember{Name: m})
	}
	if err := e.Admin.Create(e.Ctx, rg); err != nil {
		e.T.Fatal(err)
	}
	e.waitPhase("ingester", v1alpha1.PhaseComplete, 20*time.Second)
	e.PlayStatefulSetController(controllertest.KubeletTiming{ReadyAfter: 50 * time.Millisecond}, members...)
	e.playRevisions()
	return e.startMonitor(1, 2, members...)
}

// updateGroup edits the group's spec, retrying on a conflict with the
// controller's status writes.
func (e *env) updateGroup(mutate func(*v1alpha1.RolloutGroupSpec)) {
	e.T.Helper()
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		rg := e.GetGroup("ingester")
		mutate(&rg.Spec)
		return e.Admin.Update(e.Ctx, rg)
	}); err != nil {
		e.T.Fatal(err)
	}
}

func hookCondition(rg *v1alpha1.RolloutGroup) *metav1.Condition {
	return findCondition(rg.Status.Conditions, v1alpha1.ConditionHookFailed)
}

// beforePodRemoval calls every pod of a rollout once, with reason rollout,
// while the pod is still there; a pod whose call fails under the default
// failurePolicy (Fail) is not removed and the HookFailed condition and an
// Event name it, the rest of the rollout going on as far as the guarantees
// let it; once it answers, it goes too. With Ignore, a failing pod goes all
// the same. A rotation calls with reason rotation.
func TestBeforePodRemovalHook(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	srv := e.startHookServer()
	hook := &v1alpha1.RolloutGroupHooks{BeforePodRemoval: &v1alpha1.PodRemovalHook{
		Endpoint:   v1alpha1.PrepareEndpoint{Port: 8080, Path: "/prepare-removal"},
		HookPolicy: v1alpha1.HookPolicy{Retries: ptr.To[int32](0), Timeout: &metav1.Duration{Duration: 2 * time.Second}},
	}}
	mon := e.hookedMembers(hook, "zone-a", "zone-b")

	// A rollout: each pod called once, before it goes, with the reason.
	e.rollTo("r2", "zone-a", "zone-b")
	rg := e.waitRolledToTag("ingester", "r2", 60*time.Second)
	expectNoBreaches(t, mon)
	calls := srv.removalCalls(v1alpha1.RemovalRollout)
	for _, pod := range []string{"zone-a-0", "zone-a-1", "zone-b-0", "zone-b-1"} {
		if calls[pod] != 1 {
			t.Errorf("pod %s called %d times with reason rollout, want once (calls %v)", pod, calls[pod], calls)
		}
	}
	for _, c := range srv.recorded() {
		if !c.podLive || c.path != "/prepare-removal" || c.body.Group != "ingester" || c.body.Namespace != e.NS ||
			c.body.Revision != revisionName(c.body.Member, "r2") {
			t.Errorf("call %+v: want the pod still there, the path, group, namespace and update revision", c)
		}
	}
	if c := hookCondition(rg); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("HookFailed condition %+v after a rollout whose calls all succeeded, want False", c)
	}

	// Fail (the default): zone-a-0 refuses; it stays, zone-a-1 goes, and
	// zone-b waits for zone-a (guarantee 2).
	srv.setFailing("zone-a-0", true)
	e.rollTo("r3", "zone-a", "zone-b")
	e.Eventually(30*time.Second, "HookFailed naming zone-a-0", func() (bool, error) {
		c := hookCondition(e.GetGroup("ingester"))
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "pod zone-a-0 not removed") &&
			strings.Contains(c.Message, "answered 500"), nil
	})
	e.waitEvent("ingester", v1alpha1.ReasonHookFailed, 10*time.Second)
	e.Eventually(30*time.Second, "zone-a-1 rolled, zone-a-0 held", func() (bool, error) {
		got := e.podRevisions("zone-a")
		return got["r3"] == 1 && got["r2"] == 1, nil
	})
	e.Eventually(30*time.Second, "zone-a-0 called again after hookRetryInterval", func() (bool, error) {
		return srv.removalCalls(v1alpha1.RemovalRollout)["zone-a-0"] >= 3, nil // r2, then two refusals of r3
	})
	if got := e.podRevisions("zone-b"); got["r2"] != 2 {
		t.Errorf("zone-b pods %v while zone-a-0 is held, want both still on r2", got)
	}
	srv.setFailing("zone-a-0", false)
	rg = e.waitRolledToTag("ingester", "r3", 60*time.Second)
	if c := hookCondition(rg); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("HookFailed condition %+v once zone-a-0 answered, want False", c)
	}

	// Ignore: zone-b-1 refuses and goes all the same.
	e.updateGroup(func(s *v1alpha1.RolloutGroupSpec) { s.Hooks.BeforePodRemoval.FailurePolicy = v1alpha1.HookIgnore })
	srv.setFailing("zone-b-1", true)
	before := srv.removalCalls(v1alpha1.RemovalRollout)["zone-b-1"]
	e.rollTo("r4", "zone-a", "zone-b")
	rg = e.waitRolledToTag("ingester", "r4", 60*time.Second)
	expectNoBreaches(t, mon)
	if got := srv.removalCalls(v1alpha1.RemovalRollout)["zone-b-1"] - before; got != 1 {
		t.Errorf("zone-b-1 called %d times with Ignore, want once", got)
	}
	if c := hookCondition(rg); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("HookFailed condition %+v with Ignore, want False", c)
	}

	// A rotation: reason rotation.
	srv.setFailing("zone-b-1", false)
	restartAt := metav1.NewTime(time.Now().Add(2 * time.Second)) // every pod was created before
	e.updateGroup(func(s *v1alpha1.RolloutGroupSpec) { s.RestartAt = &restartAt })
	e.Eventually(60*time.Second, "every pod called with reason rotation", func() (bool, error) {
		return len(srv.removalCalls(v1alpha1.RemovalRotation)) == 4, nil
	})
	for pod, n := range srv.removalCalls(v1alpha1.RemovalRotation) {
		if n != 1 {
			t.Errorf("pod %s called %d times with reason rotation, want once", pod, n)
		}
	}
	for _, c := range srv.recorded() {
		if c.reason == string(v1alpha1.RemovalRotation) && c.body.Revision != revisionName(c.body.Member, "r4") {
			t.Errorf("rotation call %+v: want the pod's own revision r4", c.body)
		}
	}
	expectNoBreaches(t, mon)
}

// beforeMember and afterMember are called once per member and revision, in
// order: before a, after a, before b, after b; the records in status keep a
// new reconciler (a restart) from calling them again. A beforeMember that
// fails (Fail) holds the member, naming it in HookFailed, until it answers.
func TestMemberHooks(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	srv := e.startHookServer()
	base := srv.srv.URL
	hook := &v1alpha1.RolloutGroupHooks{
		BeforeMember: &v1alpha1.MemberHook{URL: base + "/before/{{ .Member }}", HookPolicy: v1alpha1.HookPolicy{Retries: ptr.To[int32](0)}},
		AfterMember:  &v1alpha1.MemberHook{URL: base + "/after/{{ .Member }}", HookPolicy: v1alpha1.HookPolicy{Retries: ptr.To[int32](0)}},
	}
	mon := e.hookedMembers(hook, "zone-a", "zone-b")
	if n := len(srv.recorded()); n != 0 {
		t.Fatalf("%d member hook calls before any rollout, want none", n)
	}
	srv.setFailing("/before/zone-b", true)
	e.rollTo("r2", "zone-a", "zone-b")
	e.Eventually(30*time.Second, "HookFailed naming zone-b", func() (bool, error) {
		c := hookCondition(e.GetGroup("ingester"))
		return c != nil && c.Status == metav1.ConditionTrue && strings.Contains(c.Message, "member hook of StatefulSet zone-b failed"), nil
	})
	if got := e.podRevisions("zone-b"); got["r1"] != 2 {
		t.Errorf("zone-b pods %v while its beforeMember fails, want both on r1", got)
	}
	srv.setFailing("/before/zone-b", false)
	e.waitRolledToTag("ingester", "r2", 60*time.Second)
	expectNoBreaches(t, mon)
	e.Eventually(10*time.Second, "afterMember of zone-b", func() (bool, error) {
		return slices.ContainsFunc(srv.recorded(), func(c hookCall) bool { return c.path == "/after/zone-b" }), nil
	})
	var paths []string
	for _, c := range srv.recorded() {
		if len(paths) == 0 || paths[len(paths)-1] != c.path {
			paths = append(paths, c.path) // the refused /before/zone-b calls fold into one
		}
	}
	want := []string{"/before/zone-a", "/after/zone-a", "/before/zone-b", "/after/zone-b"}
	if !slices.Equal(paths, want) {
		t.Errorf("member hooks called %v, want %v", paths, want)
	}
	for _, c := range srv.recorded() {
		if c.member.Group != "ingester" || c.member.Revision != revisionName(c.member.Member, "r2") || !strings.HasSuffix(c.path, c.member.Member) {
			t.Errorf("member hook body %+v on %s", c.member, c.path)
		}
	}
	rg := e.GetGroup("ingester")
	if rg.Status.Hooks == nil || len(rg.Status.Hooks.Members) != 2 {
		t.Fatalf("status.hooks %+v, want a record per member", rg.Status.Hooks)
	}
	for _, m := range rg.Status.Hooks.Members {
		if m.Revision != revisionName(m.Name, "r2") || m.BeforeTime == nil || m.AfterTime == nil {
			t.Errorf("record %+v, want both hooks done for r2", m)
		}
	}
	// A new process: no call again.
	n := len(srv.recorded())
	fresh := New(e.Manager)
	fresh.hookCaller, fresh.podHost = e.r.hookCaller, e.r.podHost
	if _, err := fresh.Reconcile(e.Ctx, reconcileRequest(e, "ingester")); err != nil {
		t.Fatal(err)
	}
	if got := len(srv.recorded()); got != n {
		t.Errorf("%d member hook calls from a restarted reconciler after the rollout, want none", got-n)
	}
}

// A member hook on https with a private CA and a client certificate from
// Secrets: while the Secrets are missing the hook fails naming the field
// (HookFailed, under failurePolicy Fail the zone waits); once they exist it
// is called over mutual TLS and the rollout goes on.
func TestMemberHookTLS(t *testing.T) {
	e := newEnv(t, envOptions{eventDriven: true})
	var mu sync.Mutex
	var paths []string
	srv, err := httptlstest.NewMutualTLS(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		paths = append(paths, r.URL.Path)
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	hook := &v1alpha1.RolloutGroupHooks{BeforeMember: &v1alpha1.MemberHook{
		URL: srv.URL + "/before/{{ .Member }}",
		TLS: &v1alpha1.TLSConfig{
			CASecretRef:         &v1alpha1.SecretKeyReference{Name: "hook-ca"},
			ClientCertSecretRef: &v1alpha1.LocalSecretReference{Name: "hook-client"},
		},
		HookPolicy: v1alpha1.HookPolicy{Retries: ptr.To[int32](0)},
	}}
	mon := e.hookedMembers(hook, "zone-a")
	e.rollTo("r2", "zone-a")
	e.Eventually(30*time.Second, "HookFailed naming the CA Secret's field", func() (bool, error) {
		c := hookCondition(e.GetGroup("ingester"))
		return c != nil && c.Status == metav1.ConditionTrue &&
			strings.Contains(c.Message, "spec.hooks.beforeMember.tls.caSecretRef: Secret hook-ca not found in namespace "+e.NS), nil
	})
	if got := e.podRevisions("zone-a"); got["r1"] != 2 {
		t.Errorf("zone-a pods %v while its beforeMember cannot be called, want both on r1", got)
	}
	for _, s := range []*corev1.Secret{
		httptlstest.CASecret(e.NS, "hook-ca", srv.Material.CAPEM),
		httptlstest.TLSSecret(e.NS, "hook-client", srv.Material.CertPEM, srv.Material.KeyPEM),
	} {
		if err := e.Admin.Create(e.Ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	e.waitRolledToTag("ingester", "r2", 60*time.Second)
	expectNoBreaches(t, mon)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(paths, []string{"/before/zone-a"}) {
		t.Errorf("the mutual-TLS server saw %v, want one beforeMember call for zone-a", paths)
	}
}
