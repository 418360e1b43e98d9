package broker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"filippo.io/age"
)

// recorder is a fake HTTP secrets backend that records every request.
type recorder struct {
	mu   sync.Mutex
	reqs []string
	data map[string]string // namespace/name → value
}

func (r *recorder) Get(_ context.Context, ns, name string) ([]byte, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.reqs = append(r.reqs, ns+"|"+name)
	v, ok := r.data[ns+"/"+name]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotFound, name)
	}
	return []byte(v), nil
}

func newBroker(t *testing.T) (*Broker, *recorder, string) {
	t.Helper()
	id, err := age.GenerateX25519Identity()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	st, err := NewStore(dir, id.String())
	if err != nil {
		t.Fatal(err)
	}
	for tenant, v := range map[string]string{"acme": "acme-db-password", "globex": "globex-db-password"} {
		if err := st.Put(tenant, "db", []byte(v)); err != nil {
			t.Fatal(err)
		}
	}
	rec := &recorder{data: map[string]string{"tenant/acme/token": "acme-token", "tenant/globex/token": "globex-token"}}
	return &Broker{Store: st, HTTP: rec}, rec, dir
}

// TestEntitlementMatrix: every tenant × reference. A tenant resolves only
// its own secrets; every reference that could reach another namespace or
// an operator source is refused before the backend sees a request.
func TestEntitlementMatrix(t *testing.T) {
	b, rec, _ := newBroker(t)
	type want struct {
		value string
		err   error
	}
	refs := map[string]map[string]want{
		"db":                        {"acme": {"acme-db-password", nil}, "globex": {"globex-db-password", nil}},
		"store:db":                  {"acme": {"acme-db-password", nil}, "globex": {"globex-db-password", nil}},
		"http:token":                {"acme": {"acme-token", nil}, "globex": {"globex-token", nil}},
		"http:missing":              {"acme": {"", ErrNotFound}, "globex": {"", ErrNotFound}},
		"missing":                   {"acme": {"", ErrNotFound}, "globex": {"", ErrNotFound}},
		"http:../globex/token":      {"acme": {"", ErrRef}, "globex": {"", ErrRef}},
		"http:tenant/globex/token":  {"acme": {"", ErrRef}, "globex": {"", ErrRef}},
		"../globex/db":              {"acme": {"", ErrRef}, "globex": {"", ErrRef}},
		"store:globex/db":           {"acme": {"", ErrRef}, "globex": {"", ErrRef}},
		"http:token/..":             {"acme": {"", ErrRef}, "globex": {"", ErrRef}},
		"http:a..b":                 {"acme": {"", ErrRef}, "globex": {"", ErrRef}},
		"http:":                     {"acme": {"", ErrRef}, "globex": {"", ErrRef}},
		"":                          {"acme": {"", ErrRef}, "globex": {"", ErrRef}},
		"http:tok\u0065n\u0000":     {"acme": {"", ErrRef}, "globex": {"", ErrRef}},
		"http:tоken":                {"acme": {"", ErrRef}, "globex": {"", ErrRef}}, // Cyrillic о
		"file:/etc/shadow":          {"acme": {"", ErrForbidden}, "globex": {"", ErrForbidden}},
		"env:AWS_SECRET_ACCESS_KEY": {"acme": {"", ErrForbidden}, "globex": {"", ErrForbidden}},
		"vault:token":               {"acme": {"", ErrRef}, "globex": {"", ErrRef}},
	}
	for ref, byTenant := range refs {
		for tenant, w := range byTenant {
			rec.reqs = nil
			s, err := b.Resolve(context.Background(), tenant, ref)
			switch {
			case w.err != nil:
				if !errors.Is(err, w.err) {
					t.Errorf("%s resolving %q: %v, want %v", tenant, ref, err, w.err)
				}
				if errors.Is(w.err, ErrRef) || errors.Is(w.err, ErrForbidden) {
					if len(rec.reqs) != 0 {
						t.Errorf("%s resolving %q: the backend was asked %v", tenant, ref, rec.reqs)
					}
				}
			case err != nil:
				t.Errorf("%s resolving %q: %v", tenant, ref, err)
			case string(s.Bytes()) != w.value:
				t.Errorf("%s resolving %q got another value", tenant, ref)
			}
			for _, r := range rec.reqs {
				if !strings.HasPrefix(r, "tenant/"+tenant+"|") {
					t.Errorf("%s resolving %q: the backend was asked for %s", tenant, ref, r)
				}
			}
		}
	}
	// A bad tenant id never reaches anything.
	for _, tenant := range []string{"", "../acme", "acme/x", "a b"} {
		if _, err := b.Resolve(context.Background(), tenant, "db"); !errors.Is(err, ErrRef) {
			t.Errorf("tenant %q: %v", tenant, err)
		}
	}
}

