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

// TestRedteamParkResumeWithoutPark (F6, docs/security/redteam-park.md):
// VerifyJournal lets a run.resume stand anywhere in a run, not only right
// after the run's run.park. A run.resume and a run.principals marked
// resume, inserted mid-segment, change the agent key mid-segment — the
// change §9.4 forbids ("a key change mid-segment" is refused only
// without a run.resume) — and so does a second run.resume after the
// first (two resumes from one park), or a run.park followed by more of
// the old key's checkpoints before its run.resume (a segment that goes on
// after it parked), or a run.park of another run. Each must be refused.
func TestRedteamParkResumeWithoutPark(t *testing.T) {
	_, agent, other := keys(t)
	third, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	body := func(m map[string]any) canon.Value {
		b, _ := json.Marshal(m)
		v, err := canon.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	principals := func(k *sign.PrivateKey, resume bool) func(*journal.Writer) {
		return func(w *journal.Writer) {
			m := map[string]any{"type": "cordon.run.principals.v1", "run": run1, "agent": k.Public().ID().String(),
				"agent_key": base64.RawURLEncoding.EncodeToString(k.Public().Bytes())}
			if resume {
				m["resume"] = true
			}
			w.Append("run.principals", body(m))
		}
	}
	checkpoint := func(k *sign.PrivateKey) func(*journal.Writer) {
		return func(w *journal.Writer) {
			h := w.Head()
			c := &Checkpoint{Run: run1, Agent: k.Public().ID(), Journal: Head{Count: h.Count, ID: h.ID},
				Grants: set(t, fullGrants).ID(), Budgets: state(t, agent).Budgets,
				Spent: Budgets{"max_turns": 0, "max_model_calls": 0, "max_input_tokens": 0, "max_output_tokens": 0, "wall_ms": 0}}
			sig := k.Sign(CheckpointPayloadType, c.JCS())
			w.Append("checkpoint", body(map[string]any{"type": "cordon.checkpoint.v1", "task": "1",
				"checkpoint": json.RawMessage(c.JCS()), "sig": base64.RawURLEncoding.EncodeToString(sig)}))
		}
	}
	resume := func(w *journal.Writer) {
		w.Append("run.resume", body(map[string]any{"type": "cordon.run.resume.v1", "run": run1, "snapshot": "x", "parked_ms": 1,
			"idle_uj": 1, "idle_provenance": "Estimator"}))
	}
	park := func(run string) func(*journal.Writer) {
		return func(w *journal.Writer) {
			w.Append("run.park", body(map[string]any{"type": "cordon.run.park.v1", "run": run}))
		}
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
	// The legitimate shape still verifies.
	if n, err := VerifyJournal(build(principals(agent, false), checkpoint(agent), park(run1), resume, principals(other, true), checkpoint(other))); err != nil || n != 2 {
		t.Fatalf("a resumed run: %d, %v", n, err)
	}
	for _, c := range []struct {
		name string
		es   []journal.Entry
	}{
		{"a resume mid-segment, no run.park", build(principals(agent, false), checkpoint(agent), resume, principals(other, true), checkpoint(other))},
		{"a second resume from one park", build(principals(agent, false), park(run1), resume, principals(other, true), checkpoint(other),
			resume, principals(third, true), checkpoint(third))},
		{"the old key signs after run.park", build(principals(agent, false), park(run1), checkpoint(agent), resume, principals(other, true), checkpoint(other))},
		{"a run.park of another run", build(principals(agent, false), park("fedcba9876543210fedcba9876543210"), resume, principals(other, true), checkpoint(other))},
	} {
		if _, err := VerifyJournal(c.es); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: VerifyJournal = %v, want ErrInvalid", c.name, err)
		}
	}
}
