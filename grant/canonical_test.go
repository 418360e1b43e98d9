package grant

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestPlainLDHMatchesIDNA checks that CheckHost's fast path accepts exactly
// what the IDNA lookup profile accepts unchanged, for the ASCII names that
// reach it (no "--", no trailing dot, not numeric).
func TestPlainLDHMatchesIDNA(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	alphabet := "ab-.0z9"
	seen := map[bool]int{}
	check := func(h string) {
		last := h[strings.LastIndexByte(h, '.')+1:]
		if strings.Contains(h, "--") || strings.HasSuffix(h, ".") || allDigits(last) || strings.HasPrefix(last, "0x") {
			return // refused or handled before the fast path
		}
		a, err := hostProfile.ToASCII(h)
		want := err == nil && a == h
		seen[want]++
		if got := plainLDH(h); got != want {
			t.Fatalf("plainLDH(%q) = %v, IDNA profile says %v (%q, %v)", h, got, want, a, err)
		}
	}
	for _, h := range []string{"a", "a.b", "-a", "a-", "a.-b", "a..b", ".a", "a.", strings.Repeat("a", 63), strings.Repeat("a", 64),
		strings.Repeat("a.", 126) + "a", strings.Repeat("a.", 127) + "a", strings.Repeat("abcdefgh.", 28) + "ab", "0a.b-c.d9"} {
		check(h)
	}
	for range 20000 {
		n := 1 + r.IntN(12)
		if r.IntN(50) == 0 {
			n = 60 + r.IntN(200)
		}
		var b strings.Builder
		for range n {
			b.WriteByte(alphabet[r.IntN(len(alphabet))])
		}
		check(b.String())
	}
	if seen[true] < 1000 || seen[false] < 1000 {
		t.Fatalf("compared %d accepted and %d refused names: too few to mean anything", seen[true], seen[false])
	}
}
