package egress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync/atomic"
)

var current atomic.Pointer[Guard]

func init() {
	g, _ := New(Config{}) // no allowlist: cannot fail
	current.Store(g)
}

// Default is the guard of the process: without an allowlist until
// SetDefault installs the one the flags name.
func Default() *Guard { return current.Load() }

// SetDefault makes g the process's guard. The operator calls it once at
// start; tests that serve on loopback call it with loopback allowed.
func SetDefault(g *Guard) { current.Store(g) }

// DialContext dials through the process's guard as it is at dial time, so
// a transport built before SetDefault obeys the guard installed after.
func DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return Default().DialContext(ctx, network, address)
}

// Proxy is http.ProxyFromEnvironment with the guard applied to the target
// when a proxy is used: the proxy dials the target, not the operator, so
// the target is checked (resolved here) before the request leaves.
func Proxy(req *http.Request) (*url.URL, error) {
	proxy, err := http.ProxyFromEnvironment(req)
	if err != nil || proxy == nil {
		return proxy, err
	}
	if _, err := Default().Check(req.Context(), req.URL.Hostname()); err != nil {
		return nil, err
	}
	return proxy, nil
}

// CheckRedirect follows a redirect only on the host of the first request
// (its scheme and port may change, as http to https; the guard still
// checks the address dialed): a redirect elsewhere is refused,
// so that credentials and headers meant for one host reach no other, and
// a check cannot be bounced to an address its URL would not name. At most
// 10 redirects, as net/http's default.
func CheckRedirect(req *http.Request, via []*http.Request) error {
	first := via[0].URL
	if !sameHost(first.Hostname(), req.URL.Hostname()) {
		return &RefusedError{Field: FieldFrom(req.Context()), Host: first.Host, To: req.URL.Host, Rule: RuleRedirect}
	}
	if len(via) >= 10 {
		return errors.New("stopped after 10 redirects")
	}
	return nil
}

func sameHost(a, b string) bool {
	return strings.EqualFold(strings.TrimSuffix(a, "."), strings.TrimSuffix(b, "."))
}

type fieldKey struct{}

// WithField names, in ctx, the spec field a call's URL comes from, so that
// a refusal names it.
func WithField(ctx context.Context, field string) context.Context {
	return context.WithValue(ctx, fieldKey{}, field)
}

// FieldFrom is the field WithField put in ctx, or "".
func FieldFrom(ctx context.Context) string {
	s, _ := ctx.Value(fieldKey{}).(string)
	return s
}
