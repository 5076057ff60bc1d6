package httptls_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/httptls"
	"github.com/echelon-operator/echelon/internal/httptls/httptlstest"
)

const (
	ns    = "mimir"
	field = "spec.analysis.checks[consul].http.tls"
)

func newCA(t *testing.T, name string) *httptlstest.CA {
	t.Helper()
	ca, err := httptlstest.NewCA(name)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func newServer(t *testing.T, pair httptlstest.Pair, clientCAs *httptlstest.CA) *httptlstest.Server {
	t.Helper()
	s, err := httptlstest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"ok":true}`))
	}), pair, clientCAs)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func serverPair(t *testing.T, ca *httptlstest.CA, hosts ...string) httptlstest.Pair {
	t.Helper()
	p, err := ca.Server(hosts...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func caSecret(name string, pem []byte) *corev1.Secret { return httptlstest.CASecret(ns, name, pem) }

// call loads spec, takes the client for it from transports and GETs url.
func call(t *testing.T, c client.Reader, transports *httptls.Transports, spec *v1alpha1.TLSConfig, url string) error {
	t.Helper()
	return callIn(t, c, ns, transports, spec, url)
}

// callIn is call with spec in namespace.
func callIn(t *testing.T, c client.Reader, namespace string, transports *httptls.Transports, spec *v1alpha1.TLSConfig, url string) error {
	t.Helper()
	m, err := httptls.Load(context.Background(), c, namespace, spec, field)
	if err != nil {
		return err
	}
	hc, err := transports.Client(&http.Client{}, m, nil)
	if err != nil {
		return err
	}
	resp, err := hc.Get(url)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

func TestPrivateCA(t *testing.T) {
	ca := newCA(t, "consul-ca")
	srv := newServer(t, serverPair(t, ca, "127.0.0.1"), nil)
	c := fake.NewClientBuilder().WithObjects(caSecret("consul-ca", ca.PEM),
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "kube-root-ca.crt"}, Data: map[string]string{"ca.crt": string(ca.PEM)}}).Build()
	tests := []struct {
		name string
		spec *v1alpha1.TLSConfig
		want string // "" succeeds
	}{
		{name: "without tls the system's authorities do not know the CA", want: "certificate signed by unknown authority"},
		{name: "an empty tls block trusts the system's authorities too", spec: &v1alpha1.TLSConfig{}, want: "certificate signed by unknown authority"},
		{name: "the CA from a Secret", spec: &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "consul-ca"}}},
		{name: "the CA from a ConfigMap", spec: &v1alpha1.TLSConfig{CAConfigMapRef: &v1alpha1.ConfigMapKeyReference{Name: "kube-root-ca.crt"}}},
		{name: "insecureSkipVerify", spec: &v1alpha1.TLSConfig{InsecureSkipVerify: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := call(t, c, httptls.NewTransports(0), tt.spec, srv.URL)
			checkErr(t, err, tt.want)
		})
	}
}

func TestServerName(t *testing.T) {
	ca := newCA(t, "mesh-ca")
	// The certificate names the service, not the loopback address called.
	srv := newServer(t, serverPair(t, ca, "consul.service.consul"), nil)
	c := fake.NewClientBuilder().WithObjects(caSecret("mesh-ca", ca.PEM)).Build()
	ref := &v1alpha1.SecretKeyReference{Name: "mesh-ca"}
	tests := []struct {
		name       string
		serverName string
		want       string
	}{
		{name: "the URL's host is not in the certificate", want: "doesn't contain any IP SANs"},
		{name: "serverName names the certificate's host", serverName: "consul.service.consul"},
		{name: "serverName naming another host", serverName: "vault.service.consul", want: "certificate is valid for consul.service.consul, not vault.service.consul"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := call(t, c, httptls.NewTransports(0), &v1alpha1.TLSConfig{CASecretRef: ref, ServerName: tt.serverName}, srv.URL)
			checkErr(t, err, tt.want)
		})
	}
}

func TestClientCertificate(t *testing.T) {
	ca := newCA(t, "mtls-ca")
	srv := newServer(t, serverPair(t, ca, "127.0.0.1"), ca)
	client, err := ca.Client("echelon")
	if err != nil {
		t.Fatal(err)
	}
	other, err := newCA(t, "untrusted").Client("echelon")
	if err != nil {
		t.Fatal(err)
	}
	tlsSecret := func(name string, p httptlstest.Pair) *corev1.Secret {
		return httptlstest.TLSSecret(ns, name, p.CertPEM, p.KeyPEM)
	}
	c := fake.NewClientBuilder().WithObjects(caSecret("mtls-ca", ca.PEM), tlsSecret("echelon-client", client), tlsSecret("stranger", other)).Build()
	ref := &v1alpha1.SecretKeyReference{Name: "mtls-ca"}
	tests := []struct {
		name   string
		client string
		want   string
	}{
		{name: "no client certificate", want: "certificate required"},
		{name: "the client certificate the server's CA signed", client: "echelon-client"},
		// Go sends only a certificate the server's CAs signed: none here.
		{name: "a client certificate of another CA", client: "stranger", want: "certificate required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &v1alpha1.TLSConfig{CASecretRef: ref}
			if tt.client != "" {
				spec.ClientCertSecretRef = &v1alpha1.LocalSecretReference{Name: tt.client}
			}
			checkErr(t, call(t, c, httptls.NewTransports(0), spec, srv.URL), tt.want)
		})
	}
}

// A rotated CA Secret is used on the next call, with no restart: the
// transports are keyed by content, and the stale one ages out.
func TestRotation(t *testing.T) {
	oldCA, newCA := newCA(t, "ca-2025"), newCA(t, "ca-2026")
	srv := newServer(t, serverPair(t, oldCA, "127.0.0.1"), nil)
	c := fake.NewClientBuilder().WithObjects(caSecret("ca", oldCA.PEM)).Build()
	spec := &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "ca"}}
	transports := httptls.NewTransports(0)
	checkErr(t, call(t, c, transports, spec, srv.URL), "")
	checkErr(t, call(t, c, transports, spec, srv.URL), "")
	if n := transports.Len(); n != 1 {
		t.Fatalf("%d transports after two calls with the same CA, want 1", n)
	}

	// The server rotates first: the old CA no longer verifies it.
	if err := srv.Serve(serverPair(t, newCA, "127.0.0.1")); err != nil {
		t.Fatal(err)
	}
	srv.CloseClientConnections()
	checkErr(t, call(t, c, transports, spec, srv.URL), "certificate signed by unknown authority")

	// Then the Secret: the next call trusts the new CA.
	secret := &corev1.Secret{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "ca"}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Data["ca.crt"] = newCA.PEM
	if err := c.Update(context.Background(), secret); err != nil {
		t.Fatal(err)
	}
	checkErr(t, call(t, c, transports, spec, srv.URL), "")
	if n := transports.Len(); n != 2 {
		t.Fatalf("%d transports after a rotation, want 2", n)
	}
}

// A transport unused for the idle time goes at the next call (its block
// was rotated or edited away); one in use stays, whatever the count.
func TestTransportsExpireUnused(t *testing.T) {
	now := time.Unix(0, 0)
	transports := httptls.NewTransports(time.Minute)
	transports.SetClock(func() time.Time { return now })
	use := func(name string) *http.Transport {
		t.Helper()
		tr, err := transports.Transport(&httptls.Material{ServerName: name})
		if err != nil {
			t.Fatal(err)
		}
		return tr
	}
	a := use("a")
	use("b")
	now = now.Add(40 * time.Second)
	if use("a") != a {
		t.Error("the same material got two transports")
	}
	use("c")
	if n := transports.Len(); n != 3 {
		t.Fatalf("%d transports kept, want 3: all used within the idle time", n)
	}
	now = now.Add(30 * time.Second) // b idle for 70 s, a and c for 30 s
	use("c")
	if n := transports.Len(); n != 2 {
		t.Fatalf("%d transports kept, want 2: b unused for longer than the idle time", n)
	}
	now = now.Add(2 * time.Minute)
	use("d")
	if n := transports.Len(); n != 1 {
		t.Fatalf("%d transports kept, want only d's", n)
	}
}

// Every error names the field at fault.
func TestLoadErrors(t *testing.T) {
	forbidden := interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
		if key.Name == "locked" {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, key.Name, nil)
		}
		return c.Get(ctx, key, obj, opts...)
	}}
	c := fake.NewClientBuilder().WithInterceptorFuncs(forbidden).WithObjects(
		caSecret("ca", []byte("not PEM")),
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "opaque"}, Data: map[string][]byte{"token": []byte("x")}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "half"}, Data: map[string][]byte{"tls.crt": []byte("x"), "tls.key": []byte("y")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bundle"}, Data: map[string]string{"other.pem": "x"}},
	).Build()
	tests := []struct {
		name string
		spec *v1alpha1.TLSConfig
		want string
	}{
		{name: "a missing Secret", spec: &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "gone"}},
			want: field + ".caSecretRef: Secret gone not found in namespace mimir"},
		{name: "a Secret the operator may not read", spec: &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "locked"}},
			want: field + ".caSecretRef: the operator may not read Secret locked in namespace mimir: grant it get on Secrets there (Helm value rbac.analysisSecretNamespaces)"},
		{name: "a missing key", spec: &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "opaque"}},
			want: field + ".caSecretRef: Secret opaque has no key ca.crt"},
		{name: "a key holding no PEM", spec: &v1alpha1.TLSConfig{CASecretRef: &v1alpha1.SecretKeyReference{Name: "ca"}},
			want: field + ".caSecretRef: holds no PEM certificate"},
		{name: "a missing ConfigMap", spec: &v1alpha1.TLSConfig{CAConfigMapRef: &v1alpha1.ConfigMapKeyReference{Name: "kube-root-ca.crt"}},
			want: field + ".caConfigMapRef: ConfigMap kube-root-ca.crt not found in namespace mimir"},
		{name: "a ConfigMap without the key", spec: &v1alpha1.TLSConfig{CAConfigMapRef: &v1alpha1.ConfigMapKeyReference{Name: "bundle", Key: "ca.pem"}},
			want: field + ".caConfigMapRef: ConfigMap bundle has no key ca.pem"},
		{name: "a client Secret that is no TLS Secret", spec: &v1alpha1.TLSConfig{ClientCertSecretRef: &v1alpha1.LocalSecretReference{Name: "opaque"}},
			want: field + ".clientCertSecretRef: Secret opaque needs keys tls.crt and tls.key"},
		{name: "a client key pair that does not parse", spec: &v1alpha1.TLSConfig{ClientCertSecretRef: &v1alpha1.LocalSecretReference{Name: "half"}},
			want: field + ".clientCertSecretRef: tls.crt and tls.key are no certificate and matching key"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			checkErr(t, call(t, c, httptls.NewTransports(0), tt.spec, "https://127.0.0.1:1"), tt.want)
		})
	}
}

func checkErr(t *testing.T, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Fatalf("failed: %v", err)
	case want != "" && err == nil:
		t.Fatalf("succeeded, want an error containing %q", want)
	case want != "" && !strings.Contains(err.Error(), want):
		t.Fatalf("error %q, want one containing %q", err, want)
	}
}

// The process's transports keep one per tls block in use however many
// there are: a tenant's CA is not rebuilt, nor its connections lost, because
// others were used since (a fixed bound of 64 rebuilt every one of 100
// blocks called in turn).
func TestDefaultTransportsFollowUse(t *testing.T) {
	const blocks = 100
	first := make([]*http.Transport, blocks)
	for round := range 3 {
		for i := range blocks {
			tr, err := httptls.Default.Transport(&httptls.Material{ServerName: fmt.Sprintf("tenant-%d.svc", i)})
			if err != nil {
				t.Fatal(err)
			}
			if round == 0 {
				first[i] = tr
			} else if tr != first[i] {
				t.Fatalf("round %d: block %d got a new transport, want the one built in round 0", round, i)
			}
		}
	}
}
