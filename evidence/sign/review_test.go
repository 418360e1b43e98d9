package sign

// Adversarial review tests (docs/SPEC.md §4.1, §4.2). Tests named
// TestReviewFixed_* fail on the code as reviewed and demonstrate a bug.

import (
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"math/big"
	"strings"
	"testing"
)

// "A PEM file holds exactly one block, no headers, nothing else but
// whitespace." pem.Decode skips any text before the first BEGIN line (and
// any earlier block that fails to decode), and onePEM only checks what
// follows the block, so leading garbage is accepted.
func TestReviewFixed_PEMLeadingGarbage(t *testing.T) {
	k, _ := Generate()
	pub := string(k.Public().MarshalPublic())
	priv := string(k.MarshalPrivate())
	brokenBlock := "-----BEGIN PUBLIC KEY-----\n!!!!\n-----END PUBLIC KEY-----\n"
	for name, in := range map[string]string{
		"text before public":     "not a key\n" + pub,
		"broken block before":    brokenBlock + pub,
		"comment before private": "# comment\n" + priv,
	} {
		t.Run(name, func(t *testing.T) {
			var err error
			if strings.Contains(in, "PRIVATE") {
				_, err = ParsePrivate([]byte(in))
			} else {
				_, err = ParsePublic([]byte(in))
			}
			if err == nil {
				t.Fatalf("accepted a PEM file with data before the block: %q", in[:20])
			}
		})
	}
}

// The signature contexts are mutually exclusive: a signature over the
// same payload bytes in one context never opens in another.
func TestReviewOpenContextConfusion(t *testing.T) {
	k, _ := Generate()
	payload := []byte(`{"a":1}`)
	for _, ctx := range []string{PayloadReceipt, PayloadAttestation, PayloadJournalHead} {
		env := Seal(k, ctx, payload)
		for _, other := range []string{PayloadReceipt, PayloadAttestation, PayloadJournalHead} {
			_, err := Open(env, k.Public(), other)
			if (ctx == other) != (err == nil) {
				t.Errorf("sealed as %s, opened as %s: %v", ctx, other, err)
			}
		}
		// Rewriting the payloadType member (keeping the signature) fails.
		for _, other := range []string{PayloadReceipt, PayloadAttestation, PayloadJournalHead} {
			if other == ctx {
				continue
			}
			forged := strings.Replace(string(env), `"payloadType":"`+ctx+`"`, `"payloadType":"`+other+`"`, 1)
			if _, err := Open([]byte(forged), k.Public(), other); err == nil {
				t.Errorf("a %s signature opened as %s after rewriting payloadType", ctx, other)
			}
		}
	}
}

// Malleable spellings of an envelope: each must be refused.
func TestReviewOpenMalleability(t *testing.T) {
	k, _ := Generate()
	other, _ := Generate()
	payload := []byte("hello")
	env := string(Seal(k, PayloadAttestation, payload))
	p64 := base64.StdEncoding.EncodeToString(payload) // aGVsbG8=
	sig := k.Sign(PayloadAttestation, payload)
	s64 := base64.StdEncoding.EncodeToString(sig)
	kid := k.Public().ID().String()
	otherSig := base64.StdEncoding.EncodeToString(other.Sign(PayloadAttestation, payload))

	// S + L: the same signature with a non-canonical scalar.
	l, _ := new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)
	sLE := append([]byte(nil), sig[32:]...)
	for i, j := 0, len(sLE)-1; i < j; i, j = i+1, j-1 {
		sLE[i], sLE[j] = sLE[j], sLE[i]
	}
	s := new(big.Int).SetBytes(sLE)
	s.Add(s, l)
	sBE := s.FillBytes(make([]byte, 32))
	for i, j := 0, len(sBE)-1; i < j; i, j = i+1, j-1 {
		sBE[i], sBE[j] = sBE[j], sBE[i]
	}
	malleated := append(append([]byte(nil), sig[:32]...), sBE...)
	if ed25519.Verify(ed25519.PublicKey(k.Public().Bytes()), PAE(PayloadAttestation, payload), malleated) {
		t.Fatal("ed25519 accepted S+L")
	}
	mal64 := base64.StdEncoding.EncodeToString(malleated)

	mk := func(p, sigs string) string {
		return `{"payload":"` + p + `","payloadType":"` + PayloadAttestation + `","signatures":[` + sigs + `]}`
	}
	one := func(kid, sig string) string { return `{"keyid":"` + kid + `","sig":"` + sig + `"}` }
	if mk(p64, one(kid, s64)) != env {
		t.Fatalf("construction: %s != %s", mk(p64, one(kid, s64)), env)
	}
	for name, e := range map[string]string{
		"S+L":                    mk(p64, one(kid, mal64)),
		"payload unpadded":       mk(strings.TrimRight(p64, "="), one(kid, s64)),
		"payload spare bits":     mk(strings.Replace(p64, "G8=", "G9=", 1), one(kid, s64)),
		"payload newline":        mk(p64[:4]+`\n`+p64[4:], one(kid, s64)),
		"sig truncated":          mk(p64, one(kid, base64.StdEncoding.EncodeToString(sig[:63]))),
		"sig extended":           mk(p64, one(kid, base64.StdEncoding.EncodeToString(append(sig, 0)))),
		"no signatures":          mk(p64, ""),
		"other key only":         mk(p64, one(other.Public().ID().String(), otherSig)),
		"right sig, wrong kid":   mk(p64, one(other.Public().ID().String(), s64)),
		"malformed second entry": mk(p64, one(kid, s64)+`,{"keyid":"b3:x","sig":""}`),
		"extra sig member":       mk(p64, `{"keyid":"`+kid+`","sig":"`+s64+`","x":1}`),
		"extra envelope member":  strings.TrimSuffix(env, "}") + `,"x":1}`,
		"whitespace":             strings.Replace(env, `,"payloadType"`, `, "payloadType"`, 1),
		"escaped":                strings.Replace(env, `"payloadType"`, `"payload\u0054ype"`, 1),
		"signatures not array":   `{"payload":"` + p64 + `","payloadType":"` + PayloadAttestation + `","signatures":` + one(kid, s64) + `}`,
		"sig entry not object":   mk(p64, `"`+s64+`"`),
		"trailing newline":       env + "\n",
	} {
		if e == env {
			t.Fatalf("%s: construction left the envelope unchanged", name)
		}
		if got, err := Open([]byte(e), k.Public(), PayloadAttestation); err == nil {
			t.Errorf("%s: Open accepted %q", name, got)
		}
	}
	// The URL-safe alphabet for the signature (when it makes a difference).
	if u := strings.NewReplacer("+", "-", "/", "_").Replace(s64); u != s64 {
		if _, err := Open([]byte(mk(p64, one(kid, u))), k.Public(), PayloadAttestation); err == nil {
			t.Error("a base64url signature opened")
		}
	}
	// A zero PublicKey verifies nothing.
	if _, err := Open([]byte(env), PublicKey{}, PayloadAttestation); !errors.Is(err, ErrBadSignature) {
		t.Errorf("zero public key: %v", err)
	}
}

// PAE is injective: moving bytes between the type and the payload changes
// the signed message.
func TestReviewPAEBoundary(t *testing.T) {
	k, _ := Generate()
	sig := k.Sign("a", []byte("1 b"))
	if k.Public().Verify("a 1", []byte("b"), sig) == nil || k.Public().Verify("a 1 b", nil, sig) == nil {
		t.Fatal("PAE is ambiguous")
	}
}
