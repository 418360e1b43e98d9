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
