package receipt

// Adversarial review tests (docs/SPEC.md §4.4): signed receipts whose
// bytes or energy accounting are wrong must not verify. Each core here is
// signed with the right key in the receipt context, so only the receipt
// rules stand between it and acceptance.

import (
	"bytes"
	"encoding/base64"
	"errors"
	"math"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/cordon-dev/cordon/evidence/sign"
)

// sealRaw wraps arbitrary core bytes in a canonical JCR-1 envelope with a
// valid signature, bypassing Seal's validation.
func sealRaw(t *testing.T, k *sign.PrivateKey, core []byte) []byte {
	t.Helper()
	// The encoder refuses ill-formed RawMessages, so encode a placeholder
	// core and splice the raw bytes in.
	placeholder, _ := cbor.Marshal("REVIEW-PLACEHOLDER-CORE")
	env := envelope{Type: EnvelopeType, Core: placeholder, Sigs: []signature{{
		KeyID: k.Public().ID().String(),
		Sig:   base64.RawURLEncoding.EncodeToString(k.Sign(sign.PayloadReceipt, core)),
	}}}
	b, err := encMode.Marshal(env)
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Count(b, placeholder) != 1 {
		t.Fatal("construction: placeholder")
	}
	return bytes.Replace(b, placeholder, core, 1)
}

