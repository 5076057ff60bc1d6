package certs

// Self-signed certificates against a real API server (etcd and kube-apiserver),
// as an operator bound to the generated ClusterRole and to
// config/rbac/webhook_cert_role.yaml and nothing else.

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/test/controlplane"
)

const testSecret = "echelon-webhook-tls" // the name webhook_cert_role.yaml allows

// apiServer is etcd and kube-apiserver, started once per test binary.
var apiServer = controlplane.Shared{Options: controlplane.Options{APIServerOnly: true}}

func TestMain(m *testing.M) {
	code := m.Run()
	if err := apiServer.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "stop control plane: %v\n", err)
	}
	os.Exit(code)
}

// certEnv is one test's namespace, the operator's client and an admin client.
type certEnv struct {
	t        *testing.T
	ctx      context.Context
	ns       string
	operator kubernetes.Interface
	admin    kubernetes.Interface
	// grantPatch lets the operator patch a configuration of this name: the
	// generated RBAC limits patch to Echelon's own configurations, and the
	// tests name theirs per namespace.
	grantPatch func(name string) error
}

func newCertEnv(t *testing.T) *certEnv {
	t.Helper()
	cp := apiServer.Get(t)
	cp.DumpLogsOnFailure(t, 30)
	// The Providers log through the test, shown with -v or on failure.
	ctx := logr.NewContext(t.Context(), testr.New(t))
	ns := cp.NewNamespace(t)
	user, err := cp.NewOperatorUser(ctx, "echelon-certs-"+ns)
	if err != nil {
		t.Fatal(err)
	}
	if err := cp.GrantWebhookCerts(ctx, user.Name, ns); err != nil {
		t.Fatal(err)
	}
	return &certEnv{
		t: t, ctx: ctx, ns: ns,
		operator:   kubernetes.NewForConfigOrDie(user.Config),
		admin:      kubernetes.NewForConfigOrDie(cp.Config()),
		grantPatch: func(name string) error { return cp.GrantWebhookConfigurations(ctx, user.Name, name) },
	}
}

func (e *certEnv) options() SelfSignedOptions {
	return SelfSignedOptions{
		Namespace:    e.ns,
		SecretName:   testSecret,
		SANs:         ServingSANs("echelon-webhook", e.ns, "cluster.local", []string{"127.0.0.1"}),
		CertValidity: time.Hour,
		CAValidity:   10 * time.Hour,
	}
}

