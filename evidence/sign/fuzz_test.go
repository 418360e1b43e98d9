package sign

import (
	"bytes"
	"encoding/base64"
	"testing"
)

// FuzzOpen: Open never panics and opens only envelopes that carry the
// key's own (deterministic) signature of the payload in the context asked
// for. Other signers' entries may be present; the key's may appear once.
func FuzzOpen(f *testing.F) {
	k, _ := NewKeyFromSeed(make([]byte, 32))
	f.Add(Seal(k, PayloadJournalHead, []byte(`{"count":1}`)))
	f.Add([]byte(`{"payload":"","payloadType":"","signatures":[]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := Open(in, k.Public(), PayloadJournalHead)
		if err != nil {
			return
		}
		sig := base64.StdEncoding.EncodeToString(k.Sign(PayloadJournalHead, p))
		if bytes.Count(in, []byte(`"sig":"`+sig+`"`)) != 1 {
			t.Fatalf("opened %q, which does not carry the key's signature of its payload exactly once", in)
		}
	})
}

// FuzzParseKeys: the PEM parsers never panic.
func FuzzParseKeys(f *testing.F) {
	k, _ := NewKeyFromSeed(make([]byte, 32))
	f.Add(k.MarshalPrivate())
	f.Add(k.Public().MarshalPublic())
	f.Fuzz(func(t *testing.T, in []byte) {
		ParsePrivate(in)
		ParsePublic(in)
	})
}
