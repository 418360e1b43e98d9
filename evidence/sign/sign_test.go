package sign

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestSignVerifyContexts(t *testing.T) {
	k, err := Generate()
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("receipt bytes")
	sig := k.Sign(PayloadReceipt, msg)
	if err := k.Public().Verify(PayloadReceipt, msg, sig); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	// A signature over one kind of object never verifies as another.
	for _, other := range []string{PayloadAttestation, PayloadJournalHead, "", PayloadReceipt + " "} {
		if err := k.Public().Verify(other, msg, sig); !errors.Is(err, ErrBadSignature) {
			t.Errorf("signature for %q verified as %q", PayloadReceipt, other)
		}
	}
	// Every single-bit change of the payload or the signature is refused.
	for i := range len(msg) * 8 {
		m := []byte(string(msg))
		m[i/8] ^= 1 << (i % 8)
		if k.Public().Verify(PayloadReceipt, m, sig) == nil {
			t.Fatalf("payload with bit %d flipped verified", i)
		}
	}
	for i := range len(sig) * 8 {
		s := append([]byte(nil), sig...)
		s[i/8] ^= 1 << (i % 8)
		if k.Public().Verify(PayloadReceipt, msg, s) == nil {
			t.Fatalf("signature with bit %d flipped verified", i)
		}
	}
	other, _ := Generate()
	if other.Public().Verify(PayloadReceipt, msg, sig) == nil {
		t.Fatal("another key verified the signature")
	}
	if k.Public().Verify(PayloadReceipt, msg, sig[:63]) == nil {
		t.Fatal("a truncated signature verified")
	}
}

// TestPAE checks the DSSE pre-authentication encoding against the DSSE
// specification's example.
func TestPAE(t *testing.T) {
	got := string(PAE("http://example.com/HelloWorld", []byte("hello world")))
	want := "DSSEv1 29 http://example.com/HelloWorld 11 hello world"
	if got != want {
		t.Fatalf("PAE = %q, want %q", got, want)
	}
	// Length prefixes keep type/payload boundaries unambiguous.
	if string(PAE("a b", []byte("c"))) == string(PAE("a", []byte("b c"))) {
		t.Fatal("PAE is ambiguous")
	}
}

func TestKeyFiles(t *testing.T) {
	dir := t.TempDir()
	k, _ := Generate()
	path := filepath.Join(dir, "steward.pem")
	if err := WritePrivate(path, k); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("key file mode %04o, want 0600", st.Mode().Perm())
	}
	if err := WritePrivate(path, k); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("WritePrivate over an existing file: %v", err)
	}
	back, err := LoadPrivate(path)
	if err != nil || back.Public().ID() != k.Public().ID() {
		t.Fatalf("LoadPrivate = %v, %v", back, err)
	}
	pub, err := ParsePublic(k.Public().MarshalPublic())
	if err != nil || pub.ID() != k.Public().ID() {
		t.Fatalf("ParsePublic: %v", err)
	}
	os.Chmod(path, 0o644)
	if _, err := LoadPrivate(path); !errors.Is(err, ErrKey) {
		t.Errorf("LoadPrivate of a world-readable key: %v", err)
	}
	// The key never shows in formatting.
	s := fmt.Sprintf("%v %+v %#v %s %v %+v %#v %s", k, k, k, k, *k, *k, *k, *k)
	if strings.Contains(s, fmt.Sprintf("%x", k.key[:8])) || !strings.Contains(s, "sign.PrivateKey(b3:") {
		t.Errorf("formatting a key shows %q", s)
	}
}

func TestParseRefuses(t *testing.T) {
	k, _ := Generate()
	priv := string(k.MarshalPrivate())
	pub := string(k.Public().MarshalPublic())
	for _, tc := range []struct {
		name, data string
		public     bool
	}{
		{"empty", "", false},
		{"public as private", pub, false},
		{"private as public", priv, true},
		{"trailing garbage", priv + "x", false},
		{"two blocks", priv + priv, false},
		{"headers", strings.Replace(priv, "-----\n", "-----\nProc-Type: 4,ENCRYPTED\n\n", 1), false},
		{"rsa-shaped", "-----BEGIN PRIVATE KEY-----\nMAA=\n-----END PRIVATE KEY-----\n", false},
	} {
		var err error
		if tc.public {
			_, err = ParsePublic([]byte(tc.data))
		} else {
			_, err = ParsePrivate([]byte(tc.data))
		}
		if !errors.Is(err, ErrKey) {
			t.Errorf("%s: err = %v, want ErrKey", tc.name, err)
		}
		if err != nil && strings.Contains(err.Error(), "MC4CAQAw") {
			t.Errorf("%s: error quotes key material: %v", tc.name, err)
		}
	}
}

func TestEnvelope(t *testing.T) {
	k, _ := Generate()
	payload := []byte(`{"count":3,"head":"b3:x"}`)
	env := Seal(k, PayloadJournalHead, payload)
	got, err := Open(env, k.Public(), PayloadJournalHead)
	if err != nil || string(got) != string(payload) {
		t.Fatalf("Open = %q, %v", got, err)
	}
	if _, err := Open(env, k.Public(), PayloadAttestation); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Open with another payload type: %v", err)
	}
	other, _ := Generate()
	if _, err := Open(env, other.Public(), PayloadJournalHead); !errors.Is(err, ErrBadSignature) {
		t.Errorf("Open with another key: %v", err)
	}
	// Every single-bit change of the envelope is refused.
	for i := range len(env) * 8 {
		e := append([]byte(nil), env...)
		e[i/8] ^= 1 << (i % 8)
		if p, err := Open(e, k.Public(), PayloadJournalHead); err == nil {
			t.Fatalf("envelope with bit %d flipped opened: %q", i, p)
		}
	}
	// A second entry by the same key (a malleable copy) is refused.
	dup := strings.Replace(string(env), `"signatures":[{`, `"signatures":[`+string(env[strings.Index(string(env), `{"keyid"`):strings.LastIndex(string(env), "]")])+`,{`, 1)
	if _, err := Open([]byte(dup), k.Public(), PayloadJournalHead); !errors.Is(err, ErrEnvelope) {
		t.Errorf("envelope with the signature twice: %v", err)
	}
	// Non-canonical spellings of the same envelope are refused.
	spaced := strings.Replace(string(env), ",", ", ", 1)
	if _, err := Open([]byte(spaced), k.Public(), PayloadJournalHead); !errors.Is(err, ErrEnvelope) {
		t.Errorf("non-JCS envelope: %v", err)
	}
}
