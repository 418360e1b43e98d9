package attest

// Adversarial review tests (docs/SPEC.md §4.5). Tests named TestReviewFixed_*
// fail on the code as reviewed and demonstrate a bug.

import (
	"errors"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/sign"
)

// Options.Journal documents that "a non-nil empty slice is an empty
// journal, which never replays Consistent". The review found that an
// attestation whose journal_root is the (syntactically valid) zero
// ContentId "b3:AAAA…A" replayed Consistent against an empty journal; now
// the zero root is refused outright and an empty journal never replays
// Consistent.
func TestReviewFixed_AttestEmptyJournalZeroRoot(t *testing.T) {
	k, _ := sign.Generate()
	rc, _ := run(t)
	c := For(rc, host)
	c.JournalRoot = canon.ID{}.String()
	if _, err := Sign(k, c); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Sign with the zero journal_root: err = %v, want ErrInvalid", err)
	}
	env := sign.Seal(k, sign.PayloadAttestation, c.JCS())
	if _, err := Verify(env, k.Public(), Options{Journal: []journal.Entry{}}); err == nil {
		t.Fatalf("an empty journal replayed against root %s", c.JournalRoot)
	}
	if r := ReplayRoot(nil, canon.ID{}.String()); r.Status == journal.Consistent {
		t.Fatalf("ReplayRoot(empty, zero id) = %v", r)
	}
}

// Hand-written cores: each is signed correctly, in the attestation
// context, and must be refused.
func TestReviewAttestMalformedCores(t *testing.T) {
	k, _ := sign.Generate()
	rc, _ := run(t)
	good := string(For(rc, host).JCS())
	if _, err := Verify(sign.Seal(k, sign.PayloadAttestation, []byte(good)), k.Public(), Options{Receipt: rc}); err != nil {
		t.Fatal(err)
	}
	s6 := For(rc, Host{Kernel: "6.1.0", Cordon: "0.1.0", Tiers: []string{"S6"}})
	s6.Tier = "S6"
	s6.TEE = &TEE{Kind: "sev-snp", Evidence: "QQ=="}
	s6good := string(s6.JCS())
	if _, err := Verify(sign.Seal(k, sign.PayloadAttestation, []byte(s6good)), k.Public(), Options{}); err != nil {
		t.Fatal(err)
	}
	rep := func(s, old, new string) string {
		if !strings.Contains(s, old) {
			t.Fatalf("construction: %q not in %s", old, s)
		}
		return strings.Replace(s, old, new, 1)
	}
	for name, payload := range map[string]string{
		"whitespace":             rep(good, `","tier"`, `", "tier"`),
		"empty journal_root":     rep(good, `"journal_root":"`+rc.JournalRoot+`"`, `"journal_root":""`),
		"journal_root null":      rep(good, `"journal_root":"`+rc.JournalRoot+`"`, `"journal_root":null`),
		"journal_root spelling":  rep(good, `"journal_root":"`+rc.JournalRoot+`"`, `"journal_root":"`+respell(rc.JournalRoot)+`"`),
		"receipt spelling":       rep(good, `"receipt":"`+rc.ID().String()+`"`, `"receipt":"`+respell(rc.ID().String())+`"`),
		"devices duplicate":      rep(good, `"devices":["cpu","gpu"]`, `"devices":["cpu","cpu","gpu"]`),
		"devices empty":          rep(good, `"devices":["cpu","gpu"]`, `"devices":[]`),
		"devices null":           rep(good, `"devices":["cpu","gpu"]`, `"devices":null`),
		"devices not strings":    rep(good, `"devices":["cpu","gpu"]`, `"devices":["cpu",1]`),
		"host extra":             rep(good, `"kernel":"6.1.0"`, `"kernel":"6.1.0","pid":1`),
		"host tier lower case":   rep(good, `"tiers":["S0","S1","S2","S3"]`, `"tiers":["S0","S1","s2","S3"]`),
		"host tiers missing":     rep(good, `,"tiers":["S0","S1","S2","S3"]`, ``),
		"host kernel empty":      rep(good, `"kernel":"6.1.0"`, `"kernel":""`),
		"tier lower case":        rep(good, `"tier":"S2"`, `"tier":"s2"`),
		"type v2":                rep(good, `"type":"cordon.attestation.v1"`, `"type":"cordon.attestation.v2"`),
		"tee null below S6":      rep(good, `"tier":"S2"`, `"tee":null,"tier":"S2"`),
		"tee non-canonical b64":  rep(s6good, `"evidence":"QQ=="`, `"evidence":"QR=="`),
		"tee unpadded b64":       rep(s6good, `"evidence":"QQ=="`, `"evidence":"QQ"`),
		"tee empty evidence":     rep(s6good, `"evidence":"QQ=="`, `"evidence":""`),
		"tee empty kind":         rep(s6good, `"kind":"sev-snp"`, `"kind":""`),
		"tee extra member":       rep(s6good, `"kind":"sev-snp"`, `"kind":"sev-snp","nonce":"x"`),
		"tee not an object":      rep(s6good, `"tee":{"evidence":"QQ==","kind":"sev-snp"}`, `"tee":"QQ=="`),
		"tee missing in S6":      rep(s6good, `"tee":{"evidence":"QQ==","kind":"sev-snp"},`, ``),
		"not an object":          `["` + good + `"]`,
		"trailing newline":       good + "\n",
		"escaped member name":    rep(good, `"tier":"S2"`, `"ti\u0065r":"S2"`),
		"duplicate member (tie)": rep(good, `"tier":"S2"`, `"tier":"S2","tier":"S2"`),
	} {
		if got, err := Verify(sign.Seal(k, sign.PayloadAttestation, []byte(payload)), k.Public(), Options{}); err == nil {
			t.Errorf("%s: verified %+v", name, got)
		}
	}
}

