// Package tier implements cordon's isolation tiers, as specified in
// docs/tiers.md: the tier table S0–S6, the minimum tier each grant needs,
// Required (the maximum of those minimums) and Select, which runs exactly
// the required tier or refuses.
package tier

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/cordon-dev/cordon/grant"
)

// Tier is an isolation tier, S0 (weakest) to S6 (strongest).
type Tier int

const (
	S0 Tier = iota // trusted code, in process
	S1             // trusted code, separate process: scrubbed environment, rlimits
	S2             // untrusted code in an OS sandbox: namespaces, seccomp, Landlock, no or proxied network, accelerators only through a broker
	S3             // multi-tenant: S2 plus per-tenant uid ranges, cgroup limits, per-tenant storage
	S4             // user-space kernel or microVM (gVisor, Firecracker, Kata)
	S5             // direct device assignment (VFIO)
	S6             // confidential computing, with TEE evidence
)

// All lists every tier in order.
var All = []Tier{S0, S1, S2, S3, S4, S5, S6}

var names = [...]string{"S0", "S1", "S2", "S3", "S4", "S5", "S6"}

func (t Tier) String() string {
	if t < S0 || t > S6 {
		return fmt.Sprintf("Tier(%d)", int(t))
	}
	return names[t]
}

// Parse parses "S0" … "S6".
func Parse(s string) (Tier, error) {
	for i, n := range names {
		if n == s {
			return Tier(i), nil
		}
	}
	return 0, fmt.Errorf("tier: unknown tier %q (want S0 … S6)", s)
}

// Reason is one grant's contribution to the required tier.
type Reason struct {
	Tier Tier
	Why  string // the grant and its rule, e.g. "devices[0]: gpu direct"
}

// Requirements returns, for every grant of s that needs more than S0, the
// minimum tier it needs (docs/tiers.md, the table of minimums), in the order
// of the table.
func Requirements(s *grant.Set) []Reason {
	var rs []Reason
	add := func(t Tier, format string, args ...any) {
		rs = append(rs, Reason{t, fmt.Sprintf(format, args...)})
	}
	if len(s.Exec) > 0 {
		add(S1, "exec: commands run as separate processes")
	}
	if len(s.Env) > 0 {
		add(S1, "env: a child process receives a scrubbed environment")
	}
	if s.Limits != (grant.Limits{}) {
		add(S1, "limits: enforced on a separate process (rlimits, timers, counters)")
	}
	if len(s.Egress) > 0 {
		add(S1, "egress: network only through cordon's proxy")
	}
	if !s.Trusted {
		add(S2, "code: untrusted code runs in an OS sandbox")
	}
	for i, d := range s.Devices {
		if d.Class != "cpu" && d.Mode == "brokered" {
			add(S2, "devices[%d]: %s through a broker", i, d.Class)
		}
	}
	if s.MultiTenant {
		add(S3, "tenancy: multi-tenant hosts isolate tenants")
	}
	for i, d := range s.Devices {
		if d.Mode == "direct" {
			add(S5, "devices[%d]: %s by direct assignment", i, d.Class)
		}
	}
	if s.Confidential {
		add(S6, "confidential: requires a TEE")
	}
	return rs
}

// Required returns the tier s requires: the maximum of the minimums of its
// grants, S0 when none needs more.
func Required(s *grant.Set) Tier {
	t := S0
	for _, r := range Requirements(s) {
		t = max(t, r.Tier)
	}
	return t
}

// Host describes the tiers a host really enforces. A host must advertise
// only tiers whose mechanisms it has and has checked.
type Host struct {
	Offers []Tier
}

// ErrNotOffered is returned by Select when the host does not offer the
// required tier.
var ErrNotOffered = errors.New("tier: required tier is not offered by this host")

// Select returns the tier to run s at: exactly Required(s), never a tier
// above or below it. If the host does not offer that tier, it refuses with
// an error wrapping ErrNotOffered.
func (h Host) Select(s *grant.Set) (Tier, error) {
	req := Required(s)
	if !slices.Contains(h.Offers, req) {
		return req, fmt.Errorf("%w: requires %s, host offers %s", ErrNotOffered, req, FormatList(h.Offers))
	}
	return req, nil
}

// FormatList writes tiers as "S0, S1" or "none".
func FormatList(ts []Tier) string {
	if len(ts) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, t := range ts {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(t.String())
	}
	return b.String()
}
