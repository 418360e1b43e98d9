package runner

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/agent/mailbox"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/durable"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/receipt"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant/amend"
)

// Tests of the fixes to docs/security/redteam-park.md (F1–F11), beside
// the red team's own tests in redteam_park_test.go.

// TestResumeIdentityRefusals: everything that configured the run at its
// start, besides the manifest, grant set and environment, is part of its
// identity: a resume with another tenant, other variables from the
// operator's environment, or a key where the run had none, is refused
// naming the value (F1, F2 and the key are in the red team's tests).
func TestResumeIdentityRefusals(t *testing.T) {
	m := baseManifest(t, func(x map[string]any) {
		g := grantsDoc([]string{"python3", "git", "printenv"})
		g["env"] = []string{"TOKEN"}
		x["grants"] = g
	})
	for _, c := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"another tenant", func(c *Config) { c.Tenant = "t2" }, `the run started as tenant "" and this resume is tenant "t2"`},
		{"another variable set", func(c *Config) { c.Env = map[string]string{"TOKEN": "x"} }, "the run's commands got the variables [] from the operator's environment and this resume would give them [TOKEN]"},
		{"a key where the run had none", func(c *Config) { c.Key = parkKey(t) }, "head.dsse"},
		{"a dry run resumed as applied", func(c *Config) { c.Apply = true }, "the run started as a dry run and this resume is applied (--apply)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			ws := newWorkspace(t, defaultFiles())
			parkWaiting(t, ws, m, nil, false, nil)
			_, err := runScript(t, ws, m, &script{resps: []*provider.Response{finish("done")}}, runOpts{cfg: func(cf *Config) {
				cf.Resume = true
				c.edit(cf)
			}})
			if !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("resume: %v, want %q", err, c.want)
			}
		})
	}
}

// TestResumeAuthorityFromOperator (F8): the authority in force after a
// resume is derived from the operator's manifest and the journal's
// amendments, never taken from the state file. An unsigned run whose
// state (re-sealed consistently, as its writer can) claims wider grants
// in force is refused; so is a signed run whose applied amendment's file
// is gone, or replaced by another amendment the issuer signed.
func TestResumeAuthorityFromOperator(t *testing.T) {
	t.Run("wider grants in the state", func(t *testing.T) {
		ws := newWorkspace(t, defaultFiles())
		m := baseManifest(t, nil)
		parkWaiting(t, ws, m, nil, false, nil)
		wide := grantSet(t, grantsDoc([]string{"python3", "git", "printenv", "curl", "sh"}, "collector.example"))
		forgeUnsigned(t, ws, nil, func(st map[string]any) {
			st["authority"].(map[string]any)["grants"] = json.RawMessage(wide.JCS())
		})
		_, err := runScript(t, ws, m, &script{resps: []*provider.Response{finish("done")}}, runOpts{cfg: func(c *Config) { c.Resume = true }})
		if !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "is not what the operator's manifest and the journal's amendments give") {
			t.Fatalf("resume: %v", err)
		}
	})
	issuer := parkKey(t)
	ipub := issuer.Public()
	m := baseManifest(t, func(m map[string]any) { m["grants"] = grantsDoc([]string{"python3", "git", "printenv"}) })
	tight := grantSet(t, grantsDoc([]string{"python3", "git"}))
	parkAmended := func(t *testing.T) (ws, run string) {
		ws = newWorkspace(t, defaultFiles())
		s1 := &hooked{script: &script{resps: []*provider.Response{calls(call("read", `{"path":"in"}`)), calls(call("mailbox", `{"action":"wait","text":"?"}`))}}}
		s1.hook = func(i int) {
			if i == 0 {
				l := readLive(t, ws)
				putAmendment(t, ws, l.Run, 1, sign.Seal(issuer, amend.AmendmentPayloadType,
					(&amend.Amendment{Run: l.Run, Issuer: ipub.ID(), Seq: 1, Base: m.Grants.ID(), Grants: tight}).JCS()))
			}
		}
		out, err := runScript(t, ws, m, nil, runOpts{apply: true, cfg: func(c *Config) { c.Issuer, c.Key, c.Park, c.Provider = &ipub, issuer, true, s1 }})
		if err != nil || out.Status != StatusParked {
			t.Fatalf("%v %v", out, err)
		}
		mailbox.Post(ws, mailbox.FromOperator, "ok", time.Now())
		return ws, out.Run
	}
	resume := func(ws string) error {
		_, err := runScript(t, ws, m, &script{resps: []*provider.Response{finish("done")}}, runOpts{apply: true, cfg: func(c *Config) {
			c.Issuer, c.Key, c.Resume = &ipub, issuer, true
		}})
		return err
	}
	t.Run("an applied amendment's file removed", func(t *testing.T) {
		ws, run := parkAmended(t)
		if err := os.Remove(filepath.Join(ws, StateDir, AmendDir, run, "1.dsse")); err != nil {
			t.Fatal(err)
		}
		if err := resume(ws); !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "amendment 1, which the run applied") {
			t.Fatalf("resume: %v", err)
		}
	})
	t.Run("an applied amendment's file replaced", func(t *testing.T) {
		ws, run := parkAmended(t)
		other := grantSet(t, grantsDoc([]string{"python3"}))
		putAmendment(t, ws, run, 1, sign.Seal(issuer, amend.AmendmentPayloadType,
			(&amend.Amendment{Run: run, Issuer: ipub.ID(), Seq: 1, Base: m.Grants.ID(), Grants: other}).JCS()))
		if err := resume(ws); !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "but journal entry") {
			t.Fatalf("resume: %v", err)
		}
	})
}

