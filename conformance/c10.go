package conformance

import (
	"fmt"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/evidence/fleet"
)

// fleetLeaves reads {"task": ID, "items": [[NAME, RECEIPT-ID], …]} into a
// task and the leaves, indexed in order.
func fleetLeaves(v canon.Value, r *jsonv.Reader, o *jsonv.Obj) (canon.ID, []fleet.Leaf, error) {
	task, _ := o.Str("task", true)
	items, _ := o.Array("items", true)
	if err := r.Err(); err != nil {
		return canon.ID{}, nil, err
	}
	tid, err := canon.ParseID(task)
	if err != nil {
		return canon.ID{}, nil, fmt.Errorf("%w: task: %w", fleet.ErrInvalid, err)
	}
	var ls []fleet.Leaf
	for i, it := range items {
		if it.Kind() != canon.KindArray || it.Len() != 2 {
			return canon.ID{}, nil, fmt.Errorf("vector input: items[%d] is not [NAME, RECEIPT]", i)
		}
		var pair []canon.Value
		for _, e := range it.Elems() {
			pair = append(pair, e)
		}
		rid, err := canon.ParseID(pair[1].Str())
		if err != nil {
			return canon.ID{}, nil, fmt.Errorf("%w: items[%d]: %w", fleet.ErrInvalid, i, err)
		}
		ls = append(ls, fleet.Leaf{Index: uint64(i), Item: pair[0].Str(), Receipt: rid})
	}
	return tid, ls, nil
}

// c10 is class C10, fleet records (docs/SPEC.md §8).
func c10() Class {
	return Class{
		Name:  "C10",
		Title: "fleet records",
		Ops: map[string]Op{
			// fleet-record: {"task", "items"} → the record's JCS and address.
			"fleet-record": func(in []byte) ([]byte, canon.ID, error) {
				v, err := canon.Parse(in)
				if err != nil {
					return nil, canon.ID{}, err
				}
				r := &jsonv.Reader{}
				o := r.Object(v, "")
				task, ls, err := fleetLeaves(v, r, o)
				o.End()
				if err == nil {
					err = r.Err()
				}
				if err != nil {
					return nil, canon.ID{}, err
				}
				t, err := fleet.Build(task, ls)
				if err != nil {
					return nil, canon.ID{}, err
				}
				rec := t.Record()
				return rec.JCS(), rec.ID(), nil
			},
			// fleet-prove: {"task", "items", "index"} → the proof's JCS.
			"fleet-prove": func(in []byte) ([]byte, canon.ID, error) {
				v, err := canon.Parse(in)
				if err != nil {
					return nil, canon.ID{}, err
				}
				r := &jsonv.Reader{}
				o := r.Object(v, "")
				task, ls, err := fleetLeaves(v, r, o)
				idx, _ := o.Int("index", true)
				o.End()
				if err == nil {
					err = r.Err()
				}
				if err != nil {
					return nil, canon.ID{}, err
				}
				t, err := fleet.Build(task, ls)
				if err != nil {
					return nil, canon.ID{}, err
				}
				if idx < 0 {
					return nil, canon.ID{}, fmt.Errorf("%w: index %d", fleet.ErrInvalid, idx)
				}
				p, err := t.Prove(uint64(idx))
				if err != nil {
					return nil, canon.ID{}, err
				}
				return p.JCS(), canon.Sum(p.JCS()), nil
			},
			// fleet-verify: {"record": RECORD, "proof": PROOF} → "included",
			// or not-included / fleet-invalid.
			"fleet-verify": func(in []byte) ([]byte, canon.ID, error) {
				m, err := members(in, "record", "proof")
				if err != nil {
					return nil, canon.ID{}, err
				}
				rec, err := fleet.ParseRecord(m[0].AppendJCS(nil))
				if err != nil {
					return nil, canon.ID{}, err
				}
				p, err := fleet.ParseProof(m[1].AppendJCS(nil))
				if err != nil {
					return nil, canon.ID{}, err
				}
				if err := fleet.Verify(rec, p); err != nil {
					return nil, canon.ID{}, err
				}
				return []byte("included"), canon.ID{}, nil
			},
		},
	}
}
