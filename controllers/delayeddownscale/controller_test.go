package delayeddownscale

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/controllers/internal/controllertest"
	"github.com/echelon-operator/echelon/controllers/scalingpolicy"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/httptls/httptlstest"
	"github.com/echelon-operator/echelon/internal/podcall"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/echelon-operator/echelon/api/v1alpha1"
)

// preparePods answers the delayed-downscale protocol as each pod, told apart
// by the loopback IP it is called on: POST prepares (remembering since when),
// DELETE cancels.
type preparePods struct {
	port int

	mu       sync.Mutex
	since    map[string]time.Time // by IP
	prepared map[string]time.Time // the answer to give, by IP, when set ahead
	calls    []string             // "POST 127.0.0.12"
	// hold, when set, keeps every POST waiting until it is closed (or the
	// caller gives up), before it prepares anything.
	hold chan struct{}
	// failDeletes answers the next DELETEs to a pod, by IP, with 503.
	failDeletes map[string]int
}

func startPreparePods(t *testing.T) *preparePods {
	t.Helper()
	return servePreparePods(t, nil)
}

// servePreparePods is startPreparePods over TLS when cfg is set.
func servePreparePods(t *testing.T, cfg *tls.Config) *preparePods {
	t.Helper()
	l, err := net.Listen("tcp", "0.0.0.0:0")
	if err != nil {
		t.Fatal(err)
	}
	if cfg != nil {
		l = tls.NewListener(l, cfg)
	}
	p := &preparePods{port: l.Addr().(*net.TCPAddr).Port, since: map[string]time.Time{}, prepared: map[string]time.Time{}, failDeletes: map[string]int{}}
	srv := &http.Server{Handler: http.HandlerFunc(p.serve), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return p
}

func (p *preparePods) serve(w http.ResponseWriter, r *http.Request) {
	ip, _, _ := net.SplitHostPort(r.Host)
	p.mu.Lock()
	hold := p.hold
	p.calls = append(p.calls, r.Method+" "+ip)
	p.mu.Unlock()
	if hold != nil && r.Method == http.MethodPost {
		select {
		case <-hold:
		case <-r.Context().Done():
			// The pod prepares all the same: the caller died after asking.
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	switch r.Method {
	case http.MethodPost:
		if _, ok := p.since[ip]; !ok {
			p.since[ip] = time.Now()
			if at, ok := p.prepared[ip]; ok {
				p.since[ip] = at
			}
		}
		fmt.Fprintf(w, `{"timestamp": %d}`, p.since[ip].Unix())
	case http.MethodDelete:
		if p.failDeletes[ip] > 0 {
			p.failDeletes[ip]--
			http.Error(w, "flushing", http.StatusServiceUnavailable)
			return
		}
		delete(p.since, ip)
	}
}

func (p *preparePods) callsOf(method string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, c := range p.calls {
		if strings.HasPrefix(c, method+" ") {
			out = append(out, strings.TrimPrefix(c, method+" "))
		}
	}
	return out
}

// restart forgets that the pod at ip was prepared, as a pod restarted
// (recreated) would.
func (p *preparePods) restart(ip string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.since, ip)
}

// isPrepared reports whether the pod at ip is prepared.
func (p *preparePods) isPrepared(ip string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.since[ip]
	return ok
}

func podIP(ordinal int) string { return fmt.Sprintf("127.0.0.%d", 10+ordinal) }

// servedStatefulSet creates the StatefulSet ing of n Ready pods on revision
// r1, pod i on podIP(i), where startPreparePods answers.
func servedStatefulSet(e *controllertest.Env, n int32) *appsv1.StatefulSet {
	e.T.Helper()
	sts := e.StatefulSet("ing", n, "r1")
	for i := range int(n) {
		e.Pod(sts, i, "r1", controllertest.PodSpec{IP: podIP(i)})
	}
	e.MarkReady("ing")
	return sts
}

// A ScalingPolicy downscale handed to a DelayedDownscale shrinks the
// StatefulSet only past pods prepared for the delay, in steps; an upscale
// cancels on every pod.
func TestDelayedDownscaleShrinksOnlyPastPreparedPods(t *testing.T) {
	e := newScalingEnv(t)
	pods := startPreparePods(t)
	servedStatefulSet(e, 5)
	// Pod 4 has been prepared for long (an earlier downscale it kept), so the
	// StatefulSet may lose it at once; pods 3 and 2 are prepared now.
	pods.prepared[podIP(4)] = time.Now().Add(-time.Hour)
	delay := 3 * time.Second
	dd := &v1alpha1.DelayedDownscale{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "ing"},
		Spec: v1alpha1.DelayedDownscaleSpec{
			TargetRef: v1alpha1.ScalingTargetReference{Name: "ing"}, Delay: "3s",
			PrepareEndpoint: v1alpha1.PrepareEndpoint{Port: int32(pods.port), Path: "/prepare"},
			Timeout:         &metav1.Duration{Duration: time.Second},
		},
	}
	if err := e.Admin.Create(e.Ctx, dd); err != nil {
		t.Fatal(err)
	}
	// Pods answer whole seconds: a pod prepared now says since the start of
	// this second, and the delay counts from that.
	start := time.Now().Truncate(time.Second)
	e.Policy("ing", "ing", func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = ptr.To[int32](2) })

	// A partial downscale first: past pod 4 only, before pods 3 and 2 are
	// eligible.
	// 20 s: the step takes a few passes of both controllers (the pods named
	// in status, their answers, the live confirm), slow on a loaded machine.
	e.WaitReplicas("ing", 4, 20*time.Second)
	if first := time.Since(start); first >= delay {
		t.Logf("the first step came %s after the start, no sooner than the others could (a slow machine): the partial step is not shown", first)
	}
	e.MarkReady("ing")
	e.WaitReplicas("ing", 2, 15*time.Second)
	if took := time.Since(start); took < delay {
		t.Errorf("shrunk to 2 after %s, before the pods were prepared for %s", took, delay)
	}
	if posts := pods.callsOf("POST"); len(posts) > 12 {
		t.Errorf("%d POSTs for 3 pods: pods are called only when something changes or a pod becomes eligible: %v", len(posts), posts)
	}
}

