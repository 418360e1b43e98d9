package receipt

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-dev/cordon/evidence/journal"
)

// F3 (docs/security/redteam-freeze.md), the other direction: a journal
// shared by two runs — a pooled run that claimed a slot (its command and
// pool.claim), then a cold run (a command, no claim) — and the cold run's
// receipt, re-signed by the steward to charge the earlier run's idle
// energy as its own pool-idle record. CheckPoolIdle sums the claims of
// the whole journal, so the charge of a claim the run never made passes.
func TestRedteamFreezePoolIdleOtherRunsClaim(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	w, err := journal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range []struct{ typ, body string }{
		{"command", `{"argv":["true"],"run":"a"}`},
		{"pool.claim", `{"idle_uj":5000,"idle_provenance":"Estimator"}`},
		{"command", `{"argv":["true"],"run":"b"}`}, // the cold run: no claim of its own
	} {
		if _, err := w.Append(e.typ, mustParse(t, e.body)); err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	entries, _, err := journal.Scan(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := withIdle(5000, Estimator, 0).CheckPoolIdle(entries); err == nil {
		t.Error("a cold run's receipt charging the earlier run's 5000 µJ claim passes CheckPoolIdle: the claims are not scoped to the receipt's run")
	}
}
