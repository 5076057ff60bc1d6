// Package egress guards the operator's calls to the URLs users write: http
// gate checks, hooks, notification receivers and callbacks, the Prometheus
// address and pod endpoints. Anyone who may edit a RolloutGroup in one
// namespace writes those URLs, and the operator reads the answers back into
// status, so without a guard a namespace editor could read the cloud
// metadata service or the operator's own ports through it.
//
// The guard decides at dial time, after DNS: a host name that resolves to a
// refused address is refused as the address itself is. It refuses loopback,
// link-local (the metadata address 169.254.169.254 among them), unspecified
// addresses and the addresses of the operator's own network interfaces,
// IPv4-mapped IPv6 forms included; every other address, the cluster's pod
// and Service ranges among them, is reached. An allowlist of CIDRs and host
// names (--egress-allow) opens what a setup needs.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Rule names a class of addresses the guard refuses.
type Rule string

const (
	RuleLoopback    Rule = "loopback"
	RuleLinkLocal   Rule = "link-local"
	RuleMetadata    Rule = "cloud metadata"
	RuleUnspecified Rule = "unspecified"
	RuleOwnAddress  Rule = "operator's own address"
	RuleRedirect    Rule = "redirect to another host"
)

// AllowFlag is the flag that opens refused addresses; errors name it.
const AllowFlag = "--egress-allow"

var refusedRanges = []struct {
	prefix netip.Prefix
	rule   Rule
}{
	// The metadata addresses come first: they are link-local or unique
	// local too, and the more precise rule is the more useful message.
	{netip.MustParsePrefix("169.254.169.254/32"), RuleMetadata},
	{netip.MustParsePrefix("fd00:ec2::254/128"), RuleMetadata}, // AWS's IPv6 metadata address
	{netip.MustParsePrefix("127.0.0.0/8"), RuleLoopback},
	{netip.MustParsePrefix("::1/128"), RuleLoopback},
	{netip.MustParsePrefix("169.254.0.0/16"), RuleLinkLocal},
	{netip.MustParsePrefix("fe80::/10"), RuleLinkLocal},
	// 0.0.0.0 reaches the local host on Linux; the rest of 0/8 is "this
	// network" and never a real destination.
	{netip.MustParsePrefix("0.0.0.0/8"), RuleUnspecified},
	{netip.MustParsePrefix("::/128"), RuleUnspecified},
}

// nat64 is the well-known NAT64 prefix: its addresses carry an IPv4 address
// in their last 32 bits, which a NAT64 gateway reaches.
var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// RefusedError is a call the guard refused. It names the field the URL came
// from when the caller put it in the context (WithField).
type RefusedError struct {
	Field string
	// Host is the host of the URL; Addr the address it is or resolved to
	// (invalid for a redirect).
	Host string
	Addr netip.Addr
	Rule Rule
	// To is the host a refused redirect pointed to.
	To string
}

func (e *RefusedError) Error() string {
	var b strings.Builder
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	switch {
	case e.Rule == RuleRedirect:
		fmt.Fprintf(&b, "refused by the egress guard (rule %q): %s redirected to %s; the operator follows redirects only on the same host", e.Rule, e.Host, e.To)
		return b.String()
	case e.Host == e.Addr.String():
		fmt.Fprintf(&b, "refused by the egress guard (rule %q): %s is a %s address", e.Rule, e.Host, e.Rule)
	default:
		fmt.Fprintf(&b, "refused by the egress guard (rule %q): %s resolves to %s, a %s address", e.Rule, e.Host, e.Addr, e.Rule)
	}
	fmt.Fprintf(&b, "; an administrator can allow it with %s", AllowFlag)
	return b.String()
}

