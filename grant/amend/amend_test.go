package amend

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
)

const (
	fullGrants   = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"curl"},{"name":"make"}]},"egress":[{"host":"a.example","proto":"tcp","ports":[443,443]},{"host":"b.example","proto":"tcp","ports":[443,443]}],"limits":{"wall_ms":60000}}`
	tighterGrant = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"curl"}]},"egress":[{"host":"a.example","proto":"tcp","ports":[443,443]}],"limits":{"wall_ms":60000}}`
	widerGrants  = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"curl"},{"name":"make"}]},"egress":[{"host":"a.example","proto":"tcp","ports":[443,443]},{"host":"b.example","proto":"tcp","ports":[443,443]},{"host":"evil.example","proto":"tcp","ports":[443,443]}],"limits":{"wall_ms":60000}}`
	run1         = "0123456789abcdef0123456789abcdef"
)

func set(t testing.TB, s string) *grant.Set {
	t.Helper()
	g, err := grant.Parse([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func keys(t testing.TB) (issuer, agent, other *sign.PrivateKey) {
	t.Helper()
	var ks []*sign.PrivateKey
	for i := range 3 {
		k, err := sign.NewKeyFromSeed(bytes.Repeat([]byte{byte(i + 1)}, 32))
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
	}
	return ks[0], ks[1], ks[2]
}

func state(t testing.TB, agent *sign.PrivateKey) State {
	return State{Run: run1, Agent: agent.Public(), Grants: set(t, fullGrants),
		Budgets: Budgets{"max_turns": 10, "max_model_calls": 20, "max_input_tokens": 1000, "max_output_tokens": 1000, "wall_ms": 60000}}
}

func TestApply(t *testing.T) {
	issuer, agent, other := keys(t)
	cur := state(t, agent)
	amd := func(edit func(a *Amendment)) *Amendment {
		a := &Amendment{Run: run1, Issuer: issuer.Public().ID(), Seq: 1, Base: cur.Grants.ID(), Grants: set(t, tighterGrant)}
		if edit != nil {
			edit(a)
		}
		return a
	}
	signed := func(k *sign.PrivateKey, a *Amendment) []byte {
		return sign.Seal(k, AmendmentPayloadType, a.JCS())
	}

	next, ch, err := Apply(cur, issuer.Public(), signed(issuer, amd(nil)))
	if err != nil {
		t.Fatal(err)
	}
	if ch.Before != cur.ID() || ch.After != next.ID() || ch.Before == ch.After || next.Seq != 1 || next.Grants.ID() != set(t, tighterGrant).ID() {
		t.Fatalf("change %+v, next %+v", ch, next)
	}
	// A budget-only tightening changes the authority but not the grant set.
	next2, ch2, err := Apply(next, issuer.Public(), signed(issuer, amd(func(a *Amendment) {
		a.Seq, a.Base, a.Grants, a.Budgets = 2, next.Grants.ID(), next.Grants, Budgets{"max_turns": 3}
	})))
	if err != nil || ch2.GrantsBefore != ch2.GrantsAfter || ch2.Before == ch2.After || next2.Budgets["max_turns"] != 3 {
		t.Fatalf("budget-only: %v %+v", err, ch2)
	}

	for _, c := range []struct {
		name string
		env  []byte
		want error
		text string
	}{
		{"agent-signed", signed(agent, amd(nil)), ErrSigner, "agent key"},
		{"other-key", signed(other, amd(nil)), ErrSigner, "not signed by the run's issuer"},
		{"names-other-issuer", signed(issuer, amd(func(a *Amendment) { a.Issuer = other.Public().ID() })), ErrSigner, "names issuer"},
		{"widening", signed(issuer, amd(func(a *Amendment) { a.Grants = set(t, widerGrants) })), grant.ErrWidening, "widens"},
		{"no-op", signed(issuer, amd(func(a *Amendment) { a.Grants = cur.Grants })), ErrNoop, "changes nothing"},
		{"base", signed(issuer, amd(func(a *Amendment) { a.Base = canon.Sum([]byte("x")) })), ErrBase, "amends"},
		{"budget-raised", signed(issuer, amd(func(a *Amendment) { a.Budgets = Budgets{"max_turns": 11} })), ErrBudget, "max_turns 11"},
		{"budget-unknown", signed(issuer, amd(func(a *Amendment) { a.Budgets = Budgets{"max_loops": 1} })), ErrInvalid, "unknown budget"},
		{"run", signed(issuer, amd(func(a *Amendment) { a.Run = strings.Repeat("f", 32) })), ErrRun, "another run"},
		{"checkpoint-context", sign.Seal(issuer, CheckpointPayloadType, amd(nil).JCS()), ErrSigner, "not signed"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, ch, err := Apply(cur, issuer.Public(), c.env)
			if !errors.Is(err, c.want) || !strings.Contains(err.Error(), c.text) || ch != nil || got.Grants != cur.Grants {
				t.Fatalf("got %v, want %v containing %q", err, c.want, c.text)
			}
		})
	}
	// Replays: the applied amendment again, and one numbered below it.
	for _, env := range [][]byte{signed(issuer, amd(nil)), signed(issuer, amd(func(a *Amendment) { a.Seq = 1; a.Budgets = Budgets{"max_turns": 1} }))} {
		if _, _, err := Apply(next, issuer.Public(), env); !errors.Is(err, ErrReplay) {
			t.Fatalf("replay: %v", err)
		}
	}
	if _, _, err := Apply(cur, sign.PublicKey{}, signed(issuer, amd(nil))); !errors.Is(err, ErrSigner) {
		t.Fatalf("no issuer: %v", err)
	}
	if _, err := Seal(other, amd(nil)); !errors.Is(err, ErrSigner) {
		t.Fatalf("seal by another key: %v", err)
	}
}

func TestParseAmendmentStrict(t *testing.T) {
	issuer, _, _ := keys(t)
	a := &Amendment{Run: run1, Issuer: issuer.Public().ID(), Seq: 1, Base: set(t, fullGrants).ID(), Grants: set(t, tighterGrant)}
	good := a.JCS()
	if _, err := ParseAmendment(good); err != nil {
		t.Fatal(err)
	}
	for name, b := range map[string][]byte{
		"unknown member": bytes.Replace(good, []byte(`{"base"`), []byte(`{"a":1,"base"`), 1),
		"not canonical":  append([]byte(" "), good...),
		"seq zero":       bytes.Replace(good, []byte(`"seq":1`), []byte(`"seq":0`), 1),
		"bad run":        bytes.Replace(good, []byte(run1), []byte("RUN"), 1),
		"empty budgets":  bytes.Replace(good, []byte(`"grants"`), []byte(`"budgets":{},"grants"`), 1),
		"budget unknown": bytes.Replace(good, []byte(`"grants"`), []byte(`"budgets":{"max_loops":1},"grants"`), 1),
	} {
		if _, err := ParseAmendment(b); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestCheckpoint(t *testing.T) {
	_, agent, other := keys(t)
	c := &Checkpoint{Run: run1, Agent: agent.Public().ID(), Turn: 2, Journal: Head{Count: 7, ID: canon.Sum([]byte("head"))},
		Grants: set(t, fullGrants).ID(), Budgets: state(t, agent).Budgets,
		Spent: Budgets{"max_turns": 2, "max_model_calls": 2, "max_input_tokens": 100, "max_output_tokens": 50, "wall_ms": 12}}
	env, err := SealCheckpoint(agent, c)
	if err != nil {
		t.Fatal(err)
	}
	got, err := OpenCheckpoint(env, agent.Public())
	if err != nil || !bytes.Equal(got.JCS(), c.JCS()) {
		t.Fatalf("open: %v", err)
	}
	if _, err := SealCheckpoint(other, c); !errors.Is(err, ErrSigner) {
		t.Fatalf("seal by another key: %v", err)
	}
	if _, err := OpenCheckpoint(env, other.Public()); !errors.Is(err, sign.ErrBadSignature) {
		t.Fatalf("open under another key: %v", err)
	}
	// Signed by another key that it does not name.
	if _, err := OpenCheckpoint(sign.Seal(other, CheckpointPayloadType, c.JCS()), other.Public()); !errors.Is(err, ErrSigner) {
		t.Fatalf("names another agent: %v", err)
	}
	// Tampered: one byte of the payload changed, the signature kept.
	sig := agent.Sign(CheckpointPayloadType, c.JCS())
	if _, err := VerifyCheckpoint(c.JCS(), sig, agent.Public()); err != nil {
		t.Fatal(err)
	}
	bad := bytes.Replace(c.JCS(), []byte(`"turn":2`), []byte(`"turn":3`), 1)
	if _, err := VerifyCheckpoint(bad, sig, agent.Public()); !errors.Is(err, sign.ErrBadSignature) {
		t.Fatalf("tampered: %v", err)
	}
	// An amendment's context never verifies a checkpoint.
	if _, err := OpenCheckpoint(sign.Seal(agent, AmendmentPayloadType, c.JCS()), agent.Public()); err == nil {
		t.Fatal("a checkpoint opened under the amendment context")
	}
}
