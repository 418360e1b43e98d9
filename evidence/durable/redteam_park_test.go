package durable

import (
	"fmt"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
)

// appendNoPanic is Append, with a panic turned into an error.
func appendNoPanic(r *Record, s Segment) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	_, err = r.Append(s)
	return err
}

// headNoPanic is Head().JCS(), with a panic turned into an error.
func headNoPanic(r *Record) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	r.Head().JCS()
	return nil
}

// TestRedteamParkIntegerBounds (F7, docs/security/redteam-park.md):
// Append must refuse, and never panic on, what the record cannot carry
// or Parse would refuse. It bounds energies and durations below (≥ 0)
// but not above: a segment with an integer past canon.MaxInt (2^53−1)
// makes Append panic (the segment's JCS cannot hold it; the runner's
// parked_ms comes from time.Since of the state's parked_unix_ms, so a
// state file or clock that says the run parked long ago reaches it), and
// segments each within MaxInt whose totals pass it are appended and then
// make Head().JCS() panic — the runner writes the head right after — and
// make Parse refuse the record Append built ("energy totals overflow").
func TestRedteamParkIntegerBounds(t *testing.T) {
	t.Run("parked_ms past MaxInt", func(t *testing.T) {
		r := build(t, exec(1), suspend(snap))
		s := resume(snap, 1)
		s.ParkedMS = canon.MaxInt + 1
		if err := appendNoPanic(r, s); err == nil || err.Error()[:6] == "panic:" {
			t.Errorf("Append of parked_ms %d: %v; want a refusal", s.ParkedMS, err)
		}
	})
	t.Run("idle energy past MaxInt", func(t *testing.T) {
		r := build(t, exec(1), suspend(snap))
		if err := appendNoPanic(r, resume(snap, canon.MaxInt+1)); err == nil || err.Error()[:6] == "panic:" {
			t.Errorf("Append of idle_uj past MaxInt: %v; want a refusal", err)
		}
	})
	t.Run("totals past MaxInt", func(t *testing.T) {
		r := build(t, exec(canon.MaxInt), suspend(snap), resume(snap, 1))
		err := appendNoPanic(r, exec(canon.MaxInt))
		if err != nil {
			return // refused: fixed
		}
		herr := headNoPanic(r)
		_, perr := Parse(r.Wire())
		t.Errorf("Append took energies whose total passes MaxInt; then Head().JCS(): %v, Parse of its own wire form: %v", herr, perr)
	})
}