// Config configures a Guard.
type Config struct {
	// Allow lists what is reached even when a rule refuses it: CIDRs
	// ("10.0.0.0/8"), addresses ("127.0.0.1") and host names
	// ("prometheus.monitoring.svc"), matched exactly, case-insensitively.
	Allow []string
	// OwnAddrs are the operator's own addresses; nil reads the addresses
	// of the process's network interfaces on first use.
	OwnAddrs []netip.Addr
	// Resolve looks a host name up; the system resolver when nil. Tests
	// hook it.
	Resolve func(ctx context.Context, host string) ([]netip.Addr, error)
	// Dial dials the addresses allowed; a net.Dialer's with a 30 s timeout
	// when nil. Tests hook it.
	Dial func(ctx context.Context, network, address string) (net.Conn, error)
}

// Guard refuses connections to the addresses its rules name.
type Guard struct {
	allowNets  []netip.Prefix
	allowHosts map[string]bool
	resolve    func(ctx context.Context, host string) ([]netip.Addr, error)
	dial       func(ctx context.Context, network, address string) (net.Conn, error)

	ownOnce sync.Once
	ownSet  []netip.Addr
	own     map[netip.Addr]bool
}

// New builds a guard. The error names the Allow entry that is neither a
// CIDR, an address nor a host name.
func New(cfg Config) (*Guard, error) {
	g := &Guard{allowHosts: map[string]bool{}, resolve: cfg.Resolve, dial: cfg.Dial, ownSet: cfg.OwnAddrs}
	if g.resolve == nil {
		g.resolve = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if g.dial == nil {
		g.dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	var errs []error
	for _, entry := range cfg.Allow {
		entry = strings.TrimSpace(entry)
		if p, err := netip.ParsePrefix(entry); err == nil {
			g.allowNets = append(g.allowNets, p.Masked())
			continue
		}
		if a, err := netip.ParseAddr(entry); err == nil {
			g.allowNets = append(g.allowNets, netip.PrefixFrom(a.Unmap(), a.Unmap().BitLen()))
			continue
		}
		if name, ok := hostName(entry); ok {
			g.allowHosts[name] = true
			continue
		}
		errs = append(errs, fmt.Errorf("%s: %q is neither a CIDR, an IP address nor a host name", AllowFlag, entry))
	}
	if cfg.OwnAddrs != nil {
		g.ownOnce.Do(func() { g.own = addrSet(cfg.OwnAddrs) })
	}
	return g, errors.Join(errs...)
}

// Check resolves host and returns its addresses when every one of them is
// allowed, else a *RefusedError naming the first refused.
func (g *Guard) Check(ctx context.Context, host string) ([]netip.Addr, error) {
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if addr, ok := literal(host); ok {
		if rule, refused := g.refused(addr); refused {
			return nil, &RefusedError{Field: FieldFrom(ctx), Host: host, Addr: addr, Rule: rule}
		}
		return []netip.Addr{addr}, nil
	}
	name, _ := hostName(host)
	addrs, err := g.resolve(ctx, name)
	if err != nil {
		return nil, err
	}
	if len(addrs) == 0 {
		return nil, fmt.Errorf("lookup %s: no address", host)
	}
	if g.allowHosts[name] {
		return addrs, nil
	}
	for _, addr := range addrs {
		if rule, refused := g.refused(addr); refused {
			return nil, &RefusedError{Field: FieldFrom(ctx), Host: host, Addr: addr.WithZone(""), Rule: rule}
		}
	}
	return addrs, nil
}

// DialContext dials address (host:port) when the guard allows every address
// host resolves to, dialing those addresses themselves, so that a second
// lookup cannot answer differently.
func (g *Guard) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	host, port, err := net.SplitHostPort(address)
	if err != nil {
		return nil, err
	}
	addrs, err := g.Check(ctx, host)
	if err != nil {
		return nil, err
	}
	var errs []error
	for _, addr := range addrs {
		if (network == "tcp4" && !addr.Unmap().Is4()) || (network == "tcp6" && addr.Unmap().Is4()) {
			continue
		}
		conn, err := g.dial(ctx, network, net.JoinHostPort(addr.String(), port))
		if err == nil {
			return conn, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("dial %s %s: no %s address", network, address, network)
	}
	return nil, errors.Join(errs...)
}

// refused says which rule, if any, refuses addr. The allowlist wins over
// every rule.
func (g *Guard) refused(addr netip.Addr) (Rule, bool) {
	addr = addr.WithZone("")
	candidates := []netip.Addr{addr}
	if u := addr.Unmap(); u != addr {
		candidates = append(candidates, u)
	}
	if nat64.Contains(addr) {
		b := addr.As16()
		candidates = append(candidates, netip.AddrFrom4([4]byte{b[12], b[13], b[14], b[15]}))
	}
	for _, a := range candidates {
		for _, p := range g.allowNets {
			if p.Contains(a) {
				return "", false
			}
		}
	}
	for _, a := range candidates {
		for _, r := range refusedRanges {
			if r.prefix.Contains(a) {
				return r.rule, true
			}
		}
		if g.ownAddrs()[a] {
			return RuleOwnAddress, true
		}
	}
	return "", false
}

// ownAddrs are the addresses of the process's interfaces: every address a
// listener on all interfaces (metrics, webhook, pprof) answers on, IPv4 and
// IPv6 alike, known without the chart passing POD_IP.
func (g *Guard) ownAddrs() map[netip.Addr]bool {
	g.ownOnce.Do(func() {
		ifaddrs, err := net.InterfaceAddrs()
		if err != nil {
			return
		}
		for _, a := range ifaddrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				g.ownSet = append(g.ownSet, p.Addr())
			}
		}
		g.own = addrSet(g.ownSet)
	})
	return g.own
}

