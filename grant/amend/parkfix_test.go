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
)

// TestVerifyJournalAbandonedPark (F6's fix): a parked run that was
// abandoned (its record moved away) is followed by a new run — the new
// run's run.unfinished and run.start — which verifies; an entry of the
// parked run after its run.park, or a run.resume after run.unfinished,
// does not.
func TestVerifyJournalAbandonedPark(t *testing.T) {
	_, agent, other := keys(t)
	add := func(w *journal.Writer, typ string, m map[string]any) {
		b, _ := json.Marshal(m)
		v, err := canon.Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Append(typ, v); err != nil {
			t.Fatal(err)
		}
	}
	principals := func(run string, resume bool) map[string]any {
		k := agent
		if resume {
			k = other
		}
		m := map[string]any{"type": "cordon.run.principals.v1", "run": run, "agent": k.Public().ID().String(),
			"agent_key": base64.RawURLEncoding.EncodeToString(k.Public().Bytes())}
		if resume {
			m["resume"] = true
		}
		return m
	}
	const run2 = "fedcba9876543210fedcba9876543210"
	build := func(tail func(w *journal.Writer)) []journal.Entry {
		path := filepath.Join(t.TempDir(), "j.jsonl")
		w, err := journal.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		add(w, "run.start", map[string]any{"type": "cordon.run.start.v1"})
		add(w, "run.principals", principals(run1, false))
		add(w, "run.park", map[string]any{"type": "cordon.run.park.v1", "run": run1})
		tail(w)
		w.Close()
		f, _ := os.Open(path)
		defer f.Close()
		es, _, err := journal.Scan(f)
		if err != nil {
			t.Fatal(err)
		}
		return es
	}
	abandoned := build(func(w *journal.Writer) {
		add(w, "run.unfinished", map[string]any{"type": "cordon.run.unfinished.v1", "from": 0, "entries": 3})
		add(w, "run.start", map[string]any{"type": "cordon.run.start.v1"})
		add(w, "run.principals", principals(run2, false))
	})
	if _, err := VerifyJournal(abandoned); err != nil {
		t.Fatalf("an abandoned park followed by a new run: %v", err)
	}
	for name, es := range map[string][]journal.Entry{
		"an entry of the parked run after run.park": build(func(w *journal.Writer) {
			add(w, "tool.call", map[string]any{"type": "cordon.tool.call.v1"})
		}),
		"a run.resume after run.unfinished": build(func(w *journal.Writer) {
			add(w, "run.unfinished", map[string]any{"type": "cordon.run.unfinished.v1", "from": 0, "entries": 3})
			add(w, "run.resume", map[string]any{"type": "cordon.run.resume.v1", "run": run1})
			add(w, "run.principals", principals(run1, true))
		}),
	} {
		if _, err := VerifyJournal(es); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
