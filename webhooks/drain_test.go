package webhooks

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/echelon-operator/echelon/internal/httptls/httptlstest"
)

// staticCert serves one certificate.
type staticCert struct{ cert tls.Certificate }

func (s staticCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return &s.cert, nil
}
func (staticCert) Check(*http.Request) error { return nil }

// TestServerDrainsBeforeItStops starts the webhook server as the operator
// does, stops it, and checks that it goes on answering while requests keep
// coming, each answer closing its connection (so that the API server never
// writes a request on a connection the server is closing), and stops once
// they stop.
func TestServerDrainsBeforeItStops(t *testing.T) {
	ca, err := httptlstest.NewCA("drain")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Server("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cert, err := pair.TLS()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := newDrainingServer(NewServer("127.0.0.1", port, staticCert{cert}))
	srv.quiet, srv.most = 300*time.Millisecond, 5*time.Second
	srv.Register("/hook", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprint(w, "ok") }))

	ctx, stop := context.WithCancel(context.Background())
	stopped := make(chan error, 1)
	go func() { stopped <- srv.Start(ctx) }()
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}}}
	url := fmt.Sprintf("https://127.0.0.1:%d/hook", port)
	get := func() *http.Response {
		t.Helper()
		var resp *http.Response
		deadline := time.Now().Add(10 * time.Second)
		for {
			resp, err = c.Post(url, "application/json", nil)
			if err == nil || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("POST %s: %v", url, err)
		}
		resp.Body.Close()
		return resp
	}
	if resp := get(); resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("serving: status %d, Connection: close %v; want 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}

	stop()
	// Requests every 100 ms, under the quiet period: the server drains.
	began := time.Now()
	for range 8 {
		time.Sleep(100 * time.Millisecond)
		if resp := get(); resp.StatusCode != http.StatusOK || !resp.Close {
			t.Fatalf("draining: status %d, Connection: close %v; want 200 closing the connection", resp.StatusCode, resp.Close)
		}
	}
	select {
	case err := <-stopped:
		t.Fatalf("the server stopped %v after the stop began, while requests still came: %v", time.Since(began), err)
	default:
	}
	select {
	case err := <-stopped:
		if err != nil {
			t.Fatalf("Start: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop once requests stopped")
	}
}
