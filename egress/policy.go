package egress

import (
	"net/netip"
	"sync"
	"sync/atomic"

	"github.com/cordon-dev/cordon/grant"
)

// rulePolicy names a denial by a Policy that allows nothing.
const rulePolicy = "policy"

// Policy is what a proxy decides by: an Enforcer that can be replaced
// while proxies use it (a live run's grants are tightened by an
// amendment, docs/SPEC.md §3.7). Set takes effect at once: every request
// decided after it is decided by the new Enforcer, and every connection
// already established whose host, port or address the new Enforcer does
// not allow is closed. A nil Enforcer allows nothing. Its methods are
// safe for concurrent use.
type Policy struct {
	e       atomic.Pointer[grant.Enforcer]
	mu      sync.Mutex
	proxies map[*Proxy]struct{} // guarded by mu
}

// NewPolicy returns a Policy deciding by e (nil: nothing is allowed).
func NewPolicy(e *grant.Enforcer) *Policy {
	pl := &Policy{proxies: map[*Proxy]struct{}{}}
	pl.e.Store(e)
	return pl
}

// Enforcer is the Enforcer in force (nil: nothing is allowed).
func (pl *Policy) Enforcer() *grant.Enforcer { return pl.e.Load() }

// Set replaces the Enforcer and closes every established connection of
// every proxy using the policy that e does not allow; it returns how
// many it closed. Their records say why (Record.Error).
func (pl *Policy) Set(e *grant.Enforcer) int {
	pl.e.Store(e)
	pl.mu.Lock()
	ps := make([]*Proxy, 0, len(pl.proxies))
	for p := range pl.proxies {
		ps = append(ps, p)
	}
	pl.mu.Unlock()
	n := 0
	for _, p := range ps {
		n += p.recheck(e)
	}
	return n
}

func (pl *Policy) attach(p *Proxy) {
	pl.mu.Lock()
	pl.proxies[p] = struct{}{}
	pl.mu.Unlock()
}

func (pl *Policy) detach(p *Proxy) {
	pl.mu.Lock()
	delete(pl.proxies, p)
	pl.mu.Unlock()
}

// cutReason is the error a connection closed by a policy change records.
const cutReason = "closed: the egress policy changed (the grants were amended) and no longer allows this connection"

// recheck closes the proxy's established connections that e does not
// allow, and returns how many.
func (p *Proxy) recheck(e *grant.Enforcer) int {
	p.mu.Lock()
	var cut []*session
	for s := range p.sessions {
		s.mu.Lock()
		if s.up != nil && !s.closed && !p.allows(e, s.host, s.addr, s.port) {
			s.cut = true
			cut = append(cut, s)
		}
		s.mu.Unlock()
	}
	p.mu.Unlock()
	for _, s := range cut {
		s.cancel() // closes the client and upstream connections
	}
	return len(cut)
}

// allows reports whether e allows an established connection to host,
// port, reached at addr: the grant decision on the host, then the checks
// vet applies to the address.
func (p *Proxy) allows(e *grant.Enforcer, host string, addr netip.Addr, port int) bool {
	if e == nil {
		return false
	}
	if !e.Decide(grant.Query{Kind: grant.KindEgress, Host: host, Proto: "tcp", Port: port}).Allow {
		return false
	}
	if !addr.IsValid() {
		return true
	}
	if host == addr.String() {
		_, bad := p.checkSpecial(e, host, addr, port)
		return !bad
	}
	_, bad := p.checkAddr(e, host, addr, port)
	return !bad
}
