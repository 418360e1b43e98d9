package conformance

import (
	"fmt"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/evidence/durable"
)

// c6 is class C6, durable run records (docs/SPEC.md §9); its vectors are
// the seed's durable.json (conformance/v1/durable.json).
func c6() Class {
	return Class{
		Name:  "C6",
		Title: "durable run records",
		Ops: map[string]Op{
			// record-verify: a record's wire form → its head's JCS and address.
			"record-verify": func(in []byte) ([]byte, canon.ID, error) {
				r, err := durable.Parse(in)
				if err != nil {
					return nil, canon.ID{}, err
				}
				h := r.Head().JCS()
				return h, canon.Sum(h), nil
			},
			// record-append: {"record": WIRE, "segment": SEGMENT} → the
			// appended segment's JCS (its seq and prev filled in) and its
			// address, or the refusal.
			"record-append": func(in []byte) ([]byte, canon.ID, error) {
				m, err := members(in, "record", "segment")
				if err != nil {
					return nil, canon.ID{}, err
				}
				if m[0].Kind() != canon.KindString {
					return nil, canon.ID{}, fmt.Errorf("vector input: record is the wire form as a string")
				}
				rec, err := durable.Parse([]byte(m[0].Str()))
				if err != nil {
					return nil, canon.ID{}, err
				}
				s, err := segmentFromValue(m[1])
				if err != nil {
					return nil, canon.ID{}, err
				}
				id, err := rec.Append(s)
				if err != nil {
					return nil, canon.ID{}, err
				}
				segs := rec.Segments()
				last := segs[len(segs)-1]
				return last.JCS(), id, nil
			},
		},
	}
}

// segmentFromValue reads a segment to append: its kind and members, no
// seq or prev (Append sets them).
func segmentFromValue(v canon.Value) (durable.Segment, error) {
	r := &jsonv.Reader{}
	o := r.Object(v, "segment")
	var s durable.Segment
	s.Kind, _ = o.Str("kind", true)
	id := func(name string, required bool, dst *canon.ID) {
		if str, ok := o.Str(name, required); ok && r.Err() == nil {
			x, err := canon.ParseID(str)
			if err != nil {
				r.Fail(name, "%v", err)
			}
			*dst = x
		}
	}
	id("manifest", true, &s.Manifest)
	id("grants", true, &s.Grants)
	id("env", true, &s.Env)
	id("snapshot", false, &s.Snapshot)
	id("receipt", false, &s.Receipt)
	s.EnergyUJ, _ = o.Int("energy_uj", false)
	s.IdleUJ, _ = o.Int("idle_uj", false)
	s.ParkedMS, _ = o.Int("parked_ms", false)
	s.IdleProvenance, _ = o.Str("idle_provenance", false)
	o.End()
	return s, r.Err()
}
