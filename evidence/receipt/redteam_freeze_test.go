package receipt

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/cordon-dev/cordon/evidence/journal"
)

// F3 (docs/security/redteam-freeze.md), the other direction: a journal
// shared by two runs — a pooled run that claimed a slot (its pool.claim,
// which is appended before the run's command entry, then its command and
// meter), then a cold run (a decision, a command, no claim) — and the cold run's
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
		{"pool.claim", `{"idle_uj":5000,"idle_provenance":"Estimator"}`},
		{"command", `{"argv":["true"],"run":"a"}`},
		{"meter", `{"class":"cpu"}`},
		{"decision", `{"outcome":"allow"}`},
		{"command", `{"argv":["true"],"run":"b"}`}, // the cold run: no claim of its own
		{"meter", `{"class":"cpu"}`},
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
	// The fix, both ways: the cold run's honest receipt passes, and the
	// pooled run's (the journal cut at its own last entry) is charged.
	if err := withIdle(0, "", 0).CheckPoolIdle(entries); err != nil {
		t.Errorf("the cold run's honest receipt, after a pooled run in the same journal: %v", err)
	}
	if err := withIdle(5000, Estimator, 0).CheckPoolIdle(entries[:3]); err != nil {
		t.Errorf("the pooled run's honest receipt: %v", err)
	}
	if err := withIdle(0, "", 0).CheckPoolIdle(entries[:3]); err == nil {
		t.Error("the pooled run's receipt without its charge passes CheckPoolIdle")
	}
}

// RunEntries keeps only the journal's last run: after the previous run's
// command (its meters are skipped with it) or command.unfinished entry;
// UsedClasses is scoped the same way, so a device another run of the
// journal used is not asked of this run's receipt.
func TestRunEntries(t *testing.T) {
	path := filepath.Join(t.TempDir(), "j.jsonl")
	w, err := journal.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	gpu := `{"outcome":"allow","query":{"kind":"device","class":"gpu"}}`
	for _, e := range []struct{ typ, body string }{
		{"decision", gpu},
		{"command", `{"run":"a"}`},
		{"meter", `{"class":"gpu"}`},
		{"decision", gpu},
		{"command.unfinished", `{}`},
		{"decision", `{"outcome":"allow","query":{"kind":"exec"}}`},
		{"command", `{"run":"c"}`},
		{"meter", `{"class":"cpu"}`},
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
	if got := RunEntries(entries); len(got) != 3 || got[0].Index != entries[5].Index {
		t.Errorf("RunEntries = %d entries from %d, want the last 3 (from the entry after command.unfinished)", len(got), got[0].Index)
	}
	if got := RunEntries(entries[:3]); len(got) != 3 {
		t.Errorf("RunEntries of a journal with one run = %d entries, want all 3", len(got))
	}
	if got := UsedClasses(entries); len(got) != 0 {
		t.Errorf("UsedClasses of the last run = %v, want none: the gpu was the earlier runs'", got)
	}
	if got := UsedClasses(entries[:3]); len(got) != 1 || got[0] != "gpu" {
		t.Errorf("UsedClasses of the first run = %v, want [gpu]", got)
	}
}