// TestResumedReceiptCoversRun (F11): a resumed run's receipt covers the
// whole run — from its start, with the energy of every execute segment
// (the durable record's energy_uj) — and not the idle energy of its
// parks, which the durable record keeps apart (idle_uj).
func TestResumedReceiptCoversRun(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	m, key := baseManifest(t, nil), parkKey(t)
	slow := &hooked{script: &script{resps: []*provider.Response{calls(call("read", `{"path":"in"}`)), calls(call("mailbox", `{"action":"wait","text":"?"}`))}},
		hook: func(int) { time.Sleep(100 * time.Millisecond) }}
	if out, err := runScript(t, ws, m, nil, runOpts{apply: true, cfg: func(c *Config) { c.Key, c.Park, c.Provider = key, true, slow }}); err != nil || out.Status != StatusParked {
		t.Fatalf("%v %v", out, err)
	}
	mailbox.Post(ws, mailbox.FromOperator, "yes", time.Now())
	out, err := runScript(t, ws, m, &script{resps: []*provider.Response{finish("done")}}, runOpts{apply: true, cfg: func(c *Config) { c.Key, c.Resume = key, true }})
	if err != nil || out.Status != StatusFinished {
		t.Fatalf("%v %v", out, err)
	}
	b, err := os.ReadFile(filepath.Join(ws, StateDir, ReceiptFile))
	if err != nil {
		t.Fatal(err)
	}
	rc, _, err := receipt.Verify(b, key.Public())
	if err != nil {
		t.Fatal(err)
	}
	h := readRecord(t, ws, out.Run, key).Head()
	start, _ := time.Parse(time.RFC3339Nano, out.Body.Start)
	// The Estimator's figures (no hardware meter here): the receipt's
	// total is exactly the record's execute segments'.
	if rc.Total.MeasuredUJ == nil && int64(rc.Total.EstimatedUJ) != h.EnergyUJ {
		t.Fatalf("receipt %d µJ, the record's execute segments %d µJ (idle %d µJ apart)", rc.Total.EstimatedUJ, h.EnergyUJ, h.IdleUJ)
	}
	if int64(rc.StartNS) != start.UnixNano() {
		t.Fatalf("receipt start %d, the run's start %d", rc.StartNS, start.UnixNano())
	}
	if h.IdleUJ <= 0 || h.Parks != 1 {
		t.Fatalf("record head %+v", h)
	}
}