// Pods served over https with a certificate a private CA signed: while the
// CA Secret of spec.prepareEndpoint.tls is missing every pod's error names
// the field and nothing shrinks; once it exists the pods are prepared over
// TLS and the StatefulSet shrinks.
func TestDelayedDownscaleOverTLS(t *testing.T) {
	e := newScalingEnv(t)
	ca, err := httptlstest.NewCA("pods-ca")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Server(podIP(0), podIP(1), podIP(2), podIP(3))
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pair.TLS()
	if err != nil {
		t.Fatal(err)
	}
	pods := servePreparePods(t, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}})
	servedStatefulSet(e, 4)
	dd := &v1alpha1.DelayedDownscale{
		ObjectMeta: metav1.ObjectMeta{Namespace: e.NS, Name: "ing"},
		Spec: v1alpha1.DelayedDownscaleSpec{
			TargetRef: v1alpha1.ScalingTargetReference{Name: "ing"}, Delay: "1s",
			PrepareEndpoint: v1alpha1.PrepareEndpoint{Scheme: "https", Port: int32(pods.port), Path: "/prepare",
				TLS: &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "pods-ca"}}},
			Timeout: &metav1.Duration{Duration: time.Second},
		},
	}
	if err := e.Admin.Create(e.Ctx, dd); err != nil {
		t.Fatal(err)
	}
	e.Policy("ing", "ing", func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = ptr.To[int32](2) })
	want := "spec.prepareEndpoint.tls.caSecretRef: Secret pods-ca not found in namespace " + e.NS
	e.Eventually(20*time.Second, "pod errors naming the CA Secret", func() (bool, error) {
		got := &v1alpha1.DelayedDownscale{}
		if err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(dd), got); err != nil {
			return false, err
		}
		return len(got.Status.PreparedPods) == 2 && !slices.ContainsFunc(got.Status.PreparedPods, func(p v1alpha1.PreparedPod) bool {
			return p.Error != want
		}), nil
	})
	if posts := pods.callsOf("POST"); len(posts) != 0 {
		t.Fatalf("pods called %v without the tls block's CA", posts)
	}
	if err := e.Admin.Create(e.Ctx, httptlstest.CASecret(e.NS, "pods-ca", ca.PEM)); err != nil {
		t.Fatal(err)
	}
	e.WaitReplicas("ing", 2, 30*time.Second)
	if posts := pods.callsOf("POST"); !slices.Contains(posts, podIP(2)) || !slices.Contains(posts, podIP(3)) {
		t.Errorf("POSTs to %v, want pods 2 and 3 prepared over TLS", posts)
	}
}

