package attest

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/sign"
)

func u(n uint64) *uint64 { return &n }

func run(t *testing.T) (*receipt.Core, []journal.Entry) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "j")
	var es []journal.Entry
	for _, b := range []string{`{"kind":"device","class":"gpu"}`, `{"kind":"fs","path":"/work/x"}`, `{"exit":0}`} {
		v, _ := canon.Parse([]byte(b))
		e, err := journal.Append(path, "decision", v)
		if err != nil {
			t.Fatal(err)
		}
		es = append(es, e)
	}
	rc := &receipt.Core{Type: receipt.Type, Unit: canon.Sum([]byte("u")).String(), Grants: canon.Sum([]byte("g")).String(), Tier: "S2",
		StartNS: 1, EndNS: 2, Outputs: map[string]string{},
		Devices: []receipt.Device{
			{Class: "cpu", Provenance: receipt.Estimator, EstimatedUJ: 10, BusyNS: 5},
			{Class: "gpu", Provenance: receipt.HwShunt, EstimatedUJ: 30, MeasuredUJ: u(25), BusyNS: 4},
		},
		JournalRoot: es[2].ID().String()}
	rc.Finish()
	return rc, es
}

var host = Host{Kernel: "6.1.0", Cordon: "0.1.0", Tiers: []string{"S0", "S1", "S2", "S3"}}

func TestSignVerify(t *testing.T) {
	k, _ := sign.Generate()
	rc, es := run(t)
	env, err := Sign(k, For(rc, host))
	if err != nil {
		t.Fatal(err)
	}
	c, err := Verify(env, k.Public(), Options{Receipt: rc, Journal: es})
	if err != nil {
		t.Fatal(err)
	}
	if c.Receipt != rc.ID().String() || strings.Join(c.Devices, ",") != "cpu,gpu" {
		t.Fatalf("Verify = %+v", c)
	}
	// Every single-bit change is refused.
	for i := range len(env) * 8 {
		e := append([]byte(nil), env...)
		e[i/8] ^= 1 << (i % 8)
		if _, err := Verify(e, k.Public(), Options{}); err == nil {
			t.Fatalf("attestation with bit %d flipped verified", i)
		}
	}
}

// TestVerifyRefuses signs attestations that are wrong in content and
// checks each is refused for the right reason.
func TestVerifyRefuses(t *testing.T) {
	k, _ := sign.Generate()
	rc, es := run(t)
	other, _ := run(t)
	other.Exit = 1
	v, _ := canon.Parse([]byte(`{"exit":1}`))
	path := filepath.Join(t.TempDir(), "j2")
	var diverged []journal.Entry
	for _, e := range es[:2] {
		x, _ := journal.Append(path, e.Type, e.Body())
		diverged = append(diverged, x)
	}
	x, _ := journal.Append(path, "decision", v)
	diverged = append(diverged, x)
	for _, tc := range []struct {
		name string
		edit func(c *Core)
		opts Options
		want error
	}{
		{"omits an accelerator the receipt metered", func(c *Core) { c.Devices = []string{"cpu"} }, Options{Receipt: rc}, ErrBinding},
		{"adds a device", func(c *Core) { c.Devices = []string{"cpu", "gpu", "npu"} }, Options{Receipt: rc}, ErrBinding},
		{"another receipt", func(c *Core) { c.Receipt = other.ID().String() }, Options{Receipt: rc}, ErrBinding},
		{"another tier", func(c *Core) { c.Tier = "S3" }, Options{Receipt: rc}, ErrBinding},
		{"another journal root", func(c *Core) { c.JournalRoot = es[1].ID().String() }, Options{Receipt: rc}, ErrBinding},
		{"journal truncated", func(c *Core) {}, Options{Journal: es[:2]}, ErrJournal},
		{"journal diverged", func(c *Core) {}, Options{Journal: diverged}, ErrJournal},
		{"journal with an entry removed", func(c *Core) {}, Options{Journal: []journal.Entry{es[0], es[2]}}, ErrJournal},
		{"empty journal", func(c *Core) {}, Options{Journal: []journal.Entry{}}, ErrJournal},
		{"s6 without tee", func(c *Core) { c.Tier = "S6"; c.Host.Tiers = []string{"S6"} }, Options{}, ErrTEE},
		{"tee below s6", func(c *Core) { c.TEE = &TEE{Kind: "tdx", Evidence: "AAAA"} }, Options{}, ErrInvalid},
		{"tier the host does not offer", func(c *Core) { c.Host.Tiers = []string{"S0"} }, Options{}, ErrInvalid},
		{"unsorted devices", func(c *Core) { c.Devices = []string{"gpu", "cpu"} }, Options{}, ErrInvalid},
		{"bad receipt id", func(c *Core) { c.Receipt = "b3:short" }, Options{}, ErrInvalid},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := For(rc, host)
			tc.edit(c)
			env := sign.Seal(k, sign.PayloadAttestation, c.JCS())
			if _, err := Verify(env, k.Public(), tc.opts); !errors.Is(err, tc.want) {
				t.Fatalf("Verify = %v, want %v", err, tc.want)
			}
		})
	}
	// S6 with evidence verifies.
	c := For(rc, Host{Kernel: "6.1.0", Cordon: "0.1.0", Tiers: []string{"S6"}})
	c.Tier = "S6"
	c.TEE = &TEE{Kind: "sev-snp", Evidence: "cmVwb3J0"}
	env, err := Sign(k, c)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Verify(env, k.Public(), Options{}); err != nil {
		t.Fatalf("S6 with TEE evidence: %v", err)
	}
	// An unknown member in the signed core is refused.
	bad := strings.Replace(string(c.JCS()), `"type"`, `"unsigned_extra":1,"type"`, 1)
	if _, err := Verify(sign.Seal(k, sign.PayloadAttestation, []byte(bad)), k.Public(), Options{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown member: %v", err)
	}
	// A receipt signature does not verify as an attestation.
	if _, err := Verify(sign.Seal(k, sign.PayloadReceipt, c.JCS()), k.Public(), Options{}); !errors.Is(err, sign.ErrBadSignature) {
		t.Errorf("cross-context envelope: %v", err)
	}
}