// coreMap returns sample()'s core as a generic map to edit.
func coreMap(t *testing.T) map[string]any {
	t.Helper()
	var m map[string]any
	if err := cbor.Unmarshal(sample().Encode(), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func detEncode(t *testing.T, v any) []byte {
	t.Helper()
	b, err := encMode.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestReviewEnergyAccounting(t *testing.T) {
	k, _ := sign.Generate()
	for _, tc := range []struct {
		name string
		edit func(c *Core)
		want error
	}{
		{"estimator with measured", func(c *Core) { c.Devices[0].MeasuredUJ = u(1) }, ErrCoupling},
		{"hwshunt without measured", func(c *Core) { c.Devices[1].MeasuredUJ = nil }, ErrCoupling},
		{"estimator with attribution", func(c *Core) {
			c.Devices[0].Attribution = &Attribution{Method: "cpu-time-share", Num: 1, Den: 2}
		}, ErrCoupling},
		{"attribution num > den", func(c *Core) {
			c.Devices[1].Attribution = &Attribution{Method: "cpu-time-share", Num: 3, Den: 2}
		}, ErrInvalid},
		{"attribution den 0", func(c *Core) {
			c.Devices[1].Attribution = &Attribution{Method: "cpu-time-share", Num: 0, Den: 0}
		}, ErrInvalid},
		{"attribution bad method", func(c *Core) {
			c.Devices[1].Attribution = &Attribution{Method: "", Num: 0, Den: 1}
		}, ErrInvalid},
		{"total estimated off by one", func(c *Core) { c.Total.EstimatedUJ++ }, ErrSum},
		{"total busy off by one", func(c *Core) { c.Total.BusyNS-- }, ErrSum},
		{"total measured present, not all measured", func(c *Core) { c.Total.MeasuredUJ = u(8700000) }, ErrCoverage},
		{"all measured, total measured absent", func(c *Core) {
			c.Devices[0] = Device{Class: "cpu", Provenance: HwShunt, EstimatedUJ: 1500000, MeasuredUJ: u(1), BusyNS: 1200000000}
		}, ErrCoverage},
		{"all measured, total measured wrong", func(c *Core) {
			c.Devices[0] = Device{Class: "cpu", Provenance: HwShunt, EstimatedUJ: 1500000, MeasuredUJ: u(1), BusyNS: 1200000000}
			c.Finish()
			*c.Total.MeasuredUJ += 1
		}, ErrSum},
		{"estimated wraps to total", func(c *Core) {
			c.Devices[0].EstimatedUJ = math.MaxUint64
			c.Devices[1].EstimatedUJ = 2
			c.Total.EstimatedUJ = 1 // the wrapped sum
		}, ErrSum},
		{"busy wraps to total", func(c *Core) {
			c.Devices[0].BusyNS = 1 << 63
			c.Devices[1].BusyNS = 1 << 63
			c.Total.BusyNS = 0
		}, ErrSum},
		{"measured wraps to total", func(c *Core) {
			c.Devices[0] = Device{Class: "cpu", Provenance: HwShunt, EstimatedUJ: 1500000, MeasuredUJ: u(math.MaxUint64), BusyNS: 1200000000}
			c.Finish()
			c.Total.MeasuredUJ = u(*c.Devices[1].MeasuredUJ - 1)
		}, ErrSum},
		{"energy folded: gpu moved into cpu, devices duplicate", func(c *Core) {
			c.Devices[1].Class = "cpu"
		}, ErrInvalid},
		{"devices unsorted", func(c *Core) { c.Devices[0], c.Devices[1] = c.Devices[1], c.Devices[0] }, ErrInvalid},
		{"device class upper case", func(c *Core) { c.Devices[0].Class = "CPU" }, ErrInvalid},
		{"provenance case", func(c *Core) { c.Devices[0].Provenance = "estimator" }, ErrInvalid},
		{"no devices", func(c *Core) { c.Devices = nil; c.Finish() }, ErrInvalid},
		{"empty devices", func(c *Core) { c.Devices = []Device{}; c.Finish() }, ErrInvalid},
		{"tier lower case", func(c *Core) { c.Tier = "s2" }, ErrInvalid},
		{"tier S7", func(c *Core) { c.Tier = "S7" }, ErrInvalid},
		{"end before start", func(c *Core) { c.EndNS = c.StartNS - 1 }, ErrInvalid},
		{"outputs nil", func(c *Core) { c.Outputs = nil }, ErrInvalid},
		{"output absolute", func(c *Core) { c.Outputs = map[string]string{"/etc/passwd": c.Unit} }, ErrInvalid},
		{"output dotdot", func(c *Core) { c.Outputs = map[string]string{"../x": c.Unit} }, ErrInvalid},
		{"output inner dotdot", func(c *Core) { c.Outputs = map[string]string{"a/../../x": c.Unit} }, ErrInvalid},
		{"output dot", func(c *Core) { c.Outputs = map[string]string{"./x": c.Unit} }, ErrInvalid},
		{"output newline", func(c *Core) { c.Outputs = map[string]string{"x\ny": c.Unit} }, ErrInvalid},
		{"output bad id", func(c *Core) { c.Outputs = map[string]string{"x": "b3:"} }, ErrInvalid},
		{"unit not an id", func(c *Core) { c.Unit = "sha256:abc" }, ErrInvalid},
		{"journal_root bad", func(c *Core) { c.JournalRoot = "b3:" + string(make([]byte, 43)) }, ErrInvalid},
		{"wrong type", func(c *Core) { c.Type = "cordon.receipt.v2" }, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sample()
			tc.edit(c)
			env := sealRaw(t, k, c.Encode())
			if got, _, err := Verify(env, k.Public()); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %+v, %v; want %v", got, err, tc.want)
			}
			if _, _, err := Seal(k, c); err == nil {
				t.Fatal("Seal accepted it")
			}
		})
	}
}

// Two byte strings for the same core: only the canonical one verifies.
func TestReviewCoreMalleability(t *testing.T) {
	k, _ := sign.Generate()
	good := sample().Encode()
	if _, _, err := Verify(sealRaw(t, k, good), k.Public()); err != nil {
		t.Fatal(err)
	}
	m := coreMap(t)
	variants := map[string][]byte{}
	// Unsorted keys.
	unsorted, _ := cbor.EncOptions{Sort: cbor.SortNone}.EncMode()
	if b, _ := unsorted.Marshal(m); !bytes.Equal(b, good) {
		variants["unsorted map"] = b
	}
	// Non-minimal integer: exit 0 as 0x18 0x00.
	if i := bytes.Index(good, []byte("\x64exit\x00")); i >= 0 {
		b := append(append(append([]byte(nil), good[:i+5]...), 0x18, 0x00), good[i+6:]...)
		variants["non-minimal int"] = b
	} else {
		t.Fatal("construction: no exit key")
	}
	// Indefinite-length outer map.
	if good[0]&0xe0 == 0xa0 {
		b := append([]byte{0xbf}, good[1:]...)
		b = append(b, 0xff)
		variants["indefinite map"] = b
	}
	// Tagged core (self-describe tag 55799).
	variants["tagged"] = append([]byte{0xd9, 0xd9, 0xf7}, good...)
	// Trailing byte.
	variants["trailing"] = append(append([]byte(nil), good...), 0x00)
	// Unknown member.
	m2 := coreMap(t)
	m2["x"] = 1
	variants["unknown member"] = detEncode(t, m2)
	// Case variant of a member name.
	m3 := coreMap(t)
	m3["Tier"] = m3["tier"]
	delete(m3, "tier")
	variants["case variant"] = detEncode(t, m3)
	// Missing member.
	m4 := coreMap(t)
	delete(m4, "exit")
	variants["missing exit"] = detEncode(t, m4)
	// Explicit empty optional members.
	m5 := coreMap(t)
	m5["prev"] = ""
	variants["empty prev"] = detEncode(t, m5)
	// Explicit null measured_uj in an Estimator record.
	m6 := coreMap(t)
	m6["devices"].([]any)[0].(map[any]any)["measured_uj"] = nil
	variants["null measured"] = detEncode(t, m6)
	// Float for an integer.
	m7 := coreMap(t)
	m7["exit"] = 0.0
	variants["float exit"] = detEncode(t, m7)
	// Byte string for a text.
	m8 := coreMap(t)
	m8["tier"] = []byte("S2")
	variants["bytes tier"] = detEncode(t, m8)
	// Negative start.
	m9 := coreMap(t)
	m9["start_ns"] = -1
	variants["negative start"] = detEncode(t, m9)
	// Duplicate key: append a second "exit" and bump the map length.
	if good[0] >= 0xa0 && good[0] < 0xb7 {
		b := append([]byte{good[0] + 1}, good[1:]...)
		b = append(b, []byte("\x64exit\x01")...)
		variants["duplicate exit"] = b
	}
	for name, b := range variants {
		t.Run(name, func(t *testing.T) {
			if bytes.Equal(b, good) {
				t.Fatal("construction: variant equals the canonical core")
			}
			got, id, err := Verify(sealRaw(t, k, b), k.Public())
			if err == nil {
				t.Fatalf("a non-canonical core verified: %s %+v", id, got)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// The envelope itself: non-canonical, wrong type, context confusion,
// signatures by the wrong key.
func TestReviewEnvelope(t *testing.T) {
	k, _ := sign.Generate()
	other, _ := sign.Generate()
	core := sample().Encode()
	good := sealRaw(t, k, core)
	kid := k.Public().ID().String()
	mk := func(typ string, core []byte, sigs []signature) []byte {
		b, err := encMode.Marshal(envelope{Type: typ, Core: core, Sigs: sigs})
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	sigIn := func(ctx string) string {
		return base64.RawURLEncoding.EncodeToString(k.Sign(ctx, core))
	}
	goodSig := sigIn(sign.PayloadReceipt)
	var genv map[string]any
	cbor.Unmarshal(good, &genv)
	genv["x"] = 1
	extra := detEncode(t, genv)
	for name, env := range map[string][]byte{
		"attestation context": mk(EnvelopeType, core, []signature{{kid, sigIn(sign.PayloadAttestation)}}),
		"journal context":     mk(EnvelopeType, core, []signature{{kid, sigIn(sign.PayloadJournalHead)}}),
		"wrong envelope type": mk("cordon.jcr.v2", core, []signature{{kid, goodSig}}),
		"other key's kid":     mk(EnvelopeType, core, []signature{{other.Public().ID().String(), goodSig}}),
		"padded base64":       mk(EnvelopeType, core, []signature{{kid, base64.URLEncoding.EncodeToString(k.Sign(sign.PayloadReceipt, core))}}),
		"std alphabet":        mk(EnvelopeType, core, []signature{{kid, base64.RawStdEncoding.EncodeToString(k.Sign(sign.PayloadReceipt, core))}}),
		"no sigs":             mk(EnvelopeType, core, nil),
		"empty sigs":          mk(EnvelopeType, core, []signature{}),
		"bad second kid":      mk(EnvelopeType, core, []signature{{kid, goodSig}, {"nope", goodSig}}),
		"extra member":        extra,
		"trailing byte":       append(append([]byte(nil), good...), 0),
	} {
		if bytes.Equal(env, good) && name != "std alphabet" {
			t.Fatalf("%s: construction", name)
		}
		if bytes.Equal(env, good) {
			continue // the signature has no '-' or '_'
		}
		if got, _, err := Verify(env, k.Public()); err == nil {
			t.Errorf("%s: verified %+v", name, got)
		}
	}
	// A zero key verifies nothing.
	if _, _, err := Verify(good, sign.PublicKey{}); err == nil {
		t.Error("zero key verified")
	}
	// Truncations of a good envelope never verify nor panic.
	for i := range len(good) {
		if _, _, err := Verify(good[:i], k.Public()); err == nil {
			t.Fatalf("truncation to %d bytes verified", i)
		}
	}
}

// CheckUsed: an accelerator's energy folded into the CPU record is refused
// when the journal shows the accelerator was used.
func TestReviewCheckUsedFolded(t *testing.T) {
	c := sample()
	c.Devices = c.Devices[:1] // cpu only
	c.Devices[0].EstimatedUJ += 9000000
	c.Finish()
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := c.CheckUsed([]string{"cpu", "gpu"}); !errors.Is(err, ErrCoverage) {
		t.Fatalf("CheckUsed = %v", err)
	}
}
