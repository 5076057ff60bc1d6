package httptls

import (
	"container/list"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/echelon-operator/echelon/internal/egress"
)

// DefaultMaxTransports bounds the transports Default keeps: one per distinct
// tls block in use (most clusters have a handful), with room for rotations.
const DefaultMaxTransports = 64

// Default is the process's transports, shared by http gate checks, hooks
// and pod calls.
var Default = NewTransports(DefaultMaxTransports)

// Transports keeps one *http.Transport per distinct Material, the least
// recently used dropped (its idle connections closed) past max. The key is
// a digest of the material's content, so a rotated CA or client certificate
// gets a new transport on the first call after the rotation, and the old
// one ages out.
type Transports struct {
	mu      sync.Mutex
	max     int
	order   *list.List // of *entry, most recently used first
	entries map[[sha256.Size]byte]*list.Element
}

type entry struct {
	key       [sha256.Size]byte
	transport *http.Transport
}

// NewTransports keeps at most limit transports (at least 1).
func NewTransports(limit int) *Transports {
	return &Transports{max: max(limit, 1), order: list.New(), entries: map[[sha256.Size]byte]*list.Element{}}
}

// Len is how many transports are kept.
func (t *Transports) Len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.order.Len()
}

// Client returns a copy of base with the transport of m, wrapped by wrap
// when wrap is not nil (a caller's metrics). When m is nil the copy keeps
// base's transport, or has the guarded Plain one when base has none. The
// copy keeps base's timeout and redirect policy; without one, redirects
// stay on the first host (egress.CheckRedirect).
func (t *Transports) Client(base *http.Client, m *Material, wrap func(http.RoundTripper) http.RoundTripper) (*http.Client, error) {
	c := *base
	if c.CheckRedirect == nil {
		c.CheckRedirect = egress.CheckRedirect
	}
	if m == nil {
		if c.Transport == nil {
			c.Transport = Plain()
		}
		return &c, nil
	}
	tr, err := t.Transport(m)
	if err != nil {
		return nil, err
	}
	c.Transport = tr
	if wrap != nil {
		c.Transport = wrap(tr)
	}
	return &c, nil
}

// Transport returns the transport of m, building it on first use. The
// error names the field whose content cannot be used.
func (t *Transports) Transport(m *Material) (*http.Transport, error) {
	key := digest(m)
	t.mu.Lock()
	if el, ok := t.entries[key]; ok {
		t.order.MoveToFront(el)
		t.mu.Unlock()
		return el.Value.(*entry).transport, nil
	}
	t.mu.Unlock()
	// Build outside the lock: parsing is the slow part, and two callers
	// racing build twice and keep one.
	tr, err := build(m)
	if err != nil {
		return nil, err
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if el, ok := t.entries[key]; ok {
		t.order.MoveToFront(el)
		return el.Value.(*entry).transport, nil
	}
	t.entries[key] = t.order.PushFront(&entry{key: key, transport: tr})
	for t.order.Len() > t.max {
		oldest := t.order.Back()
		t.order.Remove(oldest)
		e := oldest.Value.(*entry)
		delete(t.entries, e.key)
		e.transport.CloseIdleConnections()
	}
	return tr, nil
}

// digest identifies a material by everything a transport is built from.
func digest(m *Material) [sha256.Size]byte {
	h := sha256.New()
	for _, part := range [][]byte{m.CAPEM, m.CertPEM, m.KeyPEM, []byte(m.ServerName), []byte(fmt.Sprint(m.InsecureSkipVerify))} {
		fmt.Fprintf(h, "%d:", len(part))
		h.Write(part)
	}
	var out [sha256.Size]byte
	h.Sum(out[:0])
	return out
}

// Config is the *tls.Config of m. The error names the field whose content
// is no PEM certificate or key pair.
func Config(m *Material) (*tls.Config, error) {
	cfg := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ServerName:         m.ServerName,
		InsecureSkipVerify: m.InsecureSkipVerify, //nolint:gosec // the user's explicit choice, documented as for tests only
	}
	if len(m.CAPEM) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(m.CAPEM) {
			return nil, fmt.Errorf("%s: holds no PEM certificate", fieldOr(m.CAField, m.Field))
		}
		cfg.RootCAs = pool
	}
	if len(m.CertPEM) > 0 || len(m.KeyPEM) > 0 {
		pair, err := tls.X509KeyPair(m.CertPEM, m.KeyPEM)
		if err != nil {
			return nil, fmt.Errorf("%s.clientCertSecretRef: tls.crt and tls.key are no certificate and matching key: %w", m.Field, err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	return cfg, nil
}

func build(m *Material) (*http.Transport, error) {
	cfg, err := Config(m)
	if err != nil {
		return nil, err
	}
	return NewTransport(cfg), nil
}

// NewTransport is a transport with net/http's defaults (timeouts, HTTP/2,
// the proxy of the environment) whose every connection goes through the
// process's egress guard: built with tlsConfig (nil for the system's
// authorities). Every transport that calls a URL a user wrote is one.
func NewTransport(tlsConfig *tls.Config) *http.Transport {
	tr := &http.Transport{}
	if base, ok := http.DefaultTransport.(*http.Transport); ok {
		tr = base.Clone()
	}
	tr.DialContext = egress.DialContext
	tr.Proxy = egress.Proxy
	tr.TLSClientConfig = tlsConfig
	return tr
}

var plain = sync.OnceValue(func() *http.Transport { return NewTransport(nil) })

// Plain is the guarded transport shared by calls without a tls block, so
// that they reuse connections.
func Plain() *http.Transport { return plain() }

// NewClient is an HTTP client through the guarded Plain transport that
// follows redirects only on the same host; timeout 0 leaves each request's
// context to bound it.
func NewClient(timeout time.Duration) *http.Client {
	return &http.Client{Transport: Plain(), Timeout: timeout, CheckRedirect: egress.CheckRedirect}
}

func fieldOr(field, fallback string) string {
	if field != "" {
		return field
	}
	return fallback
}