// An upscale while pods wait out the delay cancels: every pod gets DELETE,
// and the StatefulSet keeps its replicas.
func TestDelayedDownscaleCancelledByAnUpscale(t *testing.T) {
	e := newScalingEnv(t)
	pods := startPreparePods(t)
	servedStatefulSet(e, 4)
	dd := createDelayed(e, pods, "1h")
	e.Policy("ing", "ing", func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = ptr.To[int32](2) })
	e.Eventually(10*time.Second, "pods 3 and 2 prepared", func() (bool, error) {
		got := &v1alpha1.DelayedDownscale{}
		err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(dd), got)
		return err == nil && got.Status.Phase == v1alpha1.DelayedPhaseWaiting && got.Status.PreparedCount == 2, err
	})
	sp := e.GetPolicy("ing")
	sp.Spec.Replicas = ptr.To[int32](4)
	if err := e.Admin.Update(e.Ctx, sp); err != nil {
		t.Fatal(err)
	}
	e.Eventually(10*time.Second, "every pod cancelled", func() (bool, error) {
		return len(pods.callsOf("DELETE")) >= 4, nil
	})
	e.Eventually(10*time.Second, "the DelayedDownscale idle", func() (bool, error) {
		got := &v1alpha1.DelayedDownscale{}
		err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(dd), got)
		return err == nil && got.Status.Phase == v1alpha1.DelayedPhaseIdle && len(got.Status.PreparedPods) == 0, err
	})
	if n := *e.GetSTS("ing").Spec.Replicas; n != 4 {
		t.Errorf("StatefulSet has %d replicas, want its 4", n)
	}
}

// A pod whose DELETE fails after an upscale may still be prepared: status
// names it, and it is told again with backoff until it answers.
func TestDelayedDownscaleRetriesAFailedCancel(t *testing.T) {
	e := newScalingEnv(t)
	pods := startPreparePods(t)
	servedStatefulSet(e, 4)
	dd := createDelayed(e, pods, "1h")
	e.Policy("ing", "ing", func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = ptr.To[int32](3) })
	e.Eventually(10*time.Second, "pod 3 prepared", func() (bool, error) { return pods.isPrepared(podIP(3)), nil })
	pods.mu.Lock()
	pods.failDeletes[podIP(3)] = 1
	pods.mu.Unlock()
	// The controller writes the policy's status meanwhile: retry the
	// spec's update on a conflict.
	if err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		sp := e.GetPolicy("ing")
		sp.Spec.Replicas = ptr.To[int32](4)
		return e.Admin.Update(e.Ctx, sp)
	}); err != nil {
		t.Fatal(err)
	}
	e.Eventually(10*time.Second, "status naming ing-3, whose DELETE failed", func() (bool, error) {
		got := &v1alpha1.DelayedDownscale{}
		err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(dd), got)
		return err == nil && len(got.Status.CancellingPods) == 1 && got.Status.CancellingPods[0].Name == "ing-3" &&
			strings.Contains(got.Status.CancellingPods[0].Error, "503") && strings.Contains(got.Status.Message, "ing-3"), err
	})
	e.Eventually(30*time.Second, "ing-3 told again, no longer prepared, and no longer named", func() (bool, error) {
		got := &v1alpha1.DelayedDownscale{}
		err := e.Admin.Get(e.Ctx, client.ObjectKeyFromObject(dd), got)
		return err == nil && !pods.isPrepared(podIP(3)) && len(got.Status.CancellingPods) == 0, err
	})
}

