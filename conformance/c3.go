package conformance

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cordon-dev/cordon/evidence/attest"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/canon/jsonv"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
)

// Errors of the harness's own checks, for replay and grant mutation.
var (
	errReplayDiverged  = errors.New("replay: diverged")
	errReplayTruncated = errors.New("replay: truncated")
	errGrantMutated    = errors.New("grant set changed mid-run: before and after addresses differ")
	errDenied          = errors.New("request denied")
)

// input reads a vector's JSON object input: its string members by name
// (hex members decoded), refusing unknown members.
type input struct {
	v   canon.Value
	r   *jsonv.Reader
	o   *jsonv.Obj
	err error
}

func readInput(in []byte) *input {
	v, err := canon.Parse(in)
	x := &input{v: v, r: &jsonv.Reader{}, err: err}
	if err == nil {
		x.o = x.r.Object(v, "")
	}
	return x
}

func (x *input) str(name string, required bool) string {
	if x.err != nil {
		return ""
	}
	s, _ := x.o.Str(name, required)
	return s
}

func (x *input) hex(name string, required bool) []byte {
	s := x.str(name, required)
	if x.err != nil || s == "" {
		return nil
	}
	b, err := decodeHex(s)
	if err != nil && x.err == nil {
		x.err = fmt.Errorf("%s: %v", name, err)
	}
	return b
}

func (x *input) value(name string) (canon.Value, bool) {
	if x.err != nil {
		return canon.Value{}, false
	}
	x.o.Use(name)
	return x.v.Get(name)
}

func (x *input) strings(name string) []string {
	if x.err != nil {
		return nil
	}
	s, _ := x.o.Strings(name, false)
	return s
}

func (x *input) done() error {
	if x.err != nil {
		return x.err
	}
	x.o.End()
	return x.r.Err()
}

func key(seed []byte) (*sign.PrivateKey, error) { return sign.NewKeyFromSeed(seed) }

func parseJournal(text string) ([]journal.Entry, error) {
	entries, _, err := journal.Scan(strings.NewReader(text))
	return entries, err
}

// c3 is class C3, receipt integrity and per-device provenance.
func c3() Class {
	return Class{Name: "C3", Title: "receipt integrity and per-device provenance", Ops: map[string]Op{
		// receipt-seal: {"seed": hex, "core": hex CBOR} → the JCR-1 envelope (fixed: Ed25519 is deterministic).
		"receipt-seal": func(in []byte) ([]byte, canon.ID, error) {
			x := readInput(in)
			seed, core := x.hex("seed", true), x.hex("core", true)
			if err := x.done(); err != nil {
				return nil, canon.ID{}, err
			}
			k, err := key(seed)
			if err != nil {
				return nil, canon.ID{}, err
			}
			c, err := receipt.DecodeCore(core)
			if err != nil {
				return nil, canon.ID{}, err
			}
			env, id, err := receipt.Seal(k, c)
			return env, id, err
		},
		"receipt-verify": opReceiptVerify,
	}}
}

// receipt-verify: {"pubkey": hex, "envelope": hex, "used": [classes]?} → the receipt id.
func opReceiptVerify(in []byte) ([]byte, canon.ID, error) {
	x := readInput(in)
	pk, env := x.hex("pubkey", true), x.hex("envelope", true)
	used := x.strings("used")
	if err := x.done(); err != nil {
		return nil, canon.ID{}, err
	}
	pub, err := sign.PublicKeyFromBytes(pk)
	if err != nil {
		return nil, canon.ID{}, err
	}
	c, id, err := receipt.Verify(env, pub)
	if err != nil {
		return nil, canon.ID{}, err
	}
	if err := c.CheckUsed(used); err != nil {
		return nil, canon.ID{}, err
	}
	return []byte(id.String()), id, nil
}

// c4 is class C4, attestation signing and verification.
func c4() Class {
	return Class{Name: "C4", Title: "attestation signing and verification", Ops: map[string]Op{
		// attest-sign: {"seed": hex, "core": {…}} → the signed envelope (JCS).
		"attest-sign": func(in []byte) ([]byte, canon.ID, error) {
			x := readInput(in)
			seed := x.hex("seed", true)
			core, _ := x.value("core")
			if err := x.done(); err != nil {
				return nil, canon.ID{}, err
			}
			k, err := key(seed)
			if err != nil {
				return nil, canon.ID{}, err
			}
			env := sign.Seal(k, sign.PayloadAttestation, core.AppendJCS(nil))
			// Check it as any verifier would, so a vector cannot sign nonsense.
			if _, err := attest.Verify(env, k.Public(), attest.Options{}); err != nil {
				return nil, canon.ID{}, err
			}
			return env, canon.Sum(core.AppendJCS(nil)), nil
		},
		"attest-verify":  opAttestVerify,
		"journal-replay": opJournalReplay,
	}}
}

