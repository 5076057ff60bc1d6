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

// DefaultIdle is how long a Secret or ConfigMap of a tls block is watched
// after its last read, and how long a transport is kept after its last use:
// longer than the longest usual gap between two calls of one block (a check
// interval, the time between two batches' hooks), so that a block in use
// never pays for a new watch or a new transport, and short enough that a
// block edited away stops costing a watch and its connections soon.
const DefaultIdle = 15 * time.Minute

// Default is the process's transports, shared by http gate checks, hooks
// and pod calls.
var Default = NewTransports(DefaultIdle)

// Transports keeps one *http.Transport per distinct Material in use, so
// that calls of one tls block reuse connections. The key is a digest of the
// material's content, so a rotated CA or client certificate gets a new
// transport on the first call after the rotation.
//
// How many are kept follows use, not a fixed bound: a transport not used
// for the idle time is dropped (its idle connections closed) at the next
// call, so a cluster with a CA per tenant keeps one per tenant (a bound
// below that would rebuild one, and its connections, at nearly every call),
// and a rotated or removed block's transport goes once unused.
type Transports struct {
	mu      sync.Mutex
	idle    time.Duration
	now     func() time.Time
	order   *list.List // of *entry, most recently used first
	entries map[[sha256.Size]byte]*list.Element
}

type entry struct {
	key       [sha256.Size]byte
	transport *http.Transport
	lastUsed  time.Time
}

// NewTransports keeps each transport until unused for idle (DefaultIdle
// when 0).
func NewTransports(idle time.Duration) *Transports {
	if idle <= 0 {
		idle = DefaultIdle
	}
	return &Transports{idle: idle, now: time.Now, order: list.New(), entries: map[[sha256.Size]byte]*list.Element{}}
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
	if tr := t.use(key, nil); tr != nil {
		return tr, nil
	}
	// Build outside the lock: parsing is the slow part, and two callers
	// racing build twice and keep one.
	tr, err := build(m)
	if err != nil {
		return nil, err
	}
	return t.use(key, tr), nil
}

// use returns the transport kept under key, or keeps built under it when
// none is (nil built: none), and drops the transports idle too long.
func (t *Transports) use(key [sha256.Size]byte, built *http.Transport) *http.Transport {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	defer t.expire(now)
	if el, ok := t.entries[key]; ok {
		e := el.Value.(*entry)
		e.lastUsed = now
		t.order.MoveToFront(el)
		return e.transport
	}
	if built == nil {
		return nil
	}
	t.entries[key] = t.order.PushFront(&entry{key: key, transport: built, lastUsed: now})
	return built
}

// expire drops the least recently used transports idle for longer than
// t.idle. Called with t.mu held.
func (t *Transports) expire(now time.Time) {
	for oldest := t.order.Back(); oldest != nil; oldest = t.order.Back() {
		e := oldest.Value.(*entry)
		if now.Sub(e.lastUsed) <= t.idle {
			return
		}
		t.order.Remove(oldest)
		delete(t.entries, e.key)
		e.transport.CloseIdleConnections()
	}
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
