package conformance

import (
	"errors"
	"fmt"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/grant/standing"
)

// c20 is class C20, standing grants (docs/SPEC.md §3.6); its vectors are
// the seed's standing.json (conformance/v1/standing.json).
func c20() Class {
	return Class{
		Name:  "C20",
		Title: "standing grants",
		Ops: map[string]Op{
			// mint: {"policy", "event", "child" (null: the bounds), "now_ms",
			// "total", "in_window"} → the minted child's JCS and address.
			"mint": func(in []byte) ([]byte, canon.ID, error) {
				v, err := canon.Parse(in)
				if err != nil {
					return nil, canon.ID{}, err
				}
				r := &jsonv.Reader{}
				o := r.Object(v, "")
				o.Use("policy")
				o.Use("event")
				o.Use("child")
				now, _ := o.Int("now_ms", true)
				total, _ := o.Int("total", true)
				inWindow, _ := o.Int("in_window", true)
				o.End()
				if err := r.Err(); err != nil {
					return nil, canon.ID{}, err
				}
				pv, _ := v.Get("policy")
				ev, _ := v.Get("event")
				cv, ok := v.Get("child")
				if !ok {
					return nil, canon.ID{}, errors.New("vector input: missing \"child\"")
				}
				p, err := standing.ParsePolicy(pv.AppendJCS(nil))
				if err != nil {
					return nil, canon.ID{}, err
				}
				e, err := standing.ParseEvent(ev.AppendJCS(nil))
				if err != nil {
					return nil, canon.ID{}, err
				}
				var child *grant.Set
				if cv.Kind() != canon.KindNull {
					if child, err = grant.FromValue(cv); err != nil {
						return nil, canon.ID{}, err
					}
				}
				m, err := standing.Mint(p, e, child, now, standing.Counts{Total: total, InWindow: inWindow})
				if err != nil {
					return nil, canon.ID{}, err
				}
				return m.JCS(), canon.Sum(m.JCS()), nil
			},
			// policy-open: {"seed": HEX, "envelope": DSSE} → the policy's
			// address, if the envelope verifies under the seed's public key
			// and the policy names that key as its issuer.
			"policy-open": func(in []byte) ([]byte, canon.ID, error) {
				x := readInput(in)
				seed := x.hex("seed", true)
				env, _ := x.value("envelope")
				if err := x.done(); err != nil {
					return nil, canon.ID{}, err
				}
				k, err := key(seed)
				if err != nil {
					return nil, canon.ID{}, fmt.Errorf("vector input: seed: %w", err)
				}
				p, err := standing.OpenPolicy(env.AppendJCS(nil), k.Public())
				if err != nil {
					return nil, canon.ID{}, err
				}
				return []byte(p.ID().String()), p.ID(), nil
			},
		},
	}
}
