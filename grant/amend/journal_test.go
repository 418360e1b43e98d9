package amend

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/sign"
)

// TestVerifyJournal: checkpoints verify under the agent key of their
// run's run.principals entry and must record the journal as it stood; a
// checkpoint by another key, one that names another position, and one
// before any principals are refused.
func TestVerifyJournal(t *testing.T) {
	_, agent, other := keys(t)
	body := func(m map[string]any) canon.Value {
		b, _ := json.Marshal(m)
		v, err := canon.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	build := func(signer *sign.PrivateKey, shift int64, principals bool) []journal.Entry {
		path := filepath.Join(t.TempDir(), "j.jsonl")
		w, err := journal.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		w.Append("run.start", body(map[string]any{"type": "cordon.run.start.v1"}))
		if principals {
			w.Append("run.principals", body(map[string]any{"type": "cordon.run.principals.v1", "run": run1, "agent": agent.Public().ID().String(),
				"agent_key": base64.RawURLEncoding.EncodeToString(agent.Public().Bytes())}))
		}
		h := w.Head()
		c := &Checkpoint{Run: run1, Agent: agent.Public().ID(), Turn: 0, Journal: Head{Count: h.Count + shift, ID: h.ID},
			Grants: set(t, fullGrants).ID(), Budgets: state(t, agent).Budgets,
			Spent: Budgets{"max_turns": 0, "max_model_calls": 0, "max_input_tokens": 0, "max_output_tokens": 0, "wall_ms": 0}}
		sig := signer.Sign(CheckpointPayloadType, c.JCS())
		if _, err := w.Append("checkpoint", body(map[string]any{"type": "cordon.checkpoint.v1", "task": "1",
			"checkpoint": json.RawMessage(c.JCS()), "sig": base64.RawURLEncoding.EncodeToString(sig)})); err != nil {
			t.Fatal(err)
		}
		w.Close()
		f, _ := os.Open(path)
		defer f.Close()
		es, _, err := journal.Scan(f)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	if n, err := VerifyJournal(build(agent, 0, true)); err != nil || n != 1 {
		t.Fatalf("good journal: %d, %v", n, err)
	}
	if _, err := VerifyJournal(build(other, 0, true)); !errors.Is(err, sign.ErrBadSignature) {
		t.Fatalf("checkpoint by another key: %v", err)
	}
	if _, err := VerifyJournal(build(agent, 1, true)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("checkpoint naming another position: %v", err)
	}
	if _, err := VerifyJournal(build(agent, 0, false)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("checkpoint without principals: %v", err)
	}
}

// TestVerifyJournalResume: a parked run that resumes journals run.resume
// and then a fresh agent key in a run.principals marked resume; every
// checkpoint verifies under the key in force at its position. A
// checkpoint signed by the old key after the resume, a principals entry
// injected mid-segment without a run.resume, a resume's principals with
// no run.resume before it or naming another run, and a checkpoint
// between run.resume and its principals are refused.
func TestVerifyJournalResume(t *testing.T) {
	_, agent, other := keys(t)
	body := func(m map[string]any) canon.Value {
		b, _ := json.Marshal(m)
		v, err := canon.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	principals := func(k *sign.PrivateKey, run string, resume bool) func(*journal.Writer) {
		return func(w *journal.Writer) {
			m := map[string]any{"type": "cordon.run.principals.v1", "run": run, "agent": k.Public().ID().String(),
				"agent_key": base64.RawURLEncoding.EncodeToString(k.Public().Bytes())}
			if resume {
				m["resume"] = true
			}
			w.Append("run.principals", body(m))
		}
	}
	checkpoint := func(signer, named *sign.PrivateKey) func(*journal.Writer) {
		return func(w *journal.Writer) {
			h := w.Head()
			c := &Checkpoint{Run: run1, Agent: named.Public().ID(), Journal: Head{Count: h.Count, ID: h.ID},
				Grants: set(t, fullGrants).ID(), Budgets: state(t, agent).Budgets,
				Spent: Budgets{"max_turns": 0, "max_model_calls": 0, "max_input_tokens": 0, "max_output_tokens": 0, "wall_ms": 0}}
			sig := signer.Sign(CheckpointPayloadType, c.JCS())
			w.Append("checkpoint", body(map[string]any{"type": "cordon.checkpoint.v1", "task": "1",
				"checkpoint": json.RawMessage(c.JCS()), "sig": base64.RawURLEncoding.EncodeToString(sig)}))
		}
	}
	resume := func(run string) func(*journal.Writer) {
		return func(w *journal.Writer) {
			w.Append("run.resume", body(map[string]any{"type": "cordon.run.resume.v1", "run": run, "snapshot": "x", "parked_ms": 1,
				"idle_uj": 1, "idle_provenance": "Estimator"}))
		}
	}
	park := func(w *journal.Writer) {
		w.Append("run.park", body(map[string]any{"type": "cordon.run.park.v1", "run": run1}))
	}
	build := func(steps ...func(*journal.Writer)) []journal.Entry {
		path := filepath.Join(t.TempDir(), "j.jsonl")
		w, err := journal.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		w.Append("run.start", body(map[string]any{"type": "cordon.run.start.v1"}))
		for _, s := range steps {
			s(w)
		}
		w.Close()
		f, _ := os.Open(path)
		defer f.Close()
		es, _, err := journal.Scan(f)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	good := build(principals(agent, run1, false), checkpoint(agent, agent), park, resume(run1), principals(other, run1, true), checkpoint(other, other))
	if n, err := VerifyJournal(good); err != nil || n != 2 {
		t.Fatalf("a resumed run: %d, %v", n, err)
	}
	for name, c := range map[string]struct {
		es   []journal.Entry
		want error
	}{
		"old key after the resume":  {build(principals(agent, run1, false), park, resume(run1), principals(other, run1, true), checkpoint(agent, other)), sign.ErrBadSignature},
		"old key naming itself":     {build(principals(agent, run1, false), park, resume(run1), principals(other, run1, true), checkpoint(agent, agent)), sign.ErrBadSignature},
		"principals mid-segment":    {build(principals(agent, run1, false), checkpoint(agent, agent), principals(other, run1, false), checkpoint(other, other)), ErrInvalid},
		"resume flag, no resume":    {build(principals(agent, run1, false), principals(other, run1, true), checkpoint(other, other)), ErrInvalid},
		"resume of another run":     {build(principals(agent, run1, false), park, resume("fedcba9876543210fedcba9876543210"), principals(other, run1, true)), ErrInvalid},
		"resume names another run":  {build(principals(agent, run1, false), park, resume(run1), principals(other, "fedcba9876543210fedcba9876543210", true)), ErrInvalid},
		"checkpoint before the key": {build(principals(agent, run1, false), park, resume(run1), checkpoint(agent, agent)), ErrInvalid},
		"resume before any run":     {build(resume(run1), principals(other, run1, true)), ErrInvalid},
	} {
		if _, err := VerifyJournal(c.es); !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want %v", name, err, c.want)
		}
	}
}
