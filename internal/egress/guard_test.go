package egress_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"testing"

	"github.com/echelon-operator/echelon/internal/egress"
	"github.com/echelon-operator/echelon/internal/httptls"
)

// ownPodIP stands for the operator's own pod IP in the table.
var ownPodIP = netip.MustParseAddr("10.244.1.7")

// names is the DNS of the table's cluster.
var names = map[string][]netip.Addr{
	"metadata.google.internal":                {netip.MustParseAddr("169.254.169.254")},
	"localtest.attacker.example":              {netip.MustParseAddr("127.0.0.1")},
	"half-loopback.attacker.example":          {netip.MustParseAddr("203.0.113.9"), netip.MustParseAddr("127.0.0.1")},
	"prometheus.monitoring.svc.cluster.local": {netip.MustParseAddr("10.96.12.34")},
	"redirector.test.svc.cluster.local":       {netip.MustParseAddr("10.96.0.80")},
	"metadata-proxy.infra.svc":                {netip.MustParseAddr("169.254.169.254")},
}

// TestGuardRefusesByRule sends a GET to each URL through the operator's
// transport (httptls.NewClient) with the process's guard configured as
// the row says. An allowed call reaches the test server, which stands for
// every address (the dial is redirected to it and the address recorded);
// a refused one never dials and fails naming the field and the rule.
func TestGuardRefusesByRule(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/to-metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		case "/to-same-host":
			http.Redirect(w, r, "/ok", http.StatusFound)
		default:
			fmt.Fprint(w, "ok")
		}
	}))
	defer srv.Close()
	const field = "spec.analysis.checks[probe].http.url"

	tests := []struct {
		name  string
		url   string
		allow []string
		// wantRule is the rule that refuses the call; "" when it is allowed.
		wantRule egress.Rule
		// wantDial is the address an allowed call dials.
		wantDial string
	}{
		{name: "IPv4 loopback, the operator's metrics port", url: "http://127.0.0.1:8001/metrics", wantRule: egress.RuleLoopback},
		{name: "IPv4 loopback, another address of 127/8", url: "http://127.1.2.3/", wantRule: egress.RuleLoopback},
		{name: "IPv6 loopback", url: "http://[::1]:8001/metrics", wantRule: egress.RuleLoopback},
		{name: "IPv4-mapped IPv6 loopback", url: "http://[::ffff:127.0.0.1]/", wantRule: egress.RuleLoopback},
		{name: "IPv4-mapped IPv6 metadata", url: "http://[::ffff:a9fe:a9fe]/latest/meta-data/", wantRule: egress.RuleMetadata},
		{name: "NAT64 metadata", url: "http://[64:ff9b::169.254.169.254]/", wantRule: egress.RuleMetadata},
		{name: "metadata address", url: "http://169.254.169.254/latest/meta-data/iam/", wantRule: egress.RuleMetadata},
		{name: "AWS IPv6 metadata address", url: "http://[fd00:ec2::254]/latest/meta-data/", wantRule: egress.RuleMetadata},
		{name: "IPv4 link-local", url: "http://169.254.10.1/", wantRule: egress.RuleLinkLocal},
		{name: "IPv6 link-local with a zone", url: "http://[fe80::1%25eth0]:8080/", wantRule: egress.RuleLinkLocal},
		{name: "decimal host", url: "http://2130706433/", wantRule: egress.RuleLoopback},
		{name: "octal host", url: "http://0177.0.0.1/", wantRule: egress.RuleLoopback},
		{name: "hexadecimal short host", url: "http://0x7f.1/", wantRule: egress.RuleLoopback},
		{name: "IPv4 unspecified", url: "http://0.0.0.0:8001/metrics", wantRule: egress.RuleUnspecified},
		{name: "IPv6 unspecified", url: "http://[::]:8001/metrics", wantRule: egress.RuleUnspecified},
		{name: "name resolving to metadata", url: "http://metadata.google.internal/computeMetadata/v1/", wantRule: egress.RuleMetadata},
		{name: "name resolving to 127.0.0.1", url: "http://localtest.attacker.example:8001/metrics", wantRule: egress.RuleLoopback},
		{name: "name resolving to a public address and 127.0.0.1", url: "http://half-loopback.attacker.example/", wantRule: egress.RuleLoopback},
		{name: "the operator's own pod IP", url: "http://10.244.1.7:8443/", wantRule: egress.RuleOwnAddress},
		{name: "redirect to the metadata address", url: "http://redirector.test.svc.cluster.local/to-metadata", wantRule: egress.RuleRedirect},

		{name: "in-cluster pod IP (a prepare endpoint)", url: "http://10.244.3.9:8080/prepare-downscale", wantDial: "10.244.3.9:8080"},
		{name: "in-cluster IPv6 pod IP", url: "http://[fd00:10:244::5]:8080/", wantDial: "[fd00:10:244::5]:8080"},
		{name: "in-cluster Service name", url: "http://prometheus.monitoring.svc.cluster.local:9090/api/v1/query", wantDial: "10.96.12.34:9090"},
		{name: "public address", url: "https://203.0.113.10:8443/", wantDial: "203.0.113.10:8443"},
		{name: "redirect on the same host", url: "http://redirector.test.svc.cluster.local/to-same-host", wantDial: "10.96.0.80:80"},
		{name: "loopback in an allowlisted CIDR", url: "http://127.0.0.1:9090/", allow: []string{"127.0.0.0/8"}, wantDial: "127.0.0.1:9090"},
		{name: "octal loopback in an allowlisted CIDR", url: "http://0177.0.0.1:9090/", allow: []string{"127.0.0.0/8"}, wantDial: "127.0.0.1:9090"},
		{name: "IPv6 loopback allowlisted as an address", url: "http://[::1]:9090/", allow: []string{"::1"}, wantDial: "[::1]:9090"},
		{name: "allowlisted host name resolving to metadata", url: "http://metadata-proxy.infra.svc/", allow: []string{"metadata-proxy.infra.svc"}, wantDial: "169.254.169.254:80"},
		{name: "allowlisted host name does not open its address", url: "http://169.254.169.254/", allow: []string{"metadata-proxy.infra.svc"}, wantRule: egress.RuleMetadata},
		{name: "another CIDR allowlisted keeps loopback refused", url: "http://127.0.0.1:8001/", allow: []string{"10.0.0.0/8"}, wantRule: egress.RuleLoopback},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var mu sync.Mutex
			var dialed []string
			g, err := egress.New(egress.Config{
				Allow:    tt.allow,
				OwnAddrs: []netip.Addr{ownPodIP},
				Resolve: func(_ context.Context, host string) ([]netip.Addr, error) {
					if addrs, ok := names[host]; ok {
						return addrs, nil
					}
					return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
				},
				Dial: func(ctx context.Context, network, address string) (net.Conn, error) {
					mu.Lock()
					dialed = append(dialed, address)
					mu.Unlock()
					return (&net.Dialer{}).DialContext(ctx, network, srv.Listener.Addr().String())
				},
			})
			if err != nil {
				t.Fatal(err)
			}
			restore := egress.Default()
			egress.SetDefault(g)
			defer egress.SetDefault(restore)
			defer httptls.Plain().CloseIdleConnections()

			url := tt.url
			if strings.HasPrefix(url, "https://") {
				// The test server speaks HTTP: only the dial matters here.
				url = "http://" + strings.TrimPrefix(url, "https://")
			}
			req, err := http.NewRequestWithContext(egress.WithField(context.Background(), field), http.MethodGet, url, nil)
			if err != nil {
				t.Fatal(err)
			}
			resp, err := httptls.NewClient(0).Do(req)
			if resp != nil {
				_ = resp.Body.Close()
			}
			var refused *egress.RefusedError
			switch {
			case tt.wantRule == "" && err != nil:
				t.Fatalf("GET %s: %v, want it allowed", tt.url, err)
			case tt.wantRule == "":
				if resp.StatusCode != http.StatusOK {
					t.Errorf("GET %s answered %d, want 200", tt.url, resp.StatusCode)
				}
				if len(dialed) == 0 || dialed[0] != tt.wantDial {
					t.Errorf("GET %s dialed %q, want %s", tt.url, dialed, tt.wantDial)
				}
			case !errors.As(err, &refused):
				t.Fatalf("GET %s: %v, want refused by rule %q", tt.url, err, tt.wantRule)
			default:
				if refused.Rule != tt.wantRule {
					t.Errorf("GET %s refused by rule %q, want %q", tt.url, refused.Rule, tt.wantRule)
				}
				if msg := err.Error(); !strings.Contains(msg, field+": ") || !strings.Contains(msg, string(tt.wantRule)) {
					t.Errorf("error %q names neither the field %s nor the rule %q", msg, field, tt.wantRule)
				}
				if tt.wantRule != egress.RuleRedirect && len(dialed) > 0 {
					t.Errorf("GET %s dialed %q before the refusal", tt.url, dialed)
				}
			}
		})
	}
}

