package conformance

import (
	"encoding/json"
	"fmt"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/sandbox/pool/books"
)

// poolCharge is one slot's leaving of the books, in the output.
type poolCharge struct {
	Op     string `json:"op"` // "claim" or "evict"
	Slot   string `json:"slot"`
	IdleUJ uint64 `json:"idle_uj"`
}

// poolBooks replays {"events": [EVENT, …]} on empty books, where an
// EVENT is {"op": "park", "slot", "env", "policy"}, {"op": "accrue",
// "slot", "uj"}, {"op": "claim", "slot", "env", "policy"} or {"op":
// "evict", "slot"}, and returns the JCS of the charges and the final
// books; the first refused event is the error.
func poolBooks(in []byte) ([]byte, canon.ID, error) {
	invalid := func(err error) ([]byte, canon.ID, error) {
		return nil, canon.ID{}, fmt.Errorf("%w: %v", books.ErrInvalid, err)
	}
	v, err := canon.Parse(in)
	if err != nil {
		return nil, canon.ID{}, err
	}
	r := &jsonv.Reader{}
	o := r.Object(v, "")
	events, _ := o.Array("events", true)
	o.End()
	if err := r.Err(); err != nil {
		return invalid(err)
	}
	l := books.NewLedger()
	charges := []poolCharge{}
	for i, ev := range events {
		path := fmt.Sprintf("events[%d]", i)
		eo := r.Object(ev, path)
		op, _ := eo.Str("op", true)
		slot, _ := eo.Str("slot", true)
		key := func() books.Key {
			env, _ := eo.Str("env", true)
			pol, _ := eo.Str("policy", true)
			return books.Key{Env: env, Policy: pol}
		}
		var k books.Key
		var uj int64
		switch op {
		case "park", "claim":
			k = key()
		case "accrue":
			uj, _ = eo.Int("uj", true)
		case "evict":
		default:
			r.Fail(path, "op %q is not park, accrue, claim or evict", op)
		}
		eo.End()
		if err := r.Err(); err != nil {
			return invalid(err)
		}
		switch op {
		case "park":
			err = l.Park(slot, k)
		case "accrue":
			if uj <= 0 {
				return invalid(fmt.Errorf("%s: uj %d, want a positive figure", path, uj))
			}
			err = l.Accrue(slot, uint64(uj))
		case "claim":
			var got uint64
			if got, err = l.Claim(slot, k); err == nil {
				charges = append(charges, poolCharge{Op: op, Slot: slot, IdleUJ: got})
			}
		case "evict":
			var got uint64
			if got, err = l.Evict(slot); err == nil {
				charges = append(charges, poolCharge{Op: op, Slot: slot, IdleUJ: got})
			}
		}
		if err != nil {
			return nil, canon.ID{}, fmt.Errorf("%s: %w", path, err)
		}
	}
	t := l.Totals()
	if !t.Balanced() {
		return nil, canon.ID{}, fmt.Errorf("the books do not balance: %+v", t) // never: the books keep it
	}
	b, err := json.Marshal(struct {
		Charges []poolCharge `json:"charges"`
		books.Totals
	}{charges, t})
	if err != nil {
		return nil, canon.ID{}, err
	}
	out, err := canon.JCS(b)
	if err != nil {
		return nil, canon.ID{}, err
	}
	return out, canon.Sum(out), nil
}

// c9 is class C9, warm pools' idle-energy books (docs/SPEC.md §12).
func c9() Class {
	return Class{
		Name:  "C9",
		Title: "warm pools",
		Ops:   map[string]Op{"pool-books": poolBooks},
	}
}