// respell changes the spare bits of a ContentId's last character: the same
// 32 bytes spelt differently, which ParseID must refuse.
func respell(id string) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	b := []byte(id)
	b[len(b)-1] = alphabet[strings.IndexByte(alphabet, b[len(b)-1])^1]
	return string(b)
}

// Binding: an attestation must not verify against a receipt whose
// journal_root, outputs or other content differ, even when tier and
// devices agree; nor against a journal that is a longer or shorter chain.
func TestReviewAttestWrongReceiptOrJournal(t *testing.T) {
	k, _ := sign.Generate()
	rc, es := run(t)
	env, err := Sign(k, For(rc, host))
	if err != nil {
		t.Fatal(err)
	}
	// Same tier, devices and journal root; different outputs.
	r2, _ := run(t)
	r2.JournalRoot = rc.JournalRoot
	r2.Outputs = map[string]string{"x": rc.Unit}
	if _, err := Verify(env, k.Public(), Options{Receipt: r2}); !errors.Is(err, ErrBinding) {
		t.Errorf("another receipt with the same tier/devices/root: %v", err)
	}
	// The receipt has no journal root, the attestation has one.
	r3 := *rc
	r3.JournalRoot = ""
	if _, err := Verify(env, k.Public(), Options{Receipt: &r3}); !errors.Is(err, ErrBinding) {
		t.Errorf("receipt without journal root: %v", err)
	}
	// The journal grew after the attestation: not Consistent.
	path := t.TempDir() + "/j"
	var grown []journal.Entry
	for _, e := range es {
		x, err := journal.Append(path, e.Type, e.Body())
		if err != nil {
			t.Fatal(err)
		}
		grown = append(grown, x)
	}
	if grown[2].ID() != es[2].ID() {
		t.Fatal("construction: replayed journal differs")
	}
	v, _ := canon.Parse([]byte(`{"late":true}`))
	x, err := journal.Append(path, "decision", v)
	if err != nil {
		t.Fatal(err)
	}
	grown = append(grown, x)
	if _, err := Verify(env, k.Public(), Options{Receipt: rc, Journal: grown}); !errors.Is(err, ErrJournal) {
		t.Errorf("grown journal: %v", err)
	}
	// An attestation envelope resealed in the journal-head context, or by
	// another key, is refused.
	other, _ := sign.Generate()
	for name, e := range map[string][]byte{
		"journal-head context": sign.Seal(k, sign.PayloadJournalHead, For(rc, host).JCS()),
		"other key":            sign.Seal(other, sign.PayloadAttestation, For(rc, host).JCS()),
	} {
		if _, err := Verify(e, k.Public(), Options{}); !errors.Is(err, sign.ErrBadSignature) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
