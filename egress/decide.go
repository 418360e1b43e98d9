package egress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strings"

	"github.com/cordon-dev/cordon/grant"
)

// Rule names for refusals that come from the proxy rather than from a
// grant rule (grant rules are named by the Enforcer: "egress[0]",
// "deny.egress[1]", "default", "request").
const (
	ruleAddress = "address" // a resolved or literal address is special and not granted
	ruleSNI     = "sni"     // the TLS ClientHello does not match the CONNECT host
	ruleLimit   = "limit"   // too many connections
	ruleRequest = "request" // the request itself is malformed (as the Enforcer names it)
)

// specialRange is an address range that a host rule never reaches: only a
// CIDR rule inside the range allows it.
type specialRange struct {
	prefix netip.Prefix
	name   string
}

// specialRanges lists the special ranges, most specific first (IANA IPv4
// and IPv6 Special-Purpose Address Registries, plus cloud metadata).
var specialRanges = func() []specialRange {
	var out []specialRange
	for _, r := range []struct{ p, name string }{
		{"169.254.169.254/32", "cloud metadata"},
		{"fd00:ec2::254/128", "cloud metadata"},
		{"0.0.0.0/8", "this-network"},
		{"10.0.0.0/8", "private"},
		{"100.64.0.0/10", "shared (CGNAT)"},
		{"127.0.0.0/8", "loopback"},
		{"169.254.0.0/16", "link-local"},
		{"172.16.0.0/12", "private"},
		{"192.0.0.0/24", "IETF protocol assignment"},
		{"192.0.2.0/24", "documentation"},
		{"192.88.99.0/24", "6to4 relay"},
		{"192.168.0.0/16", "private"},
		{"198.18.0.0/15", "benchmarking"},
		{"198.51.100.0/24", "documentation"},
		{"203.0.113.0/24", "documentation"},
		{"224.0.0.0/4", "multicast"},
		{"240.0.0.0/4", "reserved or broadcast"},
		{"::1/128", "loopback"},
		{"::/128", "unspecified"},
		{"::/96", "IPv4-compatible"},
		{"::ffff:0:0/96", "IPv4-mapped"},
		{"64:ff9b:1::/48", "local NAT64"},
		{"100::/64", "discard"},
		{"2001:db8::/32", "documentation"},
		{"fc00::/7", "unique local (private)"},
		{"fe80::/10", "link-local"},
		{"fec0::/10", "site-local"},
		{"ff00::/8", "multicast"},
	} {
		out = append(out, specialRange{netip.MustParsePrefix(r.p), r.name})
	}
	return out
}()

var nat64 = netip.MustParsePrefix("64:ff9b::/96")

// special returns the special range a lies in. An address in the NAT64
// well-known prefix is judged by the IPv4 address it embeds, and its range
// is that range's NAT64 image.
func special(a netip.Addr) (specialRange, bool) {
	if nat64.Contains(a) {
		b := a.As16()
		v4 := netip.AddrFrom4([4]byte(b[12:]))
		r, ok := special(v4)
		if !ok {
			return specialRange{}, false
		}
		base := r.prefix.Addr().As4()
		copy(b[12:], base[:])
		return specialRange{netip.PrefixFrom(netip.AddrFrom16(b), 96+r.prefix.Bits()), "NAT64 " + r.name}, true
	}
	for _, r := range specialRanges {
		if r.prefix.Contains(a) {
			return r, true
		}
	}
	return specialRange{}, false
}

// verdict is the outcome of vetting one host and port.
type verdict struct {
	allow        bool
	rule, reason string
	hint         string          // for a denial that a grant entry would lift
	addrs        []netip.Addr    // for an allowance: every vetted address, in order
	addr         netip.Addr      // the address the verdict is about, when there is one
	err          error           // allowed, but the name could not be resolved
	enf          *grant.Enforcer // the Enforcer that allowed it
}

// vet decides host:port: the grant decision, then for a name its
// resolution and the check of every address it resolves to, for an
// address the special-range check.
// errResolve wraps every failure to resolve an allowed name.
var errResolve = errors.New("resolve")

