// Package books keeps a warm pool's idle-energy books (docs/SPEC.md §4.9,
// conformance class C9): which slots are parked for which key, the idle
// energy each accrued, and where it went when the slot left: to the run
// that claimed it, or to the pool's overhead when it was evicted. The
// total is always claimed + overhead + pending, and no slot leaves with
// zero. It is pure, so that a verifier can replay the books without the
// sandbox; package sandbox/pool keeps them for real slots.
package books

import (
	"errors"
	"fmt"
	"sort"

	"github.com/cordon-dev/cordon/evidence/canon"
)

var (
	// ErrMismatch wraps the refusal of a claim whose key is not the
	// slot's: another environment address or another policy.
	ErrMismatch = errors.New("pool: the claim does not match the slot")
	// ErrGone wraps an operation on a slot that was already claimed or
	// evicted (a slot is used once), or that the ledger never parked.
	ErrGone = errors.New("pool: no such parked slot")
	// ErrZeroIdle wraps a claim or eviction of a slot that accrued no
	// idle energy: a parked slot's energy is never recorded as zero.
	ErrZeroIdle = errors.New("pool: a slot leaves with zero idle energy")
	// ErrEmpty is returned by Claim when no slot is ready.
	ErrEmpty = errors.New("pool: no ready slot")
	// ErrClosed is returned once the pool is stopped.
	ErrClosed = errors.New("pool: stopped")
	// ErrInvalid wraps a malformed operation on the books: an empty or
	// reused slot id, an overflow.
	ErrInvalid = errors.New("pool: invalid operation on the books")
)

// Key is what a slot was prepared for and what a claim must match.
type Key struct {
	// Env is the environment address: the ContentId of the run's
	// environment or image, or of the host runtime's identity.
	Env string `json:"env"`
	// Policy is the ContentId of the grant set, tier, tenant and limits
	// (PolicyID).
	Policy string `json:"policy"`
}

// Check names the first member of k that does not match want, as the
// refusal of a claim with k for a slot with want.
func (k Key) Check(want Key) error {
	switch {
	case k.Env != want.Env:
		return fmt.Errorf("%w: environment address %s, the slot's is %s", ErrMismatch, k.Env, want.Env)
	case k.Policy != want.Policy:
		return fmt.Errorf("%w: policy (grants, tier, tenant, limits) %s, the slot's is %s", ErrMismatch, k.Policy, want.Policy)
	}
	return nil
}

// Totals are a ledger's books, in µJ. Total = Claimed + Overhead + Pending.
type Totals struct {
	Total    uint64 `json:"total_uj"`
	Claimed  uint64 `json:"claimed_uj"`
	Overhead uint64 `json:"overhead_uj"`
	Pending  uint64 `json:"pending_uj"`
	Parked   int    `json:"parked"`
	Claims   int    `json:"claims"`
	Evicted  int    `json:"evicted"`
}

// Balanced reports whether Total = Claimed + Overhead + Pending.
func (t Totals) Balanced() bool {
	return t.Claimed+t.Overhead+t.Pending == t.Total && t.Claimed <= t.Total && t.Overhead <= t.Total
}

type book struct {
	key  Key
	idle uint64
}

// Ledger keeps the idle-energy books of a pool's slots. It is not safe
// for concurrent use: the Pool holds its lock around it.
type Ledger struct {
	parked                   map[string]*book
	done                     map[string]bool // claimed or evicted: never again
	total, claimed, overhead uint64
	claims, evicted          int
}

// NewLedger returns empty books.
func NewLedger() *Ledger {
	return &Ledger{parked: map[string]*book{}, done: map[string]bool{}}
}

// Park opens the books of slot id, prepared for key.
func (l *Ledger) Park(id string, key Key) error {
	if id == "" {
		return fmt.Errorf("%w: a slot needs an id", ErrInvalid)
	}
	if l.parked[id] != nil || l.done[id] {
		return fmt.Errorf("%w: slot %s was parked before: a slot is parked once", ErrInvalid, id)
	}
	l.parked[id] = &book{key: key}
	return nil
}

// Accrue adds uj of idle energy to parked slot id.
func (l *Ledger) Accrue(id string, uj uint64) error {
	e := l.parked[id]
	if e == nil {
		return l.gone(id)
	}
	if e.idle+uj < e.idle || l.total+uj < l.total || l.total+uj > canon.MaxInt {
		return fmt.Errorf("%w: idle energy overflows", ErrInvalid)
	}
	e.idle += uj
	l.total += uj
	return nil
}

// Idle returns parked slot id's idle energy so far.
func (l *Ledger) Idle(id string) (uint64, error) {
	e := l.parked[id]
	if e == nil {
		return 0, l.gone(id)
	}
	return e.idle, nil
}

func (l *Ledger) gone(id string) error {
	if l.done[id] {
		return fmt.Errorf("%w: slot %s was already claimed or evicted (one slot, one run)", ErrGone, id)
	}
	return fmt.Errorf("%w: slot %s", ErrGone, id)
}

// Claim closes slot id's books for a claim with key, returning the idle
// energy the run is charged. A key that does not match, a slot no
// longer parked, and a slot with no idle energy are refused, and the
// books are then unchanged.
func (l *Ledger) Claim(id string, key Key) (uint64, error) {
	e := l.parked[id]
	if e == nil {
		return 0, l.gone(id)
	}
	if err := key.Check(e.key); err != nil {
		return 0, err
	}
	if e.idle == 0 {
		return 0, fmt.Errorf("%w: claim of slot %s", ErrZeroIdle, id)
	}
	delete(l.parked, id)
	l.done[id] = true
	l.claimed += e.idle
	l.claims++
	return e.idle, nil
}

// Evict closes slot id's books without a run: its idle energy is the
// pool's overhead.
func (l *Ledger) Evict(id string) (uint64, error) {
	e := l.parked[id]
	if e == nil {
		return 0, l.gone(id)
	}
	if e.idle == 0 {
		return 0, fmt.Errorf("%w: eviction of slot %s", ErrZeroIdle, id)
	}
	delete(l.parked, id)
	l.done[id] = true
	l.overhead += e.idle
	l.evicted++
	return e.idle, nil
}

// Parked returns the ids of the parked slots, sorted.
func (l *Ledger) Parked() []string {
	ids := make([]string, 0, len(l.parked))
	for id := range l.parked {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// Totals returns the books.
func (l *Ledger) Totals() Totals {
	t := Totals{Total: l.total, Claimed: l.claimed, Overhead: l.overhead, Parked: len(l.parked), Claims: l.claims, Evicted: l.evicted}
	for _, e := range l.parked {
		t.Pending += e.idle
	}
	return t
}
