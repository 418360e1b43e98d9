package receipt

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/fxamacker/cbor/v2"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
)

func u(n uint64) *uint64 { return &n }

func sample() *Core {
	c := &Core{
		Type: Type, Unit: canon.Sum([]byte("unit")).String(), Grants: canon.Sum([]byte("grants")).String(), Tier: "S2",
		StartNS: 1764480000123456789, EndNS: 1764480001623456789, Exit: 0,
		Outputs: map[string]string{"out/report.xml": canon.Sum([]byte("report")).String()},
		Devices: []Device{
			{Class: "cpu", Provenance: Estimator, EstimatedUJ: 1500000, BusyNS: 1200000000},
			{Class: "gpu", Provenance: HwShunt, EstimatedUJ: 9000000, MeasuredUJ: u(8700000), BusyNS: 900000000},
		},
		JournalRoot: canon.Sum([]byte("journal")).String(),
	}
	c.Finish()
	return c
}

// TestC1Vector decodes the receipt core of conformance vector C1-003 (built
// from a map) into Core and re-encodes it to the same bytes.
func TestC1Vector(t *testing.T) {
	raw, err := os.ReadFile("../../conformance/v1/C1.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Vectors []struct {
			ID       string `json:"id"`
			InputHex string `json:"input_hex"`
		} `json:"vectors"`
	}
	json.Unmarshal(raw, &f)
	for _, v := range f.Vectors {
		if v.ID != "C1-003-receipt-core" {
			continue
		}
		b, _ := hex.DecodeString(v.InputHex)
		c, err := DecodeCore(b)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("the C1 receipt core does not validate: %v", err)
		}
		if c.ID().String() != "b3:eK71KUjmuBaOJYtW8Ndl8MV0losOJy9g_JDPKrZD5_o" {
			t.Fatalf("C1 receipt core id %s", c.ID())
		}
		return
	}
	t.Fatal("vector C1-003-receipt-core not found")
}

func TestSealVerify(t *testing.T) {
	k, _ := sign.Generate()
	env, _, err := Seal(k, sample())
	if err != nil {
		t.Fatal(err)
	}
	c, id, err := Verify(env, k.Public())
	if err != nil {
		t.Fatal(err)
	}
	if id != sample().ID() || c.Total.EstimatedUJ != 10500000 || c.Total.MeasuredUJ != nil {
		t.Fatalf("Verify = %+v, %s", c, id)
	}
	// The envelope round-trips to byte-identical bytes.
	again, _, err := Seal(k, c)
	if err != nil || string(again) != string(env) {
		t.Fatalf("re-sealing the verified core changed the bytes")
	}
	// Every single-bit change is refused.
	for i := range len(env) * 8 {
		e := append([]byte(nil), env...)
		e[i/8] ^= 1 << (i % 8)
		if _, _, err := Verify(e, k.Public()); err == nil {
			t.Fatalf("envelope with bit %d flipped verified", i)
		}
	}
	other, _ := sign.Generate()
	if _, _, err := Verify(env, other.Public()); !errors.Is(err, sign.ErrBadSignature) {
		t.Errorf("Verify under another key: %v", err)
	}
}