func (p *Proxy) vet(ctx context.Context, host string, port int) verdict {
	e := p.pol.Enforcer()
	if e == nil {
		return verdict{rule: rulePolicy, reason: "the egress policy in force allows no connection (the grants were amended)"}
	}
	d := e.Decide(grant.Query{Kind: grant.KindEgress, Host: host, Proto: "tcp", Port: port})
	if !d.Allow {
		v := verdict{rule: d.Rule, reason: d.Reason}
		if d.Rule == "default" {
			v.hint = hintFor(host, port)
		}
		return v
	}
	if a, err := netip.ParseAddr(host); err == nil {
		// The Enforcer allowed it, so it is a canonical address granted by
		// a CIDR rule and outside every deny rule.
		if v, bad := p.checkSpecial(e, host, a, port); bad {
			return v
		}
		return verdict{allow: true, rule: d.Rule, reason: d.Reason, addrs: []netip.Addr{a}, addr: a, enf: e}
	}
	addrs, err := p.cfg.Resolver(ctx, host)
	if err == nil && len(addrs) == 0 {
		err = fmt.Errorf("no addresses")
	}
	if err != nil {
		return verdict{allow: true, rule: d.Rule, reason: d.Reason, err: fmt.Errorf("%w %s: %w", errResolve, host, err), enf: e}
	}
	vetted := make([]netip.Addr, 0, len(addrs))
	for _, a := range addrs {
		a = a.Unmap()
		if !a.IsValid() || a.Zone() != "" {
			return verdict{rule: ruleAddress, reason: fmt.Sprintf("%s resolves to %q, which is not a plain address", host, a), addr: a}
		}
		if v, bad := p.checkAddr(e, host, a, port); bad {
			return v
		}
		if !containsAddr(vetted, a) {
			vetted = append(vetted, a)
		}
	}
	return verdict{allow: true, rule: d.Rule, reason: d.Reason, addrs: vetted, addr: vetted[0], enf: e}
}

func containsAddr(s []netip.Addr, a netip.Addr) bool {
	for _, b := range s {
		if a == b {
			return true
		}
	}
	return false
}

// checkAddr checks an address that the allowed name host resolved to: it
// must not be in a deny.egress network, nor special unless granted.
func (p *Proxy) checkAddr(e *grant.Enforcer, host string, a netip.Addr, port int) (verdict, bool) {
	if a.IsUnspecified() {
		return verdict{rule: ruleAddress, reason: fmt.Sprintf("%s resolves to %s, the unspecified address, which is never allowed", host, a), addr: a}, true
	}
	d := e.Decide(grant.Query{Kind: grant.KindEgress, Host: a.String(), Proto: "tcp", Port: port})
	if strings.HasPrefix(d.Rule, "deny.") {
		return verdict{rule: d.Rule, reason: fmt.Sprintf("%s resolves to %s: %s", host, a, d.Reason), addr: a}, true
	}
	return p.checkSpecial(e, host, a, port)
}

// checkSpecial refuses a special address unless an egress CIDR rule inside
// its special range grants it on this port. host is the name that led to
// a, or a itself.
func (p *Proxy) checkSpecial(e *grant.Enforcer, host string, a netip.Addr, port int) (verdict, bool) {
	r, ok := special(a)
	if !ok {
		return verdict{}, false
	}
	if a.IsUnspecified() {
		return verdict{rule: ruleAddress, reason: fmt.Sprintf("%s is the unspecified address, which is never allowed", a), addr: a}, true
	}
	for _, g := range e.Set().Egress {
		c := g.CIDR
		if c.IsValid() && g.Proto == "tcp" && int(g.PortLo) <= port && port <= int(g.PortHi) &&
			c.Contains(a) && c.Bits() >= r.prefix.Bits() && r.prefix.Contains(c.Addr()) {
			return verdict{}, false
		}
	}
	what := a.String()
	if host != what {
		what = host + " resolves to " + what + ", which"
	}
	return verdict{
		rule:   ruleAddress,
		reason: fmt.Sprintf("%s is a %s address (%s); only an egress CIDR rule inside that range allows it", what, r.name, r.prefix),
		hint:   hintFor(a.String(), port),
		addr:   a,
	}, true
}

// hintFor returns the grant entry, as JSON in the form of a grant set's
// "egress" array (docs/SPEC.md §3.1), that allows tcp to host:port: a host
// rule for a name, a single-address CIDR rule for an address.
func hintFor(host string, port int) string {
	e := struct {
		Host  string `json:"host,omitempty"`
		CIDR  string `json:"cidr,omitempty"`
		Proto string `json:"proto"`
		Ports [2]int `json:"ports"`
	}{Proto: "tcp", Ports: [2]int{port, port}}
	if a, err := netip.ParseAddr(host); err == nil {
		e.CIDR = netip.PrefixFrom(a, a.BitLen()).String()
	} else {
		e.Host = host
	}
	b, err := json.Marshal(e)
	if err != nil {
		panic(err) // strings and ints only: cannot fail
	}
	return string(b)
}