func addrSet(addrs []netip.Addr) map[netip.Addr]bool {
	set := map[netip.Addr]bool{}
	for _, a := range addrs {
		set[a.WithZone("").Unmap()] = true
	}
	return set
}

// literal reads host as an IP address: the usual forms, and the legacy
// IPv4 forms inet_aton accepts (2130706433, 0177.0.0.1, 0x7f.1), which a C
// resolver or a proxy may read as an address although Go does not.
func literal(host string) (netip.Addr, bool) {
	if a, err := netip.ParseAddr(host); err == nil {
		return a, true
	}
	return legacyIPv4(host)
}

// legacyIPv4 parses inet_aton's forms: one to four parts, each decimal,
// octal (leading 0) or hexadecimal (0x), the last filling the remaining
// bytes.
func legacyIPv4(host string) (netip.Addr, bool) {
	parts := strings.Split(host, ".")
	if len(parts) > 4 {
		return netip.Addr{}, false
	}
	var nums []uint64
	for _, p := range parts {
		if p == "" {
			return netip.Addr{}, false
		}
		// ParseUint's base 0 also reads 0o and 0b prefixes and
		// underscores, which inet_aton does not.
		lower := strings.ToLower(p)
		if strings.Contains(p, "_") || strings.HasPrefix(lower, "0o") || strings.HasPrefix(lower, "0b") {
			return netip.Addr{}, false
		}
		n, err := strconv.ParseUint(p, 0, 32)
		if err != nil {
			return netip.Addr{}, false
		}
		nums = append(nums, n)
	}
	var v uint64
	for i, n := range nums[:len(nums)-1] {
		if n > 0xff {
			return netip.Addr{}, false
		}
		v |= n << (8 * (3 - i))
	}
	last := nums[len(nums)-1]
	if last >= 1<<(8*(5-len(nums))) {
		return netip.Addr{}, false
	}
	v |= last
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}), true
}

// hostName is host lower-cased without a trailing dot, and whether it is a
// plausible DNS name.
func hostName(host string) (string, bool) {
	name := strings.TrimSuffix(strings.ToLower(host), ".")
	if name == "" || len(name) > 253 {
		return name, false
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return name, false
		}
		for _, c := range label {
			if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' && c != '_' {
				return name, false
			}
		}
	}
	return name, true
}
