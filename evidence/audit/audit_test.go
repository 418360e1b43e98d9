package audit

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
)

type log struct {
	recs []*Record
}

func (l *log) add(t testing.TB, body string) {
	t.Helper()
	v, err := canon.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	var prev canon.ID
	if n := len(l.recs); n > 0 {
		prev = l.recs[n-1].ID()
	}
	secret := bytes.Repeat([]byte{byte(len(l.recs) + 1)}, SecretSize)
	r, err := New(uint64(len(l.recs)), prev, secret, v)
	if err != nil {
		t.Fatal(err)
	}
	l.recs = append(l.recs, r)
}

func (l *log) head() Head {
	return Head{Count: uint64(len(l.recs)), Head: l.recs[len(l.recs)-1].ID()}
}

// export writes the export of the whole log for a reader of tenant
// ("" for the operator), masking secret-named members.
func (l *log) export(k *sign.PrivateKey, tenant string) []byte {
	var b bytes.Buffer
	for _, r := range l.recs {
		t, _ := r.Body.Get("tenant")
		inScope := tenant == "" || t.Str() == tenant
		b.Write(r.Export(inScope, func(p Path, v canon.Value) bool {
			return !(len(p) > 0 && p[len(p)-1] == "token")
		}))
		b.WriteByte('\n')
	}
	b.Write(l.head().Seal(k))
	b.WriteByte('\n')
	return b.Bytes()
}

func sample(t testing.TB) *log {
	l := &log{}
	l.add(t, `{"event":"key.create","tenant":"acme","actor":"admin","at":1700000000000,"detail":{"key_id":"k1","token":"cdn_supersecretvalue_0001"}}`)
	l.add(t, `{"event":"run.submit","tenant":"globex","actor":"bob","at":1700000001000,"detail":{"run":"r1","inputs":["a","b"]}}`)
	l.add(t, `{"event":"run.approve","tenant":"acme","actor":"carol","at":1700000002000,"detail":{"run":"r2"}}`)
	l.add(t, `{"event":"auth.fail","tenant":"acme","actor":"","at":1700000003000,"detail":{"reason":"bad key"}}`)
	return l
}

// TestMaskedExportVerifies: the operator's export, a tenant's export with
// other tenants' records fully masked, and exports masking secret-named
// members all verify against the same signed head; masked values do not
// appear; revealed values are the written ones.
func TestMaskedExportVerifies(t *testing.T) {
	k, _ := sign.Generate()
	l := sample(t)
	for _, tenant := range []string{"", "acme", "globex"} {
		ex := l.export(k, tenant)
		got, err := Verify(ex, k.Public())
		if err != nil {
			t.Fatalf("tenant %q: %v", tenant, err)
		}
		if len(got) != 4 || got[3].ID != l.recs[3].ID() {
			t.Fatalf("tenant %q: %d records", tenant, len(got))
		}
		if bytes.Contains(ex, []byte("supersecret")) {
			t.Fatalf("tenant %q: a secret-named value was exported", tenant)
		}
		for i, r := range l.recs {
			ten, _ := r.Body.Get("tenant")
			actor := got[i].Revealed[`["actor"]`]
			if tenant == "" || ten.Str() == tenant {
				want, _ := r.Body.Get("actor")
				if actor.Str() != want.Str() {
					t.Fatalf("tenant %q record %d: actor %q, want %q", tenant, i, actor.Str(), want.Str())
				}
			} else if len(got[i].Revealed) != 0 || bytes.Contains(ex, []byte(`"`+ten.Str()+`"`)) {
				t.Fatalf("tenant %q sees record %d of %s", tenant, i, ten.Str())
			}
		}
	}
}