// TestSecretNeverSerialized: a resolved secret does not print, marshal or
// survive Destroy.
func TestSecretNeverSerialized(t *testing.T) {
	b, _, _ := newBroker(t)
	s, err := b.Resolve(context.Background(), "acme", "db")
	if err != nil {
		t.Fatal(err)
	}
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s %q %x", s, s, s, s, s, s), fmt.Sprint(struct{ S *Secret }{s})} {
		if strings.Contains(out, "acme-db") || strings.Contains(out, "61636d65") {
			t.Fatalf("secret printed: %s", out)
		}
	}
	if _, err := json.Marshal(map[string]any{"s": s}); err == nil {
		t.Fatal("a secret was marshalled to JSON")
	}
	v := s.Bytes()
	s.Destroy()
	if !bytes.Equal(v, make([]byte, len(v))) || s.Bytes() != nil {
		t.Fatal("Destroy left the value")
	}
}

// TestStoreAtRest: the store holds ciphertext only; another master key
// cannot read it; Put rotates; Delete removes.
func TestStoreAtRest(t *testing.T) {
	b, _, dir := newBroker(t)
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		raw, _ := os.ReadFile(p)
		if bytes.Contains(raw, []byte("db-password")) {
			t.Errorf("%s holds the plaintext", p)
		}
		if !bytes.HasPrefix(raw, []byte("age-encryption.org/v1")) {
			t.Errorf("%s is not an age file", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	other, _ := age.GenerateX25519Identity()
	st2, _ := NewStore(dir, other.String())
	if _, err := (&Broker{Store: st2}).Resolve(context.Background(), "acme", "db"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("another master key read the store: %v", err)
	}
	if err := b.Store.Put("acme", "db", []byte("rotated-password")); err != nil {
		t.Fatal(err)
	}
	s, err := b.Resolve(context.Background(), "acme", "db")
	if err != nil || string(s.Bytes()) != "rotated-password" {
		t.Fatalf("after rotation: %v", err)
	}
	if err := b.Store.Delete("acme", "db"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Resolve(context.Background(), "acme", "db"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("after delete: %v", err)
	}
	for _, name := range []string{"../x", "a/b", "", ".hidden"} {
		if err := b.Store.Put("acme", name, []byte("v")); !errors.Is(err, ErrRef) {
			t.Errorf("Put name %q: %v", name, err)
		}
	}
}

// TestResolveOperator: the operator's file: and env: sources work for the
// operator, and only absolute files.
func TestResolveOperator(t *testing.T) {
	p := filepath.Join(t.TempDir(), "k")
	os.WriteFile(p, []byte("operator-value\n"), 0o600)
	s, err := ResolveOperator("file:"+p, nil)
	if err != nil || string(s.Bytes()) != "operator-value" {
		t.Fatalf("file: %v", err)
	}
	env := func(k string) (string, bool) { return map[string]string{"K": "from-env"}[k], k == "K" }
	if s, err := ResolveOperator("env:K", env); err != nil || string(s.Bytes()) != "from-env" {
		t.Fatalf("env: %v", err)
	}
	for _, ref := range []string{"file:relative", "env:MISSING", "db", "http:x"} {
		if _, err := ResolveOperator(ref, env); err == nil {
			t.Errorf("%q resolved", ref)
		}
	}
}