// TestTreeDigestExact (F4, F5): names and link targets are encoded
// injectively (a byte that is not UTF-8, and "%", are escaped), and the
// mode keeps setuid, setgid and sticky.
func TestTreeDigestExact(t *testing.T) {
	seen := map[string]string{}
	for _, n := range []string{"notes\xff", "notes\xfd", "notes\ufffd", "notes%FF", "notes%25FF", "notes", "é", "e\u0301"} {
		e := escapeName(n)
		if o, ok := seen[e]; ok {
			t.Fatalf("%q and %q both escape to %q", o, n, e)
		}
		seen[e] = n
	}
	if escapeName("plain/name.txt") != "plain/name.txt" || escapeName("a\xffb") != "a%FFb" || escapeName("50%") != "50%25" {
		t.Fatalf("escapes: %q %q %q", escapeName("plain/name.txt"), escapeName("a\xffb"), escapeName("50%"))
	}
	if got := modeBits(0o755 | os.ModeSetuid | os.ModeSetgid | os.ModeSticky); got != 0o7755 {
		t.Fatalf("modeBits = %o", got)
	}
}

// TestVerifyRunSegmentChain (F6, F9): `cordon verify run` shows a
// resumed run's segment chain and fails when the run's durable record
// does not agree with the journal's park/resume pairs (here: a record
// rewritten to another snapshot).
func TestVerifyRunSegmentChain(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	m, key := baseManifest(t, nil), parkKey(t)
	parkWaiting(t, ws, m, key, true, nil)
	out, err := runScript(t, ws, m, &script{resps: []*provider.Response{finish("done")}}, runOpts{apply: true, cfg: func(c *Config) { c.Key, c.Resume = key, true }})
	if err != nil || out.Status != StatusFinished {
		t.Fatalf("%v %v", out, err)
	}
	pub := key.Public()
	segs := func() runrecord.Check {
		for _, c := range runrecord.Verify(ws, &pub).Checks {
			if c.Name == "segments" {
				return c
			}
		}
		t.Fatal("verify run shows no segment chain for a resumed run")
		return runrecord.Check{}
	}
	c := segs()
	rec := readRecord(t, ws, out.Run, key)
	snap := rec.Segments()[1].Snapshot
	if !c.OK || !strings.Contains(c.Detail, "run "+out.Run+": 2 segments") || !strings.Contains(c.Detail, "resumed from snapshot "+snap.String()) {
		t.Fatalf("segments: %+v", c)
	}
	other := durable.New()
	for _, s := range rec.Segments() {
		if s.Kind == durable.Suspend || s.Kind == durable.Resume {
			s.Snapshot = canon.Sum([]byte("another snapshot"))
		}
		if _, err := other.Append(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(ws, StateDir, RunsDir, out.Run, RecordFile), other.Wire(), 0o644); err != nil {
		t.Fatal(err)
	}
	if c := segs(); c.OK || !strings.Contains(c.Detail, "resumes from snapshots") {
		t.Fatalf("a record that disagrees with the journal: %+v", c)
	}
}

// TestResumeJournalBoundBySnapshot (F3): the snapshot binds the journal
// up to and including run.park, so an earlier entry rewritten while the
// run is parked — the whole chain after it relinked, run.park itself
// unchanged — is refused, though the journal verifies on its own.
func TestResumeJournalBoundBySnapshot(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	m, key := baseManifest(t, nil), parkKey(t)
	parkWaiting(t, ws, m, key, true, nil)
	es := entries(t, ws)
	jf := filepath.Join(ws, StateDir, JournalFile)
	if err := os.Remove(jf); err != nil {
		t.Fatal(err)
	}
	w, err := journal.Open(jf)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		body := e.Body()
		if e.Type == "run.start" {
			b := string(body.AppendJCS(nil))
			if !strings.Contains(b, `"apply":true`) {
				t.Fatalf("run.start %s", b)
			}
			b = strings.Replace(b, `"apply":true`, `"apply":false`, 1)
			if body, err = canon.Parse([]byte(b)); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := w.Append(e.Type, body); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	_, err = runScript(t, ws, m, &script{resps: []*provider.Response{finish("done")}}, runOpts{apply: true, cfg: func(c *Config) { c.Key, c.Resume = key, true }})
	if !errors.Is(err, ErrResume) || !strings.Contains(err.Error(), "does not make the snapshot") {
		t.Fatalf("resume on a relinked journal: %v", err)
	}
}
