package certs

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// startTLSServer serves HTTPS on loopback with getCert and returns its address.
func startTLSServer(t *testing.T, getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, _ = w.Write([]byte("ok"))
		}),
		ReadHeaderTimeout: 5 * time.Second,
		// Handshakes cut short by a closing test are no news.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	tl := tls.NewListener(l, &tls.Config{GetCertificate: getCert, MinVersion: tls.VersionTLS12})
	go func() { _ = srv.Serve(tl) }()
	t.Cleanup(func() { _ = srv.Close() })
	return l.Addr().String()
}

// presented is the certificate the server at addr presents in a new handshake.
func presented(t *testing.T, addr string) *x509.Certificate {
	t.Helper()
	// Which certificate is presented is the question here, not whether it is trusted.
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec
	if err != nil {
		t.Fatalf("handshake with %s: %v", addr, err)
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0]
}

func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %s waiting for %s", timeout, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// writeFiles writes the certificate and key of kp into dir.
func writeFiles(t *testing.T, dir string, kp *keyPair) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.key"), kp.KeyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tls.crt"), kp.CertPEM, 0o600); err != nil {
		t.Fatal(err)
	}
}

// swapData points dir/..data at dir/<version> the way the kubelet updates a
// mounted Secret: a new directory, a new symlink renamed over the old one, and
// the old directory removed.
func swapData(t *testing.T, dir, version string, kp *keyPair) {
	t.Helper()
	writeFiles(t, filepath.Join(dir, version), kp)
	old, _ := os.Readlink(filepath.Join(dir, "..data"))
	tmp := filepath.Join(dir, "..data_tmp")
	if err := os.Symlink(version, tmp); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if old != "" {
		if err := os.RemoveAll(filepath.Join(dir, old)); err != nil {
			t.Fatal(err)
		}
	}
}

func newTestServing(t *testing.T) *keyPair {
	t.Helper()
	now := time.Now()
	return mustServing(t, now, mustCA(t, now, time.Hour), testSANs)
}

func startFiles(t *testing.T, f *Files) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	if err := f.Bootstrap(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- f.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Start: %v", err)
		}
	})
}

// TestFilesMountedSecret follows a Secret mounted by the kubelet, updated the
// way cert-manager's renewals reach a pod: a symlink swap.
func TestFilesMountedSecret(t *testing.T) {
	dir := t.TempDir()
	first, second := newTestServing(t), newTestServing(t)
	swapData(t, dir, "..v1", first)
	for _, name := range []string{"tls.crt", "tls.key"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	f := NewFiles(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err := f.Check(nil); err == nil {
		t.Error("Check passes before a certificate is loaded")
	}
	if _, err := f.GetCertificate(nil); err == nil {
		t.Error("GetCertificate answers before a certificate is loaded")
	}
	startFiles(t, f)
	if err := f.Check(nil); err != nil {
		t.Errorf("Check with a valid certificate: %v", err)
	}
	addr := startTLSServer(t, f.GetCertificate)
	if got := presented(t, addr); !got.Equal(first.Cert) {
		t.Fatalf("presents %s, want the first certificate %s", got.SerialNumber, first.Cert.SerialNumber)
	}
	swapData(t, dir, "..v2", second)
	eventually(t, 15*time.Second, "the swapped-in certificate to be presented", func() bool {
		return presented(t, addr).Equal(second.Cert)
	})
}

// TestFilesRewritten follows plain files rewritten in place, and Rotate's
// re-read: the next handshake after it presents the new certificate.
func TestFilesRewritten(t *testing.T) {
	dir := t.TempDir()
	first, second, third := newTestServing(t), newTestServing(t), newTestServing(t)
	writeFiles(t, dir, first)
	f := NewFiles(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	startFiles(t, f)
	addr := startTLSServer(t, f.GetCertificate)
	if got := presented(t, addr); !got.Equal(first.Cert) {
		t.Fatalf("presents %s, want the first certificate", got.SerialNumber)
	}
	writeFiles(t, dir, second)
	eventually(t, 15*time.Second, "the rewritten certificate to be presented", func() bool {
		return presented(t, addr).Equal(second.Cert)
	})
	writeFiles(t, dir, third)
	if err := f.Rotate(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := presented(t, addr); !got.Equal(third.Cert) {
		t.Fatalf("first handshake after Rotate presents %s, want the third certificate %s", got.SerialNumber, third.Cert.SerialNumber)
	}
}

func TestFilesCheckExpired(t *testing.T) {
	dir := t.TempDir()
	past := time.Now().Add(-3 * time.Hour)
	expiredPair, err := newServing(past, time.Hour, mustCA(t, past, 2*time.Hour), testSANs)
	if err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, expiredPair)
	f := NewFiles(filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key"))
	if err := f.Bootstrap(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := f.Check(nil); err == nil {
		t.Error("Check passes with an expired certificate")
	}

	missing := NewFiles(filepath.Join(dir, "nope.crt"), filepath.Join(dir, "nope.key"))
	if err := missing.Bootstrap(context.Background()); err == nil || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Bootstrap with missing files: %v, want a not-exist error", err)
	}
}
