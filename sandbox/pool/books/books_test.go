package books

import (
	"errors"
	"strings"
	"testing"
)

// TestRefusalsLeaveTheBooks: a claim refused for another environment or
// another policy, or one of a slot with no idle energy, changes nothing:
// the totals are the same and the slot is still parked and claimable by
// its own key; the refusal names what differs.
func TestRefusalsLeaveTheBooks(t *testing.T) {
	k := Key{Env: "b3:env", Policy: "b3:policy"}
	l := NewLedger()
	if err := l.Park("1", k); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Claim("1", k); !errors.Is(err, ErrZeroIdle) {
		t.Fatalf("claim with zero idle energy: %v", err)
	}
	if err := l.Accrue("1", 77); err != nil {
		t.Fatal(err)
	}
	before := l.Totals()
	for _, c := range []struct {
		key  Key
		says string
	}{
		{Key{Env: "b3:other", Policy: k.Policy}, "environment address"},
		{Key{Env: k.Env, Policy: "b3:other"}, "policy"},
	} {
		_, err := l.Claim("1", c.key)
		if !errors.Is(err, ErrMismatch) || !strings.Contains(err.Error(), c.says) {
			t.Fatalf("claim with %+v: %v", c.key, err)
		}
		if got := l.Totals(); got != before {
			t.Fatalf("a refused claim changed the books: %+v → %+v", before, got)
		}
	}
	if uj, err := l.Claim("1", k); err != nil || uj != 77 {
		t.Fatalf("the slot's own claim after refusals: %d, %v", uj, err)
	}
	if got := l.Totals(); !got.Balanced() || got.Claimed != 77 || got.Pending != 0 {
		t.Fatalf("books: %+v", got)
	}
}