// A ScalingPolicy whose status is not yet of its current spec (its
// controller failed a pass, or has not run since the edit) gives no new
// desired replicas, but it does not end the downscale either: the pods stay
// prepared. Once its status catches up, even with the desired replicas it
// already showed, the DelayedDownscale follows it.
func TestDelayedDownscaleKeepsItsPodsWhileThePolicyCatchesUp(t *testing.T) {
	// No ScalingPolicy controller: the policy's status is written by hand.
	e := controllertest.New(t, controllertest.Options{})
	if err := New(e.Manager, podcall.Addressing{PodAddressIP: true}).SetupWithManager(e.Manager); err != nil {
		t.Fatal(err)
	}
	e.Start()
	pods := startPreparePods(t)
	servedStatefulSet(e, 4)
	dd := createDelayed(e, pods, "1h")
	e.Policy("ing", "ing", func(s *v1alpha1.ScalingPolicySpec) { s.Replicas = ptr.To[int32](2) })
	setPolicyStatus := func(desired int32, observed func(generation int64) int64) {
		t.Helper()
		sp := e.GetPolicy("ing")
		sp.Status.DesiredReplicas, sp.Status.ObservedGeneration = ptr.To(desired), observed(sp.Generation)
		if err := e.Admin.Status().Update(e.Ctx, sp); err != nil {
			t.Fatal(err)
		}
	}
	current := func(g int64) int64 { return g }
	setPolicyStatus(2, current)
	e.Eventually(10*time.Second, "pods 3 and 2 prepared", func() (bool, error) {
		got, err := getDelayed(e, e.Admin)
		return err == nil && got.Status.Phase == v1alpha1.DelayedPhaseWaiting && got.Status.PreparedCount == 2, err
	})

	// The policy is edited to want 3; its status says so but is held at the
	// generation before (a pass whose action failed).
	sp := e.GetPolicy("ing")
	sp.Spec.Replicas = ptr.To[int32](3)
	if err := e.Admin.Update(e.Ctx, sp); err != nil {
		t.Fatal(err)
	}
	setPolicyStatus(3, func(g int64) int64 { return g - 1 })
	// Something else makes the DelayedDownscale look again: its own edit.
	edited := dd.DeepCopy()
	edited.Spec.Timeout.Duration = 2 * time.Second
	if err := e.Admin.Patch(e.Ctx, edited, client.MergeFrom(dd)); err != nil {
		t.Fatal(err)
	}
	e.Eventually(10*time.Second, "the DelayedDownscale's pass over its edit", func() (bool, error) {
		got, err := getDelayed(e, e.Admin)
		return err == nil && got.Status.ObservedGeneration == got.Generation, err
	})
	if deletes := pods.callsOf("DELETE"); len(deletes) > 0 {
		t.Errorf("pods %v told to cancel while the policy's status was of its spec before", deletes)
	}
	if got, _ := getDelayed(e, e.Admin); got.Status.PreparedCount != 2 {
		t.Errorf("status %s %q with %d pods prepared, want the 2 kept", got.Status.Phase, got.Status.Message, got.Status.PreparedCount)
	}

	// The policy's status catches up, with the desired replicas it already
	// said: pod 2 stays, and is told to cancel.
	setPolicyStatus(3, current)
	e.Eventually(10*time.Second, "the downscale to 3 followed: pod 2 cancelled", func() (bool, error) {
		got, err := getDelayed(e, e.Admin)
		return err == nil && got.Status.DesiredReplicas != nil && *got.Status.DesiredReplicas == 3 &&
			slices.Contains(pods.callsOf("DELETE"), podIP(2)), err
	})
}

