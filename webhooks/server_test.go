package webhooks

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/echelon-operator/echelon/internal/metrics"
	"github.com/echelon-operator/echelon/webhooks/webhookstest"
)

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
	certs, err := webhookstest.NewCertificate()
	if err != nil {
		t.Fatal(err)
	}
	pool := certs.Pool
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

	certs.Break()
	if err := health(nil); err == nil {
		t.Error("healthy with a certificate source that reports no valid certificate")
	}
}
