// Package selection chooses the isolation tier a grant set runs at, as
// specified in docs/tiers.md: the minimum tier each grant needs,
// Required (the maximum of those minimums) and Host.Select, which runs
// exactly the required tier or refuses. It is apart from package tier so
// that verifiers which only name tiers do not link the grant parser.
package selection

import (
	"errors"
	"fmt"
	"slices"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/tier"
)

// Reason is one grant's contribution to the required tier.
type Reason struct {
	Tier tier.Tier
	Why  string // the grant and its rule, e.g. "devices[0]: gpu direct"
}

// Requirements returns, for every grant of s that needs more than S0, the
// minimum tier it needs (docs/tiers.md, the table of minimums), in the order
// of the table.
func Requirements(s *grant.Set) []Reason {
	var rs []Reason
	add := func(t tier.Tier, format string, args ...any) {
		rs = append(rs, Reason{t, fmt.Sprintf(format, args...)})
	}
	// A writable host path needs no higher tier, but it must show in the
	// decision: the program writes the host directly, bypassing the
	// staged workspace (docs/tiers.md, "Host paths").
	for i, r := range s.FS {
		if r.Access&grant.Write != 0 && r.Path != "/work" && r.Path != "/tmp" {
			add(tier.S0, "fs[%d]: %s %s is a writable host path: writes bypass the staged workspace (refused at S3 and S4)", i, r.Access, r.Path)
		}
	}
	if len(s.Exec) > 0 {
		add(tier.S1, "exec: commands run as separate processes")
	}
	if len(s.Env) > 0 {
		add(tier.S1, "env: a child process receives a scrubbed environment")
	}
	if s.Limits != (grant.Limits{}) {
		add(tier.S1, "limits: enforced on a separate process (rlimits, timers, counters)")
	}
	if len(s.Egress) > 0 {
		add(tier.S1, "egress: network only through cordon's proxy")
	}
	if !s.Trusted {
		add(tier.S2, "code: untrusted code runs in an OS sandbox")
	}
	for i, d := range s.Devices {
		if d.Class != "cpu" && d.Mode == "brokered" {
			add(tier.S2, "devices[%d]: %s through a broker", i, d.Class)
		}
	}
	if s.MultiTenant {
		add(tier.S3, "tenancy: multi-tenant hosts isolate tenants")
	}
	if s.IsolatedKernel {
		add(tier.S4, "isolated_kernel: system calls served by a user-space kernel or microVM, not the host's")
	}
	for i, d := range s.Devices {
		if d.Mode == "direct" {
			add(tier.S5, "devices[%d]: %s by direct assignment", i, d.Class)
		}
	}
	if s.Confidential {
		add(tier.S6, "confidential: requires a TEE")
	}
	return rs
}

// Required returns the tier s requires: the maximum of the minimums of its
// grants, S0 when none needs more.
func Required(s *grant.Set) tier.Tier {
	t := tier.S0
	for _, r := range Requirements(s) {
		t = max(t, r.Tier)
	}
	return t
}

// Host describes the tiers a host really enforces. A host must advertise
// only tiers whose mechanisms it has and has checked.
type Host struct {
	Offers []tier.Tier
}

// ErrNotOffered is returned by Select when the host does not offer the
// required tier.
var ErrNotOffered = errors.New("tier: required tier is not offered by this host")

// Select returns the tier to run s at: exactly Required(s), never a tier
// above or below it. If the host does not offer that tier, it refuses with
// an error wrapping ErrNotOffered.
func (h Host) Select(s *grant.Set) (tier.Tier, error) {
	req := Required(s)
	if !slices.Contains(h.Offers, req) {
		return req, fmt.Errorf("%w: requires %s, host offers %s", ErrNotOffered, req, tier.FormatList(h.Offers))
	}
	return req, nil
}