// TestVerifyRefuses builds envelopes that are signed correctly but wrong
// in content, and checks each is refused for the right reason.
func TestVerifyRefuses(t *testing.T) {
	k, _ := sign.Generate()
	sealRaw := func(core []byte) []byte {
		env := envelope{Type: EnvelopeType, Core: core, Sigs: []signature{{KeyID: k.Public().ID().String(),
			Sig: b64(k.Sign(sign.PayloadReceipt, core))}}}
		b, _ := encMode.Marshal(env)
		return b
	}
	for _, tc := range []struct {
		name string
		edit func(c *Core)
		want error
	}{
		{"hwshunt without measured", func(c *Core) { c.Devices[1].MeasuredUJ = nil; c.Finish() }, ErrCoupling},
		{"estimator with measured", func(c *Core) { c.Devices[0].MeasuredUJ = u(1); c.Finish(); c.Total.MeasuredUJ = nil }, ErrCoupling},
		{"estimated total wrong", func(c *Core) { c.Total.EstimatedUJ++ }, ErrSum},
		{"busy total wrong", func(c *Core) { c.Total.BusyNS-- }, ErrSum},
		{"measured total present without coverage", func(c *Core) { c.Total.MeasuredUJ = u(8700000) }, ErrCoverage},
		{"measured total absent with coverage", func(c *Core) {
			c.Devices[0] = Device{Class: "cpu", Provenance: HwShunt, EstimatedUJ: 1, MeasuredUJ: u(2), BusyNS: 3}
			c.Finish()
			c.Total.MeasuredUJ = nil
		}, ErrCoverage},
		{"measured total wrong", func(c *Core) {
			c.Devices[0] = Device{Class: "cpu", Provenance: HwShunt, EstimatedUJ: 1, MeasuredUJ: u(2), BusyNS: 3}
			c.Finish()
			*c.Total.MeasuredUJ++
		}, ErrSum},
		{"overflow", func(c *Core) { c.Devices[0].EstimatedUJ = 1<<64 - 1; c.Finish() }, ErrSum},
		{"attributed estimate", func(c *Core) { c.Devices[0].Attribution = &Attribution{Method: "cpu-time-share", Num: 1, Den: 2} }, ErrCoupling},
		{"attribution over one", func(c *Core) { c.Devices[1].Attribution = &Attribution{Method: "cpu-time-share", Num: 3, Den: 2} }, ErrInvalid},
		{"no devices", func(c *Core) { c.Devices = nil; c.Finish() }, ErrInvalid},
		{"unsorted devices", func(c *Core) { c.Devices[0], c.Devices[1] = c.Devices[1], c.Devices[0] }, ErrInvalid},
		{"duplicate class", func(c *Core) { c.Devices[1].Class = "cpu"; c.Finish() }, ErrInvalid},
		{"unknown provenance", func(c *Core) { c.Devices[0].Provenance = "Guess" }, ErrInvalid},
		{"end before start", func(c *Core) { c.EndNS = c.StartNS - 1 }, ErrInvalid},
		{"bad tier", func(c *Core) { c.Tier = "S9" }, ErrInvalid},
		{"bad unit id", func(c *Core) { c.Unit = "sha256:abc" }, ErrInvalid},
		{"absolute output", func(c *Core) { c.Outputs = map[string]string{"/etc/passwd": c.Unit} }, ErrInvalid},
		{"dotdot output", func(c *Core) { c.Outputs = map[string]string{"../x": c.Unit} }, ErrInvalid},
		{"wrong type", func(c *Core) { c.Type = "cordon.receipt.v2" }, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := sample()
			tc.edit(c)
			if _, _, err := Verify(sealRaw(c.Encode()), k.Public()); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
			if _, _, err := Seal(k, c); err == nil {
				t.Fatalf("Seal accepted an invalid core")
			}
		})
	}
	// Cores that are not what Core encodes: an unknown member, a missing
	// member, a non-canonical encoding.
	m := map[string]any{}
	cbor.Unmarshal(sample().Encode(), &m)
	m["extra"] = 1
	withExtra, _ := encMode.Marshal(m)
	delete(m, "extra")
	delete(m, "exit")
	missing, _ := encMode.Marshal(m)
	for name, core := range map[string][]byte{"unknown member": withExtra, "missing member": missing} {
		if _, _, err := Verify(sealRaw(core), k.Public()); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: Verify = %v", name, err)
		}
	}
	// A signature in another context does not verify as a receipt.
	core := sample().Encode()
	env := envelope{Type: EnvelopeType, Core: core, Sigs: []signature{{KeyID: k.Public().ID().String(), Sig: b64(k.Sign(sign.PayloadAttestation, core))}}}
	b, _ := encMode.Marshal(env)
	if _, _, err := Verify(b, k.Public()); !errors.Is(err, sign.ErrBadSignature) {
		t.Errorf("cross-context signature: %v", err)
	}
	// A non-canonical envelope (a long head for the type string length).
	good, _, _ := Seal(k, sample())
	bad := strings.Replace(string(good), "\x6dcordon.jcr.v1", "\x78\x0dcordon.jcr.v1", 1)
	if bad == string(good) {
		t.Fatal("test setup: type string not found")
	}
	if _, _, err := Verify([]byte(bad), k.Public()); !errors.Is(err, ErrInvalid) {
		t.Errorf("non-canonical envelope: %v", err)
	}
}

func TestCheckUsed(t *testing.T) {
	c := sample()
	if err := c.CheckUsed([]string{"cpu", "gpu"}); err != nil {
		t.Fatal(err)
	}
	// A GPU run whose GPU energy was folded into the CPU record.
	folded := &Core{Devices: []Device{{Class: "cpu", Provenance: Estimator, EstimatedUJ: 10500000, BusyNS: 2100000000}}}
	if err := folded.CheckUsed([]string{"cpu", "gpu"}); !errors.Is(err, ErrCoverage) {
		t.Fatalf("folded GPU: %v", err)
	}
}

func b64(b []byte) string {
	return strings.TrimRight(strings.NewReplacer("+", "-", "/", "_").Replace(stdB64(b)), "=")
}