func TestNewRefusesBadAllowEntries(t *testing.T) {
	for _, entry := range []string{"10.0.0.0/33", "http://prometheus:9090", "bad host", "-leading.dash"} {
		_, err := egress.New(egress.Config{Allow: []string{entry}})
		if err == nil || !strings.Contains(err.Error(), egress.AllowFlag) || !strings.Contains(err.Error(), fmt.Sprintf("%q", entry)) {
			t.Errorf("allow %q: error %v, want one naming %s and the entry", entry, err, egress.AllowFlag)
		}
	}
}

// TestOwnAddressesAreTheInterfaces checks the default: without OwnAddrs,
// the addresses of the process's interfaces are refused.
func TestOwnAddressesAreTheInterfaces(t *testing.T) {
	ifaddrs, err := net.InterfaceAddrs()
	if err != nil {
		t.Skip(err)
	}
	g, err := egress.New(egress.Config{})
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, a := range ifaddrs {
		p, err := netip.ParsePrefix(a.String())
		if err != nil || p.Addr().IsLoopback() || p.Addr().IsLinkLocalUnicast() {
			continue
		}
		_, err = g.Check(context.Background(), p.Addr().String())
		var refused *egress.RefusedError
		if !errors.As(err, &refused) || refused.Rule != egress.RuleOwnAddress {
			t.Errorf("%s, an address of this host's interfaces: %v, want refused by rule %q", p.Addr(), err, egress.RuleOwnAddress)
		}
		checked++
	}
	if checked == 0 {
		t.Skip("no interface address other than loopback and link-local")
	}
}
