// Package tier names cordon's isolation tiers, as specified in
// docs/tiers.md: the tier table S0–S6, their names and parsing. It is a
// leaf: it imports only the standard library, so verifiers that read a
// tier from evidence do not link the grant parser. Choosing the tier a
// grant set needs, and refusing a host that does not offer it, is
// tier/selection.
package tier

import (
	"fmt"
	"strings"
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