// attest-verify: {"pubkey": hex, "envelope": {…}, "receipt": hex?, "journal": text?} → "valid".
func opAttestVerify(in []byte) ([]byte, canon.ID, error) {
	x := readInput(in)
	pk := x.hex("pubkey", true)
	env, _ := x.value("envelope")
	rb := x.hex("receipt", false)
	jtext := x.str("journal", false)
	if err := x.done(); err != nil {
		return nil, canon.ID{}, err
	}
	pub, err := sign.PublicKeyFromBytes(pk)
	if err != nil {
		return nil, canon.ID{}, err
	}
	var opts attest.Options
	if rb != nil {
		if opts.Receipt, _, err = receipt.Verify(rb, pub); err != nil {
			return nil, canon.ID{}, err
		}
	}
	if x.o.Has("journal") {
		if opts.Journal, err = parseJournal(jtext); err != nil {
			return nil, canon.ID{}, err
		}
		if opts.Journal == nil {
			opts.Journal = []journal.Entry{}
		}
	}
	if _, err := attest.Verify(env.AppendJCS(nil), pub, opts); err != nil {
		return nil, canon.ID{}, err
	}
	return []byte("valid"), canon.ID{}, nil
}

// journal-replay: {"recorded": text, "reexec": text} → "Consistent", or an
// error for Diverged and Truncated.
func opJournalReplay(in []byte) ([]byte, canon.ID, error) {
	x := readInput(in)
	rec, re := x.str("recorded", true), x.str("reexec", true)
	if err := x.done(); err != nil {
		return nil, canon.ID{}, err
	}
	a, err := parseJournal(rec)
	if err != nil {
		return nil, canon.ID{}, err
	}
	b, err := parseJournal(re)
	if err != nil {
		return nil, canon.ID{}, err
	}
	switch r := journal.Replay(a, b); r.Status {
	case journal.Diverged:
		return nil, canon.ID{}, fmt.Errorf("%w at %d", errReplayDiverged, r.Index)
	case journal.Truncated:
		return nil, canon.ID{}, fmt.Errorf("%w at %d", errReplayTruncated, r.Index)
	}
	return []byte("Consistent"), canon.ID{}, nil
}

// cneg is class C-neg: runs a conformant host must reject. Every vector
// expects an error.
func cneg() Class {
	return Class{Name: "C-neg", Title: "negatives", Ops: map[string]Op{
		// decide: as in C2, but a denial is the expected error "denied".
		"decide": func(in []byte) ([]byte, canon.ID, error) {
			out, id, err := opDecide(in)
			if err == nil && string(out) == "deny" {
				return nil, id, errDenied
			}
			return out, id, err
		},
		"select":         opSelect,
		"receipt-verify": opReceiptVerify,
		"attest-verify":  opAttestVerify,
		"journal-replay": opJournalReplay,
		// journal-verify: {"journal": text} → its head, or journal-broken.
		"journal-verify": func(in []byte) ([]byte, canon.ID, error) {
			x := readInput(in)
			text := x.str("journal", true)
			if err := x.done(); err != nil {
				return nil, canon.ID{}, err
			}
			h, err := journal.Verify(strings.NewReader(text))
			return []byte(h.ID.String()), h.ID, err
		},
		// grant-mutation: {"before": GRANTS, "after": GRANTS} → "unchanged", or
		// grant-mutated when the two grant sets' addresses differ.
		"grant-mutation": func(in []byte) ([]byte, canon.ID, error) {
			x := readInput(in)
			bv, _ := x.value("before")
			av, _ := x.value("after")
			if err := x.done(); err != nil {
				return nil, canon.ID{}, err
			}
			b, err := grant.FromValue(bv)
			if err != nil {
				return nil, canon.ID{}, err
			}
			a, err := grant.FromValue(av)
			if err != nil {
				return nil, canon.ID{}, err
			}
			if a.ID() != b.ID() {
				return nil, canon.ID{}, fmt.Errorf("%w: %s → %s", errGrantMutated, b.ID(), a.ID())
			}
			return []byte("unchanged"), a.ID(), nil
		},
	}}
}