// providers returns n replicas' Providers, bootstrapped at the same moment.
func (e *certEnv) providers(n int, opts SelfSignedOptions) []*SelfSigned {
	e.t.Helper()
	ps := make([]*SelfSigned, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range ps {
		p, err := NewSelfSigned(e.operator, opts)
		if err != nil {
			e.t.Fatal(err)
		}
		ps[i] = p
		wg.Go(func() { errs[i] = p.Bootstrap(e.ctx) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		e.t.Fatal(err)
	}
	return ps
}

// start runs Start of each Provider until the test ends.
func (e *certEnv) start(ps ...*SelfSigned) {
	for _, p := range ps {
		ctx, cancel := context.WithCancel(e.ctx)
		done := make(chan error, 1)
		go func() { done <- p.Start(ctx) }()
		e.t.Cleanup(func() {
			cancel()
			if err := <-done; err != nil {
				e.t.Errorf("Start: %v", err)
			}
		})
	}
}

func (e *certEnv) secret() map[string][]byte {
	e.t.Helper()
	s, err := e.admin.CoreV1().Secrets(e.ns).Get(e.ctx, testSecret, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return s.Data
}

// webhook is a webhook that cannot affect anything else on the shared API
// server: it matches a resource that does not exist and is ignored on failure.
func webhook(name string) admissionv1.ValidatingWebhook {
	return admissionv1.ValidatingWebhook{
		Name:                    name,
		ClientConfig:            admissionv1.WebhookClientConfig{URL: ptr.To("https://127.0.0.1:1/" + name)},
		Rules:                   []admissionv1.RuleWithOperations{{Operations: []admissionv1.OperationType{admissionv1.Create}, Rule: admissionv1.Rule{APIGroups: []string{"certs.test.echelon.dev"}, APIVersions: []string{"v1"}, Resources: []string{"nothings"}}}},
		FailurePolicy:           ptr.To(admissionv1.Ignore),
		SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
		AdmissionReviewVersions: []string{"v1"},
	}
}

// createValidating creates a ValidatingWebhookConfiguration with the named
// webhooks, labelled for injection from this test's Secret if labelled.
func (e *certEnv) createValidating(name string, labelled bool, webhooks ...string) string {
	e.t.Helper()
	c := &admissionv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: e.ns + "-" + name}}
	if labelled {
		c.Labels = map[string]string{InjectCALabel: e.ns + "." + testSecret}
		if err := e.grantPatch(c.Name); err != nil {
			e.t.Fatal(err)
		}
	}
	for _, w := range webhooks {
		c.Webhooks = append(c.Webhooks, webhook(w))
	}
	api := e.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	if _, err := api.Create(e.ctx, c, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = api.Delete(context.Background(), c.Name, metav1.DeleteOptions{}) })
	return c.Name
}

func (e *certEnv) createMutating(name string, webhooks ...string) string {
	e.t.Helper()
	c := &admissionv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{
		Name:   e.ns + "-" + name,
		Labels: map[string]string{InjectCALabel: e.ns + "." + testSecret},
	}}
	if err := e.grantPatch(c.Name); err != nil {
		e.t.Fatal(err)
	}
	for _, w := range webhooks {
		v := webhook(w)
		c.Webhooks = append(c.Webhooks, admissionv1.MutatingWebhook{
			Name: v.Name, ClientConfig: v.ClientConfig, Rules: v.Rules, FailurePolicy: v.FailurePolicy,
			SideEffects: v.SideEffects, AdmissionReviewVersions: v.AdmissionReviewVersions,
		})
	}
	api := e.admin.AdmissionregistrationV1().MutatingWebhookConfigurations()
	if _, err := api.Create(e.ctx, c, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { _ = api.Delete(context.Background(), c.Name, metav1.DeleteOptions{}) })
	return c.Name
}