// TestTamper: an edited value (even with a matching-looking salt), an
// edited commitment, a deleted, added, reordered or truncated record, and
// a head signed by another key are all caught.
func TestTamper(t *testing.T) {
	k, _ := sign.Generate()
	other, _ := sign.Generate()
	l := sample(t)
	ex := string(l.export(k, ""))
	lines := strings.SplitAfter(ex, "\n")
	lines = lines[:len(lines)-1]
	records, head := lines[:len(lines)-1], lines[len(lines)-1]
	join := func(ls ...string) string { return strings.Join(ls, "") }
	cases := map[string]string{
		"edited value":      strings.Replace(ex, `"v":"bob"`, `"v":"eve"`, 1),
		"edited last value": strings.Replace(ex, `"v":"bad key"`, `"v":"ok"`, 1),
		"edited number":     strings.Replace(ex, `"v":1700000001000`, `"v":1700000001001`, 1),
		"deleted":           join(records[0], records[2], records[3], head),
		"reordered":         join(records[1], records[0], records[2], records[3], head),
		"truncated":         join(records[0], records[1], records[2], head),
		"duplicated":        join(records[0], records[0], records[1], records[2], records[3], head),
		"no head":           join(records...),
		"other signer":      join(append(records, string(l.head().Seal(other))+"\n")...),
		"whitespace":        strings.Replace(ex, `{"body"`, `{ "body"`, 1),
	}
	// An edited commitment of a masked leaf.
	masked := string(l.export(k, "acme"))
	i := strings.Index(masked, `"m":"b3:`)
	cases["edited commitment"] = masked[:i+8] + "A" + masked[i+9:]
	for name, bad := range cases {
		if _, err := Verify([]byte(bad), k.Public()); err == nil {
			t.Errorf("%s: verified", name)
		}
	}
	// Revealing a masked leaf with a made-up value and salt fails too.
	if _, err := Verify([]byte(strings.Replace(masked, masked[i:i+52], `"s":"AAAAAAAAAAAAAAAAAAAAAA","v":"forged"`, 1)), k.Public()); err == nil {
		t.Error("a masked leaf revealed as another value verified")
	}
}

// TestMaskingCannotShape: whichever leaves are masked, the chain is the
// same: every export verifies against the one signed head, and each
// record's ID is the stored one.
func TestMaskingCannotShape(t *testing.T) {
	k, _ := sign.Generate()
	l := sample(t)
	signed := l.head().Seal(k)
	for mask := 0; mask < 16; mask++ {
		var b bytes.Buffer
		for i, r := range l.recs {
			b.Write(r.Export(mask&(1<<i) == 0, func(Path, canon.Value) bool { return true }))
			b.WriteByte('\n')
		}
		b.Write(signed)
		b.WriteByte('\n')
		got, err := Verify(b.Bytes(), k.Public())
		if err != nil {
			t.Fatalf("mask %04b: %v", mask, err)
		}
		for i := range got {
			if got[i].ID != l.recs[i].ID() {
				t.Fatalf("mask %04b: record %d has another ID", mask, i)
			}
		}
	}
}

func TestNewRefuses(t *testing.T) {
	body, _ := canon.Parse([]byte(`{"a":1}`))
	arr, _ := canon.Parse([]byte(`[1]`))
	s := make([]byte, SecretSize)
	for name, err := range map[string]error{
		"short secret":    func() error { _, e := New(0, canon.ID{}, s[:8], body); return e }(),
		"array body":      func() error { _, e := New(0, canon.ID{}, s, arr); return e }(),
		"first with prev": func() error { _, e := New(0, canon.Sum(nil), s, body); return e }(),
		"later no prev":   func() error { _, e := New(3, canon.ID{}, s, body); return e }(),
	} {
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func FuzzVerify(f *testing.F) {
	k, _ := sign.Generate()
	l := sample(f)
	f.Add(l.export(k, "acme"))
	f.Add([]byte("{}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := Verify(data, k.Public())
		if err == nil && len(got) > 0 && fmt.Sprint(got[len(got)-1].ID) != fmt.Sprint(l.recs[len(got)-1].ID()) {
			t.Fatalf("verified an export that is not the log")
		}
	})
}