// The API server refuses a bad DelayedDownscale with a message naming the field.
func TestDelayedDownscaleValidation(t *testing.T) {
	cp := controllertest.APIServer(t)
	ns, err := cp.CreateNamespace(t.Context(), "dd-validation")
	if err != nil {
		t.Fatal(err)
	}
	good := v1alpha1.DelayedDownscaleSpec{
		TargetRef: v1alpha1.ScalingTargetReference{Name: "ing"}, Delay: "4h",
		PrepareEndpoint: v1alpha1.PrepareEndpoint{Port: 8080, Path: "/ingester/prepare-partition-downscale"},
	}
	tests := []struct {
		name   string
		mutate func(*v1alpha1.DelayedDownscaleSpec)
		want   string // "" means accepted
	}{
		{"hours", func(*v1alpha1.DelayedDownscaleSpec) {}, ""},
		{"days and weeks, Prometheus style", func(s *v1alpha1.DelayedDownscaleSpec) { s.Delay = "1w2d" }, ""},
		{"a delay in words", func(s *v1alpha1.DelayedDownscaleSpec) { s.Delay = "4 hours" }, "spec.delay"},
		{"a negative delay", func(s *v1alpha1.DelayedDownscaleSpec) { s.Delay = "-4h" }, "spec.delay"},
		{"port 0", func(s *v1alpha1.DelayedDownscaleSpec) { s.PrepareEndpoint.Port = 0 }, "spec.prepareEndpoint.port"},
		{"a path without its slash", func(s *v1alpha1.DelayedDownscaleSpec) { s.PrepareEndpoint.Path = "prepare" }, "spec.prepareEndpoint.path"},
		{"an unknown scheme", func(s *v1alpha1.DelayedDownscaleSpec) { s.PrepareEndpoint.Scheme = "ftp" }, "spec.prepareEndpoint.scheme"},
		{"a target of another kind", func(s *v1alpha1.DelayedDownscaleSpec) { s.TargetRef.Kind = "Deployment" }, "spec.targetRef.kind"},
		{"https with a private CA and a server name", func(s *v1alpha1.DelayedDownscaleSpec) {
			s.PrepareEndpoint.Scheme = "https"
			s.PrepareEndpoint.TLS = &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "ingester-ca"}, ServerName: "*.ingester.mimir.svc"}
		}, ""},
		{"tls with scheme http", func(s *v1alpha1.DelayedDownscaleSpec) {
			s.PrepareEndpoint.Scheme = "http"
			s.PrepareEndpoint.TLS = &v1alpha1.TLSConfig{ServerName: "x"}
		}, "spec.prepareEndpoint: Invalid value: endpoint tls needs scheme https"},
		{"tls with the default scheme", func(s *v1alpha1.DelayedDownscaleSpec) {
			s.PrepareEndpoint.TLS = &v1alpha1.TLSConfig{ServerName: "x"}
		}, "endpoint tls needs scheme https"},
		{"insecureSkipVerify with a ConfigMap CA", func(s *v1alpha1.DelayedDownscaleSpec) {
			s.PrepareEndpoint.Scheme = "https"
			s.PrepareEndpoint.TLS = &v1alpha1.TLSConfig{InsecureSkipVerify: true, CAConfigMapRef: &v1alpha1.ConfigMapKeyReference{Name: "kube-root-ca.crt"}}
		}, "spec.prepareEndpoint.tls: Invalid value: tls.insecureSkipVerify verifies nothing"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := good
			tt.mutate(&spec)
			dd := &v1alpha1.DelayedDownscale{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("d%d", i)}, Spec: spec}
			err := cp.Client().Create(t.Context(), dd, client.DryRunAll)
			switch {
			case tt.want == "" && err != nil:
				t.Errorf("refused: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Errorf("error %v, want one containing %q", err, tt.want)
			}
		})
	}
}

// newScalingEnv runs the DelayedDownscale and ScalingPolicy controllers, which
// work together on a downscale, in a fresh namespace, reading tls blocks'
// objects through the watches the operator uses (httptls.Objects). Pods are
// called on their IPs: the tests' pods get loopback IPs that a test server
// answers on.
func newScalingEnv(t *testing.T) *controllertest.Env {
	t.Helper()
	e := controllertest.New(t, controllertest.Options{})
	tlsObjects, err := httptls.NewObjectsFor(e.Manager)
	if err != nil {
		t.Fatal(err)
	}
	if err := errors.Join(New(e.Manager, podcall.Addressing{PodAddressIP: true}).WithTLSObjects(tlsObjects).SetupWithManager(e.Manager),
		scalingpolicy.New(e.Manager).WithTLSObjects(tlsObjects).SetupWithManager(e.Manager)); err != nil {
		t.Fatal(err)
	}
	e.Start()
	return e
}

func TestMain(m *testing.M) { controllertest.Main(m) }
