package conformance

import (
	"encoding/json"
	"fmt"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/grant/amend"
)

// c21 is class C21, checkpoints and tighten-only amendments
// (docs/SPEC.md §3.7); its vectors are conformance/v1/amend.json.
func c21() Class {
	return Class{
		Name:  "C21",
		Title: "checkpoints and amendments",
		Ops: map[string]Op{
			// amend-apply: {"state": {"run", "grants", "budgets", "seq"},
			// "agent": HEX seed, "issuer": HEX seed, "envelope": DSSE} →
			// {"after", "amendment", "authority", "before"}: the
			// authority before and after (ContentIds), the amendment
			// payload's ContentId and the new authority's JCS.
			"amend-apply": func(in []byte) ([]byte, canon.ID, error) {
				x := readInput(in)
				agentSeed := x.hex("agent", true)
				issuerSeed := x.hex("issuer", true)
				sv, _ := x.value("state")
				env, _ := x.value("envelope")
				if err := x.done(); err != nil {
					return nil, canon.ID{}, err
				}
				st, err := readState(sv)
				if err != nil {
					return nil, canon.ID{}, err
				}
				agent, err := key(agentSeed)
				if err != nil {
					return nil, canon.ID{}, fmt.Errorf("vector input: agent: %w", err)
				}
				issuer, err := key(issuerSeed)
				if err != nil {
					return nil, canon.ID{}, fmt.Errorf("vector input: issuer: %w", err)
				}
				st.Agent = agent.Public()
				next, ch, err := amend.Apply(st, issuer.Public(), env.AppendJCS(nil))
				if err != nil {
					return nil, canon.ID{}, err
				}
				out, err := json.Marshal(map[string]any{"before": ch.Before.String(), "after": ch.After.String(),
					"amendment": canon.Sum(ch.Amendment.JCS()).String(), "authority": json.RawMessage(amend.Authority(next.Grants, next.Budgets))})
				if err != nil {
					return nil, canon.ID{}, err
				}
				j, err := canon.JCS(out)
				if err != nil {
					return nil, canon.ID{}, err
				}
				return j, canon.Sum(j), nil
			},
			// checkpoint-open: {"agent": HEX seed, "envelope": DSSE} → the
			// checkpoint's exact bytes and ContentId, if it verifies under
			// the agent's key and names it.
			"checkpoint-open": func(in []byte) ([]byte, canon.ID, error) {
				x := readInput(in)
				seed := x.hex("agent", true)
				env, _ := x.value("envelope")
				if err := x.done(); err != nil {
					return nil, canon.ID{}, err
				}
				k, err := key(seed)
				if err != nil {
					return nil, canon.ID{}, fmt.Errorf("vector input: agent: %w", err)
				}
				c, err := amend.OpenCheckpoint(env.AppendJCS(nil), k.Public())
				if err != nil {
					return nil, canon.ID{}, err
				}
				return c.JCS(), canon.Sum(c.JCS()), nil
			},
		},
	}
}

// readState reads a vector's authority in force.
func readState(v canon.Value) (amend.State, error) {
	r := &jsonv.Reader{}
	o := r.Object(v, "state")
	run, _ := o.Str("run", true)
	o.Use("grants")
	seq, _ := o.Int("seq", true)
	b := amend.Budgets{}
	if bo, ok := o.Object("budgets", true); ok && bo != nil {
		for _, k := range bo.Members() {
			b[k], _ = bo.Int(k, true)
		}
		bo.End()
	}
	o.End()
	if err := r.Err(); err != nil {
		return amend.State{}, fmt.Errorf("vector input: %w", err)
	}
	gv, _ := v.Get("grants")
	gs, err := grant.FromValue(gv)
	if err != nil {
		return amend.State{}, fmt.Errorf("vector input: state.grants: %w", err)
	}
	return amend.State{Run: run, Grants: gs, Budgets: b, Seq: seq}, nil
}
