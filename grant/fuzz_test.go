package grant

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"testing"
)

// FuzzParse: Parse never panics; whatever it refuses wraps ErrInvalid;
// whatever it accepts re-parses from its own JCS form to the same
// ContentId and covers itself.
func FuzzParse(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 5))
	for range 16 {
		b, _ := json.Marshal(genSetDoc(r))
		f.Add(b)
	}
	f.Add([]byte(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false}`))
	f.Add([]byte(`{"type":"cordon.grants.v1","Code":"trusted","code":"untrusted","tenancy":"single","confidential":false}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		s, err := Parse(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("Parse(%q) error does not wrap ErrInvalid: %v", in, err)
			}
			return
		}
		again, err := Parse(s.JCS())
		if err != nil || again.ID() != s.ID() || !bytes.Equal(again.JCS(), s.JCS()) {
			t.Fatalf("Parse(JCS(%q)) = %v; ids %s and %s", in, err, s.ID(), again.ID())
		}
		if err := Covers(s, s); err != nil {
			t.Fatalf("Covers(s, s) = %v for %s", err, s.JCS())
		}
	})
}

// FuzzParseQuery: ParseQuery never panics, and Decide never panics on
// what it returns.
func FuzzParseQuery(f *testing.F) {
	f.Add([]byte(`{"kind":"fs","op":"read","path":"/data/x"}`))
	f.Add([]byte(`{"kind":"egress","host":"127.1","proto":"tcp","port":0}`))
	f.Add([]byte(`{"kind":"exec","path":"/usr/bin/git","argv":["git","log"]}`))
	r := rand.New(rand.NewPCG(2, 2))
	e := New(mustSet(f, genSetDoc(r)))
	f.Fuzz(func(t *testing.T, in []byte) {
		q, err := ParseQuery(in)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("ParseQuery error does not wrap ErrInvalid: %v", err)
			}
			return
		}
		d := e.Decide(q)
		if d.Allow != refAllow(e.Set(), q) {
			t.Fatalf("Decide(%+v) = %v, reference disagrees", q, d.Allow)
		}
		_ = d.Record()
	})
}
