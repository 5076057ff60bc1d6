package httptlstest

import (
	"crypto/tls"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"

	"github.com/echelon-operator/echelon/internal/httptls"
)

// Server is an https server on loopback whose certificate can be swapped
// (a rotation) and that may require client certificates.
type Server struct {
	*httptest.Server
	cert atomic.Pointer[tls.Certificate]
}

// NewServer serves handler over https with pair, requiring a client
// certificate clientCAs signed when clientCAs is not nil. Close it.
func NewServer(handler http.Handler, pair Pair, clientCAs *CA) (*Server, error) {
	s := &Server{Server: httptest.NewUnstartedServer(handler)}
	if err := s.Serve(pair); err != nil {
		return nil, err
	}
	// Not StartTLS: it would put its own certificate first, and serve it to
	// clients that send no server name (all that dial an IP).
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) { return s.cert.Load(), nil }}
	if clientCAs != nil {
		cfg.ClientAuth, cfg.ClientCAs = tls.RequireAndVerifyClientCert, clientCAs.Pool()
	}
	// The handshakes a test means to fail are not news.
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.Listener = tls.NewListener(s.Listener, cfg)
	s.Start()
	s.URL = strings.Replace(s.URL, "http://", "https://", 1)
	return s, nil
}

// Serve makes the server present pair from the next handshake on.
func (s *Server) Serve(pair Pair) error {
	cert, err := pair.TLS()
	if err != nil {
		return err
	}
	s.cert.Store(&cert)
	return nil
}

// MutualTLS is an https server on 127.0.0.1 that a private CA signed and
// that requires a client certificate of the same CA, with the material that
// calls it: what tests of the callers (http checks, hooks, pod calls) need
// to show that a tls block reaches their requests.
type MutualTLS struct {
	*Server
	// Material trusts the CA and presents a client certificate.
	Material *httptls.Material
}

// NewMutualTLS serves handler as MutualTLS says. Close it.
func NewMutualTLS(handler http.Handler) (*MutualTLS, error) {
	ca, err := NewCA("test-ca")
	if err != nil {
		return nil, err
	}
	serving, err := ca.Server("127.0.0.1")
	if err != nil {
		return nil, err
	}
	client, err := ca.Client("echelon")
	if err != nil {
		return nil, err
	}
	srv, err := NewServer(handler, serving, ca)
	if err != nil {
		return nil, err
	}
	return &MutualTLS{Server: srv, Material: &httptls.Material{Field: "spec.test.tls", CAPEM: ca.PEM, CertPEM: client.CertPEM, KeyPEM: client.KeyPEM}}, nil
}
