package standing

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
)

const (
	parentGrants = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"make"},{"name":"python3"}]},"egress":[{"host":"ci.example.com","proto":"tcp","ports":[443,443]}],"limits":{"wall_ms":600000}}`
	boundsGrants = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"make"}]},"limits":{"wall_ms":60000}}`
	narrowGrants = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"make","args":["test"]}]},"limits":{"wall_ms":30000}}`
)

func jcs(t testing.TB, s string) []byte {
	t.Helper()
	b, err := canon.JCS([]byte(s))
	if err != nil {
		t.Fatalf("%v: %s", err, s)
	}
	return b
}

func policyDoc(issuer, holder canon.ID, edit func(m map[string]any)) map[string]any {
	m := map[string]any{
		"type": PolicyType, "issuer": issuer.String(), "holder": holder.String(),
		"parent": json.RawMessage(parentGrants), "bounds": json.RawMessage(boundsGrants),
		"max_children": 5, "rate": map[string]any{"count": 2, "window_ms": 60000},
		"triggers":      []any{map[string]any{"type": "git.push", "match": map[string]any{"branch": "main"}}},
		"not_before_ms": 1_000_000, "not_after_ms": 2_000_000,
	}
	if edit != nil {
		edit(m)
	}
	return m
}

func mustPolicy(t testing.TB, m map[string]any) *Policy {
	t.Helper()
	b, _ := json.Marshal(m)
	p, err := ParsePolicy(jcs(t, string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func event(t testing.TB, id, kind, branch string) *Event {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"type": EventType, "kind": kind, "id": id, "at_ms": 1_500_000, "fields": map[string]any{"branch": branch, "repo": "acme/app"}})
	e, err := ParseEvent(jcs(t, string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return e
}

var issuerKey, holderKey, otherKey = mustKey(), mustKey(), mustKey()

func mustKey() *sign.PrivateKey {
	k, err := sign.Generate()
	if err != nil {
		panic(err)
	}
	return k
}

func TestMint(t *testing.T) {
	p := mustPolicy(t, policyDoc(issuerKey.Public().ID(), holderKey.Public().ID(), nil))
	e := event(t, "push-1", "git.push", "main")
	m, err := Mint(p, e, nil, 1_500_000, Counts{})
	if err != nil {
		t.Fatal(err)
	}
	if m.Grants.ID() != p.Bounds.ID() || m.Seq != 0 || m.Policy != p.ID() {
		t.Fatalf("minted %+v", m)
	}
	narrow, _ := grant.Parse(jcs(t, narrowGrants))
	m2, err := Mint(p, e, narrow, 1_500_000, Counts{Total: 3, InWindow: 1})
	if err != nil || m2.Seq != 3 || m2.Grants.ID() != narrow.ID() {
		t.Fatalf("narrow child: %+v %v", m2, err)
	}
	env, err := Seal(p, m2, holderKey)
	if err != nil {
		t.Fatal(err)
	}
	back, err := OpenMinted(env, p, holderKey.Public())
	if err != nil || back.Grants.ID() != narrow.ID() {
		t.Fatalf("OpenMinted: %v", err)
	}
	if _, err := OpenMinted(env, p, otherKey.Public()); !errors.Is(err, ErrSigner) {
		t.Fatalf("minted opened with another key: %v", err)
	}
	if _, err := Seal(p, m2, issuerKey); !errors.Is(err, ErrSigner) {
		t.Fatalf("the issuer sealed as holder: %v", err)
	}
}

// TestMintRefuses: each refusal, with its reason.
func TestMintRefuses(t *testing.T) {
	p := mustPolicy(t, policyDoc(issuerKey.Public().ID(), holderKey.Public().ID(), nil))
	wide, _ := grant.Parse(jcs(t, parentGrants))
	cases := []struct {
		name  string
		e     *Event
		child *grant.Set
		now   int64
		c     Counts
		want  error
	}{
		{"other branch", event(t, "e", "git.push", "dev"), nil, 1_500_000, Counts{}, ErrUnmatched},
		{"other kind", event(t, "e", "git.tag", "main"), nil, 1_500_000, Counts{}, ErrUnmatched},
		{"wider child", event(t, "e", "git.push", "main"), wide, 1_500_000, Counts{}, grant.ErrWidening},
		{"not yet valid", event(t, "e", "git.push", "main"), nil, 999_999, Counts{}, ErrExpired},
		{"expired", event(t, "e", "git.push", "main"), nil, 2_000_000, Counts{}, ErrExpired},
		{"rate", event(t, "e", "git.push", "main"), nil, 1_500_000, Counts{Total: 2, InWindow: 2}, ErrRate},
		{"exhausted", event(t, "e", "git.push", "main"), nil, 1_500_000, Counts{Total: 5}, ErrExhausted},
	}
	for _, c := range cases {
		if _, err := Mint(p, c.e, c.child, c.now, c.c); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
	}
}

// TestPolicyRefuses: a policy is checked before anything is minted under it.
func TestPolicyRefuses(t *testing.T) {
	is, ho := issuerKey.Public().ID(), holderKey.Public().ID()
	for name, edit := range map[string]func(m map[string]any){
		"bounds wider than parent": func(m map[string]any) {
			m["bounds"] = json.RawMessage(parentGrants)
			m["parent"] = json.RawMessage(boundsGrants)
		},
		"holder is issuer": func(m map[string]any) { m["holder"] = is.String() },
		"zero children":    func(m map[string]any) { m["max_children"] = 0 },
		"rate over total":  func(m map[string]any) { m["rate"] = map[string]any{"count": 6, "window_ms": 1000} },
		"zero window":      func(m map[string]any) { m["rate"] = map[string]any{"count": 1, "window_ms": 0} },
		"empty validity":   func(m map[string]any) { m["not_after_ms"] = 1_000_000 },
		"no triggers":      func(m map[string]any) { m["triggers"] = []any{} },
		"bad trigger type": func(m map[string]any) {
			m["triggers"] = []any{map[string]any{"type": "a b", "match": map[string]any{}}}
		},
		"unknown member": func(m map[string]any) { m["extra"] = true },
		"other type":     func(m map[string]any) { m["type"] = "cordon.mint-policy.v2" },
	} {
		b, _ := json.Marshal(policyDoc(is, ho, edit))
		if _, err := ParsePolicy(jcs(t, string(b))); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// Not in canonical form.
	b, _ := json.Marshal(policyDoc(is, ho, nil))
	if _, err := ParsePolicy(b); !errors.Is(err, ErrInvalid) {
		t.Errorf("non-canonical policy: %v", err)
	}
}

// TestOpenPolicy: only the issuer the policy names can sign it.
func TestOpenPolicy(t *testing.T) {
	b, _ := json.Marshal(policyDoc(issuerKey.Public().ID(), holderKey.Public().ID(), nil))
	doc := jcs(t, string(b))
	env := sign.Seal(issuerKey, PolicyPayloadType, doc)
	if _, err := OpenPolicy(env, issuerKey.Public()); err != nil {
		t.Fatal(err)
	}
	// Signed by someone else who claims to be the issuer.
	forged := sign.Seal(otherKey, PolicyPayloadType, doc)
	if _, err := OpenPolicy(forged, issuerKey.Public()); !errors.Is(err, sign.ErrBadSignature) {
		t.Fatalf("forged policy: %v", err)
	}
	// Signed correctly by a key that is not the issuer it names.
	if _, err := OpenPolicy(forged, otherKey.Public()); !errors.Is(err, ErrSigner) || !strings.Contains(err.Error(), "names issuer") {
		t.Fatalf("self-signed by another key: %v", err)
	}
	// The holder cannot issue its own policy.
	b2, _ := json.Marshal(policyDoc(holderKey.Public().ID(), otherKey.Public().ID(), nil))
	own := sign.Seal(holderKey, PolicyPayloadType, jcs(t, string(b2)))
	if _, err := OpenPolicy(own, issuerKey.Public()); err == nil {
		t.Fatal("a policy the holder signed opened under the issuer's key")
	}
}
