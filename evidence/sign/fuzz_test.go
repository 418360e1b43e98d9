package sign

import (
	"bytes"
	"testing"
)

// FuzzOpen: Open never panics and opens only what the key signed in the
// context asked for.
func FuzzOpen(f *testing.F) {
	k, _ := NewKeyFromSeed(make([]byte, 32))
	f.Add(Seal(k, PayloadJournalHead, []byte(`{"count":1}`)))
	f.Add([]byte(`{"payload":"","payloadType":"","signatures":[]}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		p, err := Open(in, k.Public(), PayloadJournalHead)
		if err != nil {
			return
		}
		if !bytes.Equal(Seal(k, PayloadJournalHead, p), in) {
			t.Fatalf("opened %q, which is not the key's own envelope of its payload", in)
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
