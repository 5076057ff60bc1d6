package webhooks

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/echelon-operator/echelon/internal/metrics"
)

// staticCertificates serves one certificate; broken makes Check fail.
type staticCertificates struct {
	cert   *tls.Certificate
	broken atomic.Bool
}

func (s *staticCertificates) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return s.cert, nil
}

func (s *staticCertificates) Check(*http.Request) error {
	if s.broken.Load() {
		return errors.New("expired")
	}
	return nil
}

// selfSignedFor makes a certificate for 127.0.0.1 and the pool that trusts it.
func selfSignedFor(t *testing.T) (*tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "echelon-webhook-test"},
		NotBefore: time.Now().Add(-time.Minute), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestServer: the HTTPS server serves a registered webhook over TLS 1.2 or
// later and HTTP/1.1, and its health check follows the server and the
// certificate.
func TestServer(t *testing.T) {
	g := NewWithT(t)
	cert, pool := selfSignedFor(t)
	certs := &staticCertificates{cert: cert}
	port := freePort(t)
	srv := NewServer("127.0.0.1", port, certs)
	srv.Register(PathNoDownscale, handler(metrics.WebhookNoDownscale, &NoDownscale{Cluster: &fakeCluster{}}, nil))
	health := HealthCheck(srv, certs)
	if err := health(nil); err == nil {
		t.Fatal("healthy before the server started")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	g.Eventually(func() error { return health(nil) }, 10*time.Second, 10*time.Millisecond).Should(Succeed())

	url := "https://127.0.0.1:" + strconv.Itoa(port) + PathNoDownscale + "?timeout=10s"
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}, ForceAttemptHTTP2: true}}
	resp, err := client.Post(url, "application/json", bytes.NewReader(stsUpdate("a", 3, 2).review()))
	if err != nil {
		t.Fatal(err)
	}
	var review admissionv1.AdmissionReview
	if err := json.NewDecoder(resp.Body).Decode(&review); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if review.Response == nil || !review.Response.Allowed || resp.TLS.Version < tls.VersionTLS12 || resp.Proto != "HTTP/1.1" {
		t.Errorf("answer %+v over %s TLS %x, want allowed over HTTP/1.1 and TLS 1.2+", review.Response, resp.Proto, resp.TLS.Version)
	}

	old := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MaxVersion: tls.VersionTLS11}}}
	if resp, err := old.Post(url, "application/json", bytes.NewReader(nil)); err == nil {
		resp.Body.Close()
		t.Error("a TLS 1.1 client was served")
	}

	certs.broken.Store(true)
	if err := health(nil); err == nil {
		t.Error("healthy with a certificate source that reports no valid certificate")
	}
}
