package conformance

import (
	"fmt"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/tier"
	"github.com/cordon-dev/cordon/tier/selection"
)

// members parses in as a JSON object and returns the named members, all
// required, refusing any other.
func members(in []byte, names ...string) ([]canon.Value, error) {
	v, err := canon.Parse(in)
	if err != nil {
		return nil, err
	}
	r := &jsonv.Reader{}
	o := r.Object(v, "")
	var out []canon.Value
	for _, n := range names {
		o.Use(n)
		x, ok := v.Get(n)
		if !ok {
			return nil, fmt.Errorf("vector input: missing %q", n)
		}
		out = append(out, x)
	}
	o.End()
	return out, r.Err()
}

func outcome(allow bool) []byte {
	if allow {
		return []byte("allow")
	}
	return []byte("deny")
}

// decide: {"grants": GRANTS, "query": QUERY} → "allow" or "deny".
func opDecide(in []byte) ([]byte, canon.ID, error) {
	m, err := members(in, "grants", "query")
	if err != nil {
		return nil, canon.ID{}, err
	}
	s, err := grant.FromValue(m[0])
	if err != nil {
		return nil, canon.ID{}, err
	}
	q, err := grant.QueryFromValue(m[1])
	if err != nil {
		return nil, canon.ID{}, err
	}
	return outcome(grant.New(s).Decide(q).Allow), s.ID(), nil
}

// c2 is class C2, capability enforcement: the deny-by-default Enforcer,
// strict grant sets and attenuation.
func c2() Class {
	return Class{
		Name:  "C2",
		Title: "capability enforcement",
		Ops: map[string]Op{
			"decide": opDecide,
			// grant-parse: a grant set → its ContentId, or grant-invalid.
			"grant-parse": func(in []byte) ([]byte, canon.ID, error) {
				s, err := grant.Parse(in)
				if err != nil {
					return nil, canon.ID{}, err
				}
				return s.JCS(), s.ID(), nil
			},
			// covers: {"parent": GRANTS, "child": GRANTS} → "covered", or widening.
			"covers": func(in []byte) ([]byte, canon.ID, error) {
				m, err := members(in, "parent", "child")
				if err != nil {
					return nil, canon.ID{}, err
				}
				p, err := grant.FromValue(m[0])
				if err != nil {
					return nil, canon.ID{}, err
				}
				c, err := grant.FromValue(m[1])
				if err != nil {
					return nil, canon.ID{}, err
				}
				if err := grant.Covers(p, c); err != nil {
					return nil, canon.ID{}, err
				}
				return []byte("covered"), c.ID(), nil
			},
		},
	}
}

// c5 is class C5, tier minimization.
func c5() Class {
	return Class{
		Name:  "C5",
		Title: "tier minimization",
		Ops: map[string]Op{
			// tier: a grant set → the tier it requires.
			"tier": func(in []byte) ([]byte, canon.ID, error) {
				s, err := grant.Parse(in)
				if err != nil {
					return nil, canon.ID{}, err
				}
				return []byte(selection.Required(s).String()), s.ID(), nil
			},
			// select: {"grants": GRANTS, "offers": ["S0", …]} → the tier the
			// host runs, or tier-not-offered.
			"select": opSelect,
		},
	}
}

// c8 is class C8, content-addressed process control: exec decisions on the
// BLAKE3 of the binary.
func c8() Class {
	return Class{
		Name:  "C8",
		Title: "content-addressed process control",
		Ops:   map[string]Op{"decide": opDecide},
	}
}

// opSelect: {"grants": GRANTS, "offers": ["S0", …]} → the tier the host
// runs, or tier-not-offered.
func opSelect(in []byte) ([]byte, canon.ID, error) {
	v, err := canon.Parse(in)
	if err != nil {
		return nil, canon.ID{}, err
	}
	r := &jsonv.Reader{}
	o := r.Object(v, "")
	gv, _ := v.Get("grants")
	o.Use("grants")
	offers, _ := o.Strings("offers", true)
	o.End()
	if err := r.Err(); err != nil {
		return nil, canon.ID{}, err
	}
	s, err := grant.FromValue(gv)
	if err != nil {
		return nil, canon.ID{}, err
	}
	var h selection.Host
	for _, name := range offers {
		t, err := tier.Parse(name)
		if err != nil {
			return nil, canon.ID{}, err
		}
		h.Offers = append(h.Offers, t)
	}
	t, err := h.Select(s)
	if err != nil {
		return nil, canon.ID{}, err
	}
	return []byte(t.String()), s.ID(), nil
}
