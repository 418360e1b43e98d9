package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/sandbox/pool"
)

// waitReady waits until the resident pool in state has a ready slot.
func waitReady(t *testing.T, state string) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		var out bytes.Buffer
		if run([]string{"pool", "status", "--state", state}, nil, &out, &bytes.Buffer{}) == 0 {
			var st pool.Status
			if json.Unmarshal(out.Bytes(), &st) == nil && st.Ready >= 1 {
				return
			}
		}
	}
	t.Fatal("the pool has no ready slot")
}

// F3 (docs/security/redteam-freeze.md): 'cordon exec --journal' appends
// to an existing journal, so one journal holds several runs, but
// receipt.CheckPoolIdle sums every pool.claim of the whole journal, not
// the run's own. An honest receipt of a run that follows a pooled run in
// the same journal fails 'cordon verify receipt --journal' — a cold run
// (no pool-idle record, the journal has a claim) and a second pooled
// run (its own charge, the journal sums both) alike — while a receipt
// re-signed to carry the other run's charge as well passes.
func TestRedteamFreezePoolIdleSharedJournal(t *testing.T) {
	state := t.TempDir()
	startPool(t, state)
	dir := t.TempDir()
	keyFile, pubFile := filepath.Join(dir, "key.pem"), filepath.Join(dir, "pub.pem")
	if code := run([]string{"keygen", "--out", keyFile}, nil, io.Discard, io.Discard); code != 0 {
		t.Fatal("keygen")
	}
	var pub bytes.Buffer
	if code := run([]string{"pubkey", keyFile}, nil, &pub, io.Discard); code != 0 {
		t.Fatal("pubkey")
	}
	if err := os.WriteFile(pubFile, pub.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	jf := filepath.Join(dir, "j.jsonl")
	exec := func(name string, pooled bool) string {
		t.Helper()
		rf := filepath.Join(dir, name+".jcr")
		args := []string{"exec", "--state", state, "--journal", jf, "--receipt", rf, "--key", keyFile}
		if pooled {
			waitReady(t, state)
			args = append(args, "--pool")
		}
		var errb bytes.Buffer
		if code := run(append(args, "--", "true"), nil, io.Discard, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", name, code, errb.String())
		}
		return rf
	}
	verify := func(file string) (int, string) {
		var out, errb bytes.Buffer
		code := run([]string{"verify", "receipt", "--pubkey", pubFile, "--journal", jf, file}, nil, &out, &errb)
		return code, out.String() + errb.String()
	}
	exec("a", true) // a pooled run: the journal's first pool.claim
	cold := exec("b", false)
	if code, out := verify(cold); code != 0 {
		t.Errorf("the honest receipt of a cold run appended to a journal that already held a pooled run fails verify --journal (exit %d): %s", code, out)
	}
	warm := exec("c", true)
	if code, out := verify(warm); code != 0 {
		t.Errorf("the honest receipt of the second pooled run in one journal fails verify --journal (exit %d): %s", code, out)
	}
}

// F4 (docs/security/redteam-freeze.md): a --record FILE inside the
// workspace, and an --out naming the same path: the program's output is
// copied back over the record while cordon still writes the record
// through its own descriptor (now of an unlinked file), the head is
// signed for the real chain, and cordon exec exits 0. The file left at
// FILE is the program's: an unanchored 'cordon verify record' trusts
// whatever chain the program wrote, and the real record is gone. A
// --receipt in the same place is refused (file exists, exit 125); the
// record is neither refused up front nor at the end.
func TestRedteamFreezeRecordOverwrittenByOutput(t *testing.T) {
	requireRootFreeze(t)
	state, ws := t.TempDir(), t.TempDir()
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	if code := run([]string{"keygen", "--out", keyFile}, nil, io.Discard, io.Discard); code != 0 {
		t.Fatal("keygen")
	}
	rec := filepath.Join(ws, "rec.jsonl")
	var errb bytes.Buffer
	code := run([]string{"exec", "--state", state, "--workspace", ws, "--out", "rec.jsonl", "--record", rec, "--key", keyFile,
		"--", "/bin/sh", "-c", "echo forged > /work/rec.jsonl"}, nil, io.Discard, &errb)
	if code != 0 {
		return // refused: held
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if string(b) == "forged\n" {
		t.Errorf("cordon exec --record %s --out rec.jsonl exited 0 and left the program's output %q as the record (signed head beside it for another chain)", rec, b)
	}
}