func (e *certEnv) validating(name string) *admissionv1.ValidatingWebhookConfiguration {
	e.t.Helper()
	c, err := e.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// validatingBundles are the caBundles of a configuration's webhooks.
func (e *certEnv) validatingBundles(name string) [][]byte {
	var b [][]byte
	for _, w := range e.validating(name).Webhooks {
		b = append(b, w.ClientConfig.CABundle)
	}
	return b
}

func (e *certEnv) mutatingBundles(name string) [][]byte {
	e.t.Helper()
	c, err := e.admin.AdmissionregistrationV1().MutatingWebhookConfigurations().Get(e.ctx, name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var b [][]byte
	for _, w := range c.Webhooks {
		b = append(b, w.ClientConfig.CABundle)
	}
	return b
}

func allEqual(bundles [][]byte, want []byte) bool {
	for _, b := range bundles {
		if !bytes.Equal(b, want) {
			return false
		}
	}
	return len(bundles) > 0
}

// TestBootstrapRace starts four replicas at once: one Secret, one certificate
// served by all.
func TestBootstrapRace(t *testing.T) {
	e := newCertEnv(t)
	ps := e.providers(4, e.options())
	data := e.secret()
	for i, p := range ps {
		cert, err := p.GetCertificate(nil)
		if err != nil {
			t.Fatalf("replica %d: %v", i, err)
		}
		if !bytes.Equal(cert.Certificate[0], firstCertDER(t, data[KeyServingCert])) {
			t.Errorf("replica %d serves %s, not the Secret's certificate", i, cert.Leaf.SerialNumber.Text(16))
		}
		if err := p.Check(nil); err != nil {
			t.Errorf("replica %d: Check: %v", i, err)
		}
	}
	s := ParseSecret(&corev1.Secret{Data: data})
	if plan := Decide(time.Now(), s, false, ps[0].policy); plan.Action != ActionNone {
		t.Errorf("the Secret the replicas agreed on still needs %s: %s", plan.Action, plan.Reason)
	}
	// A second start (a restart) reuses the Secret.
	again := e.providers(1, e.options())[0]
	cert, _ := again.GetCertificate(nil)
	if !bytes.Equal(cert.Certificate[0], firstCertDER(t, data[KeyServingCert])) {
		t.Error("a restarted replica serves another certificate than the Secret's")
	}
}

// TestInjection injects into every webhook of the labelled configurations,
// puts the bundle back when it is cleared or the webhooks replaced, leaves
// unlabelled ones alone, and patches only what differs.
func TestInjection(t *testing.T) {
	e := newCertEnv(t)
	labelled := e.createValidating("labelled", true, "a.certs.test", "b.certs.test")
	other := e.createValidating("other", true, "c.certs.test")
	mutating := e.createMutating("mutating", "m.certs.test")
	unlabelled := e.createValidating("unlabelled", false, "u.certs.test")
	p := e.providers(1, e.options())[0]
	e.start(p)
	bundle := e.secret()[KeyCABundle]
	injectedEverywhere := func() bool {
		return allEqual(e.validatingBundles(labelled), bundle) && allEqual(e.validatingBundles(other), bundle) &&
			allEqual(e.mutatingBundles(mutating), bundle)
	}
	eventually(t, 20*time.Second, "the bundle in every webhook of the labelled configurations", injectedEverywhere)
	if b := e.validatingBundles(unlabelled); len(b[0]) != 0 {
		t.Error("caBundle written into an unlabelled configuration")
	}

	// Someone clears one webhook's caBundle (as a helm upgrade rendering an
	// empty one does): it comes back.
	vwcs := e.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations()
	c := e.validating(labelled)
	c.Webhooks[1].ClientConfig.CABundle = nil
	if _, err := vwcs.Update(e.ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the cleared caBundle to come back", injectedEverywhere)

	// The webhooks replaced by new ones, as a chart upgrade may: injected too.
	c = e.validating(labelled)
	c.Webhooks = []admissionv1.ValidatingWebhook{webhook("d.certs.test")}
	if _, err := vwcs.Update(e.ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the bundle in the new webhook", injectedEverywhere)

	// A change that leaves caBundle alone is not answered with a patch. The
	// injector handles one configuration at a time, in the order of the
	// events: once the caBundle cleared after it is back, the first change
	// has been handled, so the count of patches is exact.
	before := p.inject[0].patches.Load()
	c = e.validating(labelled)
	c.Annotations = map[string]string{"touched": "yes"}
	if _, err := vwcs.Update(e.ctx, c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	o := e.validating(other)
	o.Webhooks[0].ClientConfig.CABundle = nil
	if _, err := vwcs.Update(e.ctx, o, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the second cleared caBundle to come back", injectedEverywhere)
	if got := p.inject[0].patches.Load() - before; got != 1 {
		t.Errorf("%d patches for one cleared caBundle and one unrelated change, want 1", got)
	}
}

// TestRotate renews the serving certificate on demand on one replica; the
// other serves the new one through its watch of the Secret.
func TestRotate(t *testing.T) {
	e := newCertEnv(t)
	ps := e.providers(2, e.options())
	e.start(ps...)
	before, _ := ps[1].GetCertificate(nil)
	rotations := metricValue(t, metrics.WebhookCertificateRotations)
	if err := ps[0].Rotate(e.ctx); err != nil {
		t.Fatal(err)
	}
	now, _ := ps[0].GetCertificate(nil)
	if now.Leaf.Equal(before.Leaf) {
		t.Fatal("Rotate returned with the old certificate still served")
	}
	if !now.Leaf.Equal(mustParse(t, e.secret()[KeyServingCert])) {
		t.Fatal("Rotate returned serving another certificate than the Secret's")
	}
	eventually(t, 20*time.Second, "the other replica to serve the new certificate", func() bool {
		c, _ := ps[1].GetCertificate(nil)
		return c.Leaf.Equal(now.Leaf)
	})
	if got := metricValue(t, metrics.WebhookCertificateRotations) - rotations; got != 2 {
		t.Errorf("rotations counted: %v, want 2 (one per replica)", got)
	}
	if got := metricValue(t, metrics.WebhookCertificateExpiry); got != float64(now.Leaf.NotAfter.Unix()) {
		t.Errorf("expiry metric %v, want %d", got, now.Leaf.NotAfter.Unix())
	}
}

// TestRotationUnderLoad runs two replicas with lifetimes of seconds while a
// client makes new TLS connections and HTTPS requests to both without pause,
// each verified with the bundle read from the injected configuration at that
// moment, through serving renewals, a CA renewal and the old CA's departure.
// Each request is made twice: with the bundle just read, and with the bundle
// read apiLag before, as the API server's informer may hold it. Not one may
// fail.
func TestRotationUnderLoad(t *testing.T) {
	// apiLag is under the Propagation of a 16s CA (16s/12).
	const apiLag = 500 * time.Millisecond
	e := newCertEnv(t)
	config := e.createValidating("rotation", true, "r.certs.test")
	opts := e.options()
	opts.CertValidity = 8 * time.Second
	opts.CAValidity = 16 * time.Second
	ps := e.providers(2, opts)
	e.start(ps...)
	firstBundle := e.secret()[KeyCABundle]
	eventually(t, 20*time.Second, "the first bundle to be injected", func() bool {
		return allEqual(e.validatingBundles(config), firstBundle)
	})
	addrs := []string{startTLSServer(t, ps[0].GetCertificate), startTLSServer(t, ps[1].GetCertificate)}

	var (
		mu       sync.Mutex
		requests int
		failures []string
		// serials[server][issuer] are the serving certificates seen, by CA.
		serials = []map[string]map[string]bool{{}, {}}
		issuers []string // CAs in the order first seen
		// bundleSizes are the sizes of the injected bundle, changes only.
		bundleSizes []int
	)
	ctx, stop := context.WithCancel(e.ctx)
	loopDone := make(chan struct{})
	go func() {
		defer close(loopDone)
		// read is the bundle read at each moment, to play an API server
		// whose informer is apiLag behind the configuration.
		type read struct {
			at   time.Time
			pool *x509.CertPool
		}
		var reads []read
		for ctx.Err() == nil {
			c, err := e.admin.AdmissionregistrationV1().ValidatingWebhookConfigurations().Get(ctx, config, metav1.GetOptions{})
			if err != nil {
				continue // the end of the test, or the API server busy: no TLS question
			}
			bundle := c.Webhooks[0].ClientConfig.CABundle
			cas, _ := parseCerts(bundle)
			fresh := x509.NewCertPool()
			fresh.AppendCertsFromPEM(bundle)
			now := time.Now()
			reads = append(reads, read{at: now, pool: fresh})
			for len(reads) > 1 && !reads[1].at.After(now.Add(-apiLag)) {
				reads = reads[1:]
			}
			pools := map[string]*x509.CertPool{"fresh": fresh, "stale": reads[0].pool}
			for i, addr := range addrs {
				for which, pool := range pools {
					leaf, err := httpsGet(ctx, addr, pool)
					mu.Lock()
					switch {
					case ctx.Err() != nil:
					case err != nil:
						requests++
						failures = append(failures, fmt.Sprintf("server %d, %s bundle: %v", i, which, err))
					default:
						requests++
						issuer := leaf.Issuer.CommonName
						if serials[i][issuer] == nil {
							serials[i][issuer] = map[string]bool{}
						}
						serials[i][issuer][leaf.SerialNumber.Text(16)] = true
						if len(issuers) == 0 || issuers[len(issuers)-1] != issuer {
							issuers = append(issuers, issuer)
						}
					}
					if n := len(bundleSizes); n == 0 || bundleSizes[n-1] != len(cas) {
						bundleSizes = append(bundleSizes, len(cas))
					}
					mu.Unlock()
				}
			}
		}
	}()

	// Done once both servers presented two certificates of the first CA (a
	// serving renewal), then one of a second CA (a CA renewal), and the
	// bundle went from one CA to two and back to one (the old CA dropped).
	start := time.Now()
	eventually(t, 50*time.Second, "a serving renewal, a CA renewal and the old CA dropped", func() bool {
		mu.Lock()
		defer mu.Unlock()
		if len(issuers) < 2 || len(bundleSizes) < 3 || bundleSizes[0] != 1 || bundleSizes[1] != 2 || bundleSizes[2] != 1 {
			return false
		}
		for i := range serials {
			if len(serials[i][issuers[0]]) < 2 || len(serials[i][issuers[1]]) < 1 {
				return false
			}
		}
		return true
	})
	stop()
	<-loopDone
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d HTTPS requests over new connections in %s, CAs in order %v, injected bundle sizes %v, serving certificates per server and CA %v",
		requests, time.Since(start).Round(time.Millisecond), issuers, bundleSizes, counts(serials))
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed; first: %v", len(failures), requests, failures[:min(5, len(failures))])
	}
	for i, p := range ps {
		if err := p.Check(nil); err != nil {
			t.Errorf("replica %d: Check: %v", i, err)
		}
	}
}

// httpsGet makes a new connection to addr, trusting pool, and returns the
// certificate the server presented.
func httpsGet(ctx context.Context, addr string, pool *x509.CertPool) (*x509.Certificate, error) {
	client := &http.Client{
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12},
			DisableKeepAlives: true,
		},
		Timeout: 5 * time.Second,
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/", nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK || string(body) != "ok" {
		return nil, fmt.Errorf("answer %d %q", resp.StatusCode, body)
	}
	return resp.TLS.PeerCertificates[0], nil
}

func counts(serials []map[string]map[string]bool) []map[string]int {
	var out []map[string]int
	for _, byCA := range serials {
		m := map[string]int{}
		for ca, s := range byCA {
			m[ca] = len(s)
		}
		out = append(out, m)
	}
	return out
}

func mustParse(t *testing.T, pemData []byte) *x509.Certificate {
	t.Helper()
	certs, err := parseCerts(pemData)
	if err != nil {
		t.Fatal(err)
	}
	return certs[0]
}

func firstCertDER(t *testing.T, pemData []byte) []byte { return mustParse(t, pemData).Raw }

// metricValue reads a gauge or counter.
func metricValue(t *testing.T, m prometheus.Metric) float64 {
	t.Helper()
	var out dto.Metric
	if err := m.Write(&out); err != nil {
		t.Fatal(err)
	}
	if out.Counter != nil {
		return out.Counter.GetValue()
	}
	return out.Gauge.GetValue()
}

// TestRotateCA starts a CA rotation on demand: the serving certificate moves
// to the new CA only after the bundle with both CAs is injected, and a
// serving renewal asked for meanwhile is refused.
func TestRotateCA(t *testing.T) {
	e := newCertEnv(t)
	config := e.createValidating("rotate-ca", true, "ca.certs.test")
	opts := e.options()
	opts.Propagation = 2 * time.Second
	ps := e.providers(2, opts)
	e.start(ps...)
	first := mustParse(t, e.secret()[KeyCABundle])
	eventually(t, 20*time.Second, "the first bundle to be injected", func() bool {
		return allEqual(e.validatingBundles(config), e.secret()[KeyCABundle])
	})
	data, bundle := e.rotateCA(ps[0], first)
	if mustParse(t, data[KeyServingCert]).CheckSignatureFrom(first) != nil {
		t.Fatal("the serving certificate moved to the new CA at once")
	}
	if err := ps[1].Rotate(e.ctx); err == nil {
		t.Error("Rotate during a CA rotation succeeded")
	}
	eventually(t, 20*time.Second, "both replicas to serve a certificate of the new CA, its bundle injected", allServeCertificatesOf(ps, bundle[0]))
	if !allEqual(e.validatingBundles(config), data[KeyCABundle]) {
		t.Error("a replica serves the new CA's certificate while the configuration lacks the new bundle")
	}
	secret, err := e.admin.CoreV1().Secrets(e.ns).Get(e.ctx, testSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ParseSecret(secret).InjectedAt.IsZero() {
		t.Error("no injection recorded on the Secret")
	}
}
