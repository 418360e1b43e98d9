package runner

// The run record: Verify must catch every kind of tampering with
// .cordon, a run must refuse to append to a journal that no longer holds
// what the previous result committed to, and the record holds ids of
// content, never the content (or the host's secrets).

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/agent/mailbox"
	"github.com/cordon-dev/cordon/agent/provider"
	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/evidence/journal"
	"github.com/cordon-dev/cordon/evidence/runrecord"
	"github.com/cordon-dev/cordon/evidence/sign"
)

// recordScript is a run with a read, a write, a command and a finish:
// enough journal entries to tamper with in the middle.
func recordScript() *script {
	return &script{resps: []*provider.Response{
		calls(call("read", `{"path":"in"}`)),
		calls(call("write", `{"path":"out.txt","content":"hello\n"}`), call("run", `{"argv":["python3","-V"]}`)),
		finish("done"),
	}}
}

func newKey(t *testing.T) *sign.PrivateKey {
	t.Helper()
	k, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// recordRun makes an applied run in a new workspace, signed with k
// unless k is nil, and checks that it verifies.
func recordRun(t *testing.T, k *sign.PrivateKey) string {
	t.Helper()
	ws := newWorkspace(t, defaultFiles())
	if _, err := runScript(t, ws, baseManifest(t, nil), recordScript(), runOpts{apply: true, cfg: func(c *Config) { c.Key = k }}); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, ws)
	return ws
}

func statePath(ws, name string) string { return filepath.Join(ws, StateDir, name) }

func readState(t *testing.T, ws, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(statePath(ws, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func writeState(t *testing.T, ws, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(statePath(ws, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// journalLines returns the journal's lines, each with its newline.
func journalLines(t *testing.T, ws string) [][]byte {
	t.Helper()
	b := readState(t, ws, JournalFile)
	lines := bytes.SplitAfter(b, []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	if len(lines) < 6 {
		t.Fatalf("journal of %d lines is too short to tamper with", len(lines))
	}
	return lines
}

func writeLines(t *testing.T, ws string, lines [][]byte) {
	t.Helper()
	writeState(t, ws, JournalFile, bytes.Join(lines, nil))
}

// editResult rewrites result.json in JCS form after edit.
func editResult(t *testing.T, ws string, edit func(*Result)) {
	t.Helper()
	res, err := runrecord.ParseResult(readState(t, ws, ResultFile))
	if err != nil {
		t.Fatal(err)
	}
	edit(res)
	writeState(t, ws, ResultFile, runrecord.JCS(res))
}

// editResultMembers rewrites result.json's top-level members, then
// re-canonicalizes it (canon.JCS), so only the edit differs.
func editResultMembers(t *testing.T, ws string, edit func(map[string]json.RawMessage)) {
	t.Helper()
	var m map[string]json.RawMessage
	if err := json.Unmarshal(readState(t, ws, ResultFile), &m); err != nil {
		t.Fatal(err)
	}
	edit(m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	c, err := canon.JCS(b)
	if err != nil {
		t.Fatal(err)
	}
	writeState(t, ws, ResultFile, c)
}

// forgeCheckpoint replaces the signature of the run's first checkpoint
// with one by another key over the same checkpoint, then rebuilds the
// journal's chain and the result's commitment to its head: the chain
// verifies, and only the checkpoint's signature betrays the edit.
func forgeCheckpoint(t *testing.T, ws string) {
	t.Helper()
	es, _, err := journal.Scan(bytes.NewReader(readState(t, ws, JournalFile)))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(statePath(ws, JournalFile))
	w, err := journal.Open(statePath(ws, JournalFile))
	if err != nil {
		t.Fatal(err)
	}
	forged := false
	for _, e := range es {
		body := e.Body()
		if e.Type == "checkpoint" && !forged {
			var m map[string]json.RawMessage
			if err := json.Unmarshal(body.AppendJCS(nil), &m); err != nil {
				t.Fatal(err)
			}
			other := newKey(t)
			sig := other.Sign("cordon checkpoint", []byte(m["checkpoint"]))
			m["sig"], _ = json.Marshal(base64.RawURLEncoding.EncodeToString(sig))
			b, _ := json.Marshal(m)
			if body, err = canon.Parse(b); err != nil {
				t.Fatal(err)
			}
			forged = true
		}
		if _, err := w.Append(e.Type, body); err != nil {
			t.Fatal(err)
		}
	}
	h := w.Head()
	w.Close()
	if !forged {
		t.Fatal("the run has no checkpoint to forge")
	}
	editResult(t, ws, func(r *Result) { r.Commitments.Journal.Head = h.ID.String() })
}

// Tampering of the journal.

// editEntry changes one byte of a middle entry's body; the line stays
// valid JCS.
func editEntry(t *testing.T, ws string) {
	lines := journalLines(t, ws)
	const from, to = `"task":"1"`, `"task":"9"`
	i := 1 // the first entry after run.start (and run.principals) that names the task
	for i < len(lines)-1 && !bytes.Contains(lines[i], []byte(from)) {
		i++
	}
	if !bytes.Contains(lines[i], []byte(from)) {
		t.Fatalf("no middle entry has %s", from)
	}
	lines[i] = bytes.Replace(lines[i], []byte(from), []byte(to), 1)
	if err := canon.CheckJCS(bytes.TrimSuffix(lines[i], []byte("\n"))); err != nil {
		t.Fatalf("the edited entry is not JCS: %v", err)
	}
	writeLines(t, ws, lines)
}

func deleteEntry(t *testing.T, ws string) {
	lines := journalLines(t, ws)
	writeLines(t, ws, slices.Delete(lines, 2, 3))
}

func swapEntries(t *testing.T, ws string) {
	lines := journalLines(t, ws)
	lines[2], lines[3] = lines[3], lines[2]
	writeLines(t, ws, lines)
}

// tearLast truncates the last entry halfway, as a crash mid-write would.
func tearLast(t *testing.T, ws string) {
	lines := journalLines(t, ws)
	last := lines[len(lines)-1]
	lines[len(lines)-1] = last[:len(last)/2]
	writeLines(t, ws, lines)
}

func dropLast(t *testing.T, ws string) {
	lines := journalLines(t, ws)
	writeLines(t, ws, lines[:len(lines)-1])
}

// appendValid extends the chain properly: only the committed head and
// count can catch it.
func appendValid(t *testing.T, ws string) {
	v, err := canon.Parse([]byte(`{"note":"added later"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := journal.Append(statePath(ws, JournalFile), "note", v); err != nil {
		t.Fatal(err)
	}
	if _, err := journal.Verify(bytes.NewReader(readState(t, ws, JournalFile))); err != nil {
		t.Fatalf("journal.Append left a broken chain: %v", err)
	}
}

// appendForeign writes a well-formed line whose prev is not the head.
func appendForeign(t *testing.T, ws string) {
	n := len(journalLines(t, ws))
	line := `{"body":{"note":"foreign"},"index":` + strconv.Itoa(n) + `,"prev":"` + canon.Sum([]byte("elsewhere")).String() + `","type":"note"}` + "\n"
	f, err := os.OpenFile(statePath(ws, JournalFile), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(line); err != nil {
		t.Fatal(err)
	}
}

// checkReport asserts the report has exactly the checks names, in order;
// the ones in fail failed with a Detail containing the given text, and
// every other one passed.
func checkReport(t *testing.T, rep *runrecord.Report, names []string, fail map[string]string) {
	t.Helper()
	var got []string
	for _, c := range rep.Checks {
		got = append(got, c.Name)
		want, bad := fail[c.Name]
		switch {
		case bad && c.OK:
			t.Errorf("check %s passed (%s); want it to fail with %q", c.Name, c.Detail, want)
		case bad && !strings.Contains(c.Detail, want):
			t.Errorf("check %s failed with %q; want %q in it", c.Name, c.Detail, want)
		case !bad && !c.OK:
			t.Errorf("check %s failed: %s", c.Name, c.Detail)
		}
	}
	if !slices.Equal(got, names) {
		t.Errorf("checks %q, want %q", got, names)
	}
	for name := range fail {
		if !slices.Contains(got, name) {
			t.Errorf("no check %s", name)
		}
	}
	if rep.Failed() != (len(fail) > 0) {
		t.Errorf("Failed() = %v with %d expected failures", rep.Failed(), len(fail))
	}
}

var (
	unsignedChecks = []string{"result", "manifest", "body", "journal"}
	trustedChecks  = []string{"result", "manifest", "body", "journal", "signature", "receipt", "attestation"}
	storedKeyCheck = []string{"result", "manifest", "body", "journal", "key", "signature", "receipt", "attestation"}
)

// TestVerifyCatchesTampering tampers with a finished run's record, one
// way at a time, and checks which of Verify's checks fail and that the
// others still pass: after a signed run, checked with the trusted key and
// with the workspace's steward.pub, and after an unsigned run.
func TestVerifyCatchesTampering(t *testing.T) {
	other := newKey(t)
	otherPub := other.Public()
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, ws string, k *sign.PrivateKey)
		// signed: the failures of a signed run verified with its trusted
		// key (or with steward.pub: the same failures plus a passing key
		// check); names, when set, are the checks made.
		signed      map[string]string
		signedNames []string
		// unsigned: the failures of an unsigned run; nil skips it.
		unsigned      map[string]string
		unsignedNames []string
		pub           *sign.PublicKey // verify with this key instead of the run's
	}{
		{
			name:     "journal entry edited",
			tamper:   func(t *testing.T, ws string, _ *sign.PrivateKey) { editEntry(t, ws) },
			signed:   map[string]string{"journal": "entry 3: prev", "attestation": "journal does not replay"},
			unsigned: map[string]string{"journal": "entry 2 was edited"},
		},
		{
			// The chain and the result's commitment rebuilt around a
			// checkpoint signed by another key: only the checkpoint's own
			// signature shows it (a signed run's signature and attestation
			// show it too).
			name:     "checkpoint forged, journal re-chained",
			tamper:   func(t *testing.T, ws string, _ *sign.PrivateKey) { forgeCheckpoint(t, ws) },
			signed:   map[string]string{"journal": "checkpoint", "signature": "signs other commitments", "receipt": "journal root", "attestation": "journal"},
			unsigned: map[string]string{"journal": "checkpoint"},
		},
		{
			name:     "middle entry deleted",
			tamper:   func(t *testing.T, ws string, _ *sign.PrivateKey) { deleteEntry(t, ws) },
			signed:   map[string]string{"journal": "an entry was deleted, inserted or moved", "attestation": "journal does not replay"},
			unsigned: map[string]string{"journal": "entry 2: has index 3"},
		},
		{
			name:     "entries swapped",
			tamper:   func(t *testing.T, ws string, _ *sign.PrivateKey) { swapEntries(t, ws) },
			signed:   map[string]string{"journal": "entry 2: has index 3", "attestation": "journal does not replay"},
			unsigned: map[string]string{"journal": "deleted, inserted or moved"},
		},
		{
			name:     "last entry torn",
			tamper:   func(t *testing.T, ws string, _ *sign.PrivateKey) { tearLast(t, ws) },
			signed:   map[string]string{"journal": "incomplete last line", "attestation": "journal does not replay"},
			unsigned: map[string]string{"journal": "incomplete last line"},
		},
		{
			name:     "last entry dropped",
			tamper:   func(t *testing.T, ws string, _ *sign.PrivateKey) { dropLast(t, ws) },
			signed:   map[string]string{"journal": "entries were added or removed", "attestation": "journal does not replay"},
			unsigned: map[string]string{"journal": "entries were added or removed"},
		},
		{
			name:     "valid entry appended",
			tamper:   func(t *testing.T, ws string, _ *sign.PrivateKey) { appendValid(t, ws) },
			signed:   map[string]string{"journal": "entries were added or removed", "attestation": "journal does not replay"},
			unsigned: map[string]string{"journal": "entries were added or removed"},
		},
		{
			name: "body edited",
			tamper: func(t *testing.T, ws string, _ *sign.PrivateKey) {
				editResult(t, ws, func(r *Result) { r.Body.Status = StatusVerified })
			},
			signed:   map[string]string{"body": "the body was edited"},
			unsigned: map[string]string{"body": "the body was edited"},
		},
		{
			// The commitments now match the edited body: only the signature
			// and, signed or not, the run.end entry still name the old one.
			name: "body edited and recommitted",
			tamper: func(t *testing.T, ws string, _ *sign.PrivateKey) {
				editResult(t, ws, func(r *Result) {
					r.Body.Status = StatusVerified
					r.Commitments.Body = r.Body.ID().String()
				})
			},
			signed:   map[string]string{"journal": "run.end names body", "signature": "signs other commitments"},
			unsigned: map[string]string{"journal": "run.end names body"},
		},
		{
			name: "manifest replaced",
			tamper: func(t *testing.T, ws string, _ *sign.PrivateKey) {
				writeState(t, ws, ManifestFile, baseManifest(t, func(m map[string]any) { m["task"] = "Do something else." }).JCS())
			},
			signed:   map[string]string{"manifest": "the result commits to"},
			unsigned: map[string]string{"manifest": "the result commits to"},
		},
		{
			// Another grant set: the receipt, bound to the run's grants,
			// no longer matches the manifest beside it either.
			name: "manifest replaced with other grants",
			tamper: func(t *testing.T, ws string, _ *sign.PrivateKey) {
				writeState(t, ws, ManifestFile, baseManifest(t, func(m map[string]any) {
					m["grants"].(map[string]any)["limits"] = map[string]any{"wall_ms": 1000}
				}).JCS())
			},
			signed:   map[string]string{"manifest": "the result commits to", "receipt": "the receipt's grants"},
			unsigned: map[string]string{"manifest": "the result commits to"},
		},
		{
			name: "result not canonical",
			tamper: func(t *testing.T, ws string, _ *sign.PrivateKey) {
				b := readState(t, ws, ResultFile)
				writeState(t, ws, ResultFile, append([]byte("{ "), b[1:]...))
			},
			signed: map[string]string{"result": "not in canonical (JCS) form"}, signedNames: []string{"result"},
			unsigned: map[string]string{"result": "not in canonical (JCS) form"}, unsignedNames: []string{"result"},
		},
		{
			name: "unknown member in result",
			tamper: func(t *testing.T, ws string, _ *sign.PrivateKey) {
				editResultMembers(t, ws, func(m map[string]json.RawMessage) { m["trusted"] = json.RawMessage(`true`) })
			},
			signed: map[string]string{"result": `unknown field "trusted"`}, signedNames: []string{"result"},
			unsigned: map[string]string{"result": `unknown field "trusted"`}, unsignedNames: []string{"result"},
		},
		{
			name: "result through a symbolic link",
			tamper: func(t *testing.T, ws string, _ *sign.PrivateKey) {
				cp := filepath.Join(t.TempDir(), ResultFile)
				if err := os.WriteFile(cp, readState(t, ws, ResultFile), 0o644); err != nil {
					t.Fatal(err)
				}
				os.Remove(statePath(ws, ResultFile))
				if err := os.Symlink(cp, statePath(ws, ResultFile)); err != nil {
					t.Fatal(err)
				}
			},
			signed: map[string]string{"result": "symbolic link"}, signedNames: []string{"result"},
			unsigned: map[string]string{"result": "symbolic link"}, unsignedNames: []string{"result"},
		},
		{
			// With a trusted key, a result stripped of its signature fails.
			name: "signature removed",
			tamper: func(t *testing.T, ws string, _ *sign.PrivateKey) {
				editResultMembers(t, ws, func(m map[string]json.RawMessage) { delete(m, "signature") })
			},
			signed: map[string]string{"signature": "not signed"}, signedNames: []string{"result", "manifest", "body", "journal", "signature"},
		},
		{
			// A key other than the signer's: the signature and receipt fail
			// and, with no verified receipt, the attestation is not checked.
			name:   "wrong trusted key",
			tamper: func(*testing.T, string, *sign.PrivateKey) {},
			pub:    &otherPub,
			signed: map[string]string{"signature": "signature does not verify", "receipt": "signature does not verify"}, signedNames: []string{"result", "manifest", "body", "journal", "signature", "receipt"},
		},
		{
			name: "receipt of another run",
			tamper: func(t *testing.T, ws string, k *sign.PrivateKey) {
				otherWS := recordRun(t, k)
				writeState(t, ws, ReceiptFile, readState(t, otherWS, ReceiptFile))
			},
			signed: map[string]string{"receipt": "the receipt's journal root", "attestation": "does not match the receipt"},
		},
		{
			name:   "attestation deleted",
			tamper: func(t *testing.T, ws string, _ *sign.PrivateKey) { os.Remove(statePath(ws, AttestationFile)) },
			signed: map[string]string{"attestation": "no such file"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Run("signed, trusted key", func(t *testing.T) {
				k := newKey(t)
				ws := recordRun(t, k)
				tc.tamper(t, ws, k)
				pub := k.Public()
				if tc.pub != nil {
					pub = *tc.pub
				}
				rep := runrecord.Verify(ws, &pub)
				names := trustedChecks
				if tc.signedNames != nil {
					names = tc.signedNames
				}
				checkReport(t, rep, names, tc.signed)
				// Trusted says the signature was checked against the key; a
				// result without one is not.
				if signed := slices.Contains(names, "receipt"); rep.Trusted != signed {
					t.Errorf("Trusted = %v; want %v", rep.Trusted, signed)
				}
			})
			if tc.pub == nil && tc.name != "signature removed" {
				t.Run("signed, stored key", func(t *testing.T) {
					k := newKey(t)
					ws := recordRun(t, k)
					tc.tamper(t, ws, k)
					rep := runrecord.Verify(ws, nil)
					names := storedKeyCheck
					if tc.signedNames != nil {
						names = tc.signedNames
					}
					checkReport(t, rep, names, tc.signed)
					if rep.Trusted {
						t.Error("a report checked against steward.pub is Trusted")
					}
				})
			}
			if tc.unsigned != nil {
				t.Run("unsigned", func(t *testing.T) {
					ws := recordRun(t, nil)
					tc.tamper(t, ws, nil)
					names := unsignedChecks
					if tc.unsignedNames != nil {
						names = tc.unsignedNames
					}
					checkReport(t, runrecord.Verify(ws, nil), names, tc.unsigned)
				})
			}
		})
	}
	t.Run("unsigned result with a trusted key", func(t *testing.T) {
		ws := recordRun(t, nil)
		pub := newKey(t).Public()
		checkReport(t, runrecord.Verify(ws, &pub), append(slices.Clone(unsignedChecks), "signature"), map[string]string{"signature": "not signed, and a trusted key was given"})
	})
	t.Run("unsigned run leaves no signed evidence", func(t *testing.T) {
		// A signed run, then an unsigned one in the same workspace: the
		// first run's receipt must not sit beside the second's result.
		k := newKey(t)
		ws := recordRun(t, k)
		if _, err := runScript(t, ws, baseManifest(t, nil), recordScript(), runOpts{apply: true}); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{ReceiptFile, AttestationFile, PubkeyFile} {
			if _, err := os.Lstat(statePath(ws, f)); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("%s is still there after an unsigned run: %v", f, err)
			}
		}
		checkReport(t, runrecord.Verify(ws, nil), unsignedChecks, nil)
	})
}

// TestVerifyCleanSignedRun: a signed run verifies against the trusted
// key (Trusted) and, without one, against steward.pub (not Trusted).
func TestVerifyCleanSignedRun(t *testing.T) {
	k := newKey(t)
	ws := recordRun(t, k)
	pub := k.Public()
	rep := runrecord.Verify(ws, &pub)
	checkReport(t, rep, trustedChecks, nil)
	if !rep.Trusted || rep.Result == nil || rep.Result.Signature == nil {
		t.Fatalf("trusted %v, result %+v", rep.Trusted, rep.Result)
	}
	for _, c := range rep.Checks {
		if c.Name == "signature" && !strings.Contains(c.Detail, pub.ID().String()) {
			t.Errorf("the signature check does not name the key: %q", c.Detail)
		}
	}
	rep = runrecord.Verify(ws, nil)
	checkReport(t, rep, storedKeyCheck, nil)
	if rep.Trusted {
		t.Fatal("checked against steward.pub, the report says Trusted")
	}
	for _, c := range rep.Checks {
		if c.Name == "key" && !strings.Contains(c.Detail, "not a trusted key") {
			t.Errorf("the key check does not say the key is untrusted: %q", c.Detail)
		}
	}
	// The record holds what the run did.
	body := rep.Result.Body
	if body.Status != StatusFinished || len(body.Writes) != 1 || !body.Writes[0].Applied || len(body.Runs) != 1 || !body.Runs[0].Applied {
		t.Fatalf("body %+v", body)
	}
	if got, want := rep.Result.Commitments.Journal.Count, int64(len(entries(t, ws))); got != want {
		t.Fatalf("the result commits to %d entries; the journal has %d", got, want)
	}
}

// TestTamperedJournalRefusesNextRun: after a journal is tampered with,
// the next run refuses to start, names the journal, and leaves it byte
// for byte as it was.
func TestTamperedJournalRefusesNextRun(t *testing.T) {
	for _, tc := range []struct {
		name   string
		tamper func(t *testing.T, ws string)
		keep   bool // keep result.json; otherwise it is deleted first
	}{
		{"entry edited", editEntry, true},
		{"last entry torn", tearLast, true},
		{"last entry dropped", dropLast, true},
		{"foreign entry appended", appendForeign, true},
		{"middle entry deleted", deleteEntry, true},
		{"entries swapped", swapEntries, true},
		// Without result.json, the chain itself still refuses.
		{"entry edited, result deleted", editEntry, false},
		{"foreign entry appended, result deleted", appendForeign, false},
		{"entries swapped, result deleted", swapEntries, false},
		{"last entry torn, result deleted", tearLast, false},
	} {
		for _, signed := range []bool{false, true} {
			name := tc.name
			if signed {
				name += ", signed"
			}
			t.Run(name, func(t *testing.T) {
				var k *sign.PrivateKey
				if signed {
					k = newKey(t)
				}
				ws := recordRun(t, k)
				if !tc.keep {
					if err := os.Remove(statePath(ws, ResultFile)); err != nil {
						t.Fatal(err)
					}
				}
				tc.tamper(t, ws)
				before := readState(t, ws, JournalFile)
				s := recordScript()
				out, err := runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true, cfg: func(c *Config) { c.Key = k }})
				if err == nil {
					t.Fatalf("the run started on a tampered journal: %+v", out)
				}
				// With result.json, its committed head refuses the journal;
				// without, the chain does when the journal is opened.
				// A signed run refuses any journal without a result.
				want := "the journal no longer holds what the previous result committed to"
				switch {
				case !tc.keep && signed:
					want = "there is no " + ResultFile + " to check them against"
				case !tc.keep:
					want = JournalFile + ": refusing to append"
				}
				if !strings.Contains(err.Error(), want) {
					t.Errorf("err %q does not say %q", err, want)
				}
				if after := readState(t, ws, JournalFile); !bytes.Equal(before, after) {
					t.Errorf("the refused run changed the journal:\nbefore %q\nafter  %q", before, after)
				}
				if n := len(s.requests()); n != 0 {
					t.Errorf("the refused run called the model %d times", n)
				}
			})
		}
	}
	t.Run("untampered journal is appended to", func(t *testing.T) {
		k := newKey(t)
		ws := recordRun(t, k)
		first := readState(t, ws, JournalFile)
		n := len(entries(t, ws))
		if _, err := runScript(t, ws, baseManifest(t, nil), recordScript(), runOpts{apply: true, cfg: func(c *Config) { c.Key = k }}); err != nil {
			t.Fatal(err)
		}
		if after := readState(t, ws, JournalFile); !bytes.HasPrefix(after, first) {
			t.Fatal("the second run rewrote the first run's entries")
		}
		es := entries(t, ws)
		if len(es) <= n || es[n].Type != "run.start" {
			t.Fatalf("journal has %d entries after %d; entry %d is not the second run.start", len(es), n, n)
		}
		pub := k.Public()
		rep := runrecord.Verify(ws, &pub)
		checkReport(t, rep, trustedChecks, nil)
		if rep.Result.Commitments.Journal.Count != int64(len(es)) {
			t.Fatalf("the result commits to %d entries, the journal has %d", rep.Result.Commitments.Journal.Count, len(es))
		}
	})
}

// TestPreviousSignatureUnderRunKey: a signed run refuses to append after
// a result whose signature does not verify under its key.
func TestPreviousSignatureUnderRunKey(t *testing.T) {
	t.Run("signed by another key", func(t *testing.T) {
		ws := recordRun(t, newKey(t))
		before := readState(t, ws, JournalFile)
		_, err := runScript(t, ws, baseManifest(t, nil), recordScript(), runOpts{apply: true, cfg: func(c *Config) { c.Key = newKey(t) }})
		if err == nil || !strings.Contains(err.Error(), ResultFile) || !strings.Contains(err.Error(), "signature") {
			t.Fatalf("err %v, want a refusal naming %s's signature", err, ResultFile)
		}
		if !bytes.Equal(before, readState(t, ws, JournalFile)) {
			t.Fatal("the refused run changed the journal")
		}
	})
	t.Run("signature over other commitments", func(t *testing.T) {
		k := newKey(t)
		ws := recordRun(t, k)
		// A signature by the right key, over another run's commitments.
		other, err := runrecord.ParseResult(readState(t, recordRun(t, k), ResultFile))
		if err != nil {
			t.Fatal(err)
		}
		editResult(t, ws, func(r *Result) { r.Signature = other.Signature })
		_, err = runScript(t, ws, baseManifest(t, nil), recordScript(), runOpts{apply: true, cfg: func(c *Config) { c.Key = k }})
		if err == nil || !strings.Contains(err.Error(), "signs other commitments") {
			t.Fatalf("err %v", err)
		}
	})
	t.Run("same key appends", func(t *testing.T) {
		k := newKey(t)
		ws := recordRun(t, k)
		if _, err := runScript(t, ws, baseManifest(t, nil), recordScript(), runOpts{apply: true, cfg: func(c *Config) { c.Key = k }}); err != nil {
			t.Fatal(err)
		}
		pub := k.Public()
		checkReport(t, runrecord.Verify(ws, &pub), trustedChecks, nil)
	})
}

// TestDryRunRecord: without Apply, writes and commands are planned and
// recorded as effects, nothing touches the workspace or the sandbox, and
// later reads see the planned content.
func TestDryRunRecord(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	m := baseManifest(t, func(m map[string]any) { m["inputs"] = []string{"in", "src", "out.txt"} })
	s := &script{resps: []*provider.Response{
		calls(call("write", `{"path":"out.txt","content":"planned out\n"}`), call("write", `{"path":"src/a.py","content":"print(2)\n"}`)),
		calls(call("read", `{"path":"out.txt"}`), call("read", `{"path":"src/a.py"}`), call("run", `{"argv":["python3","src/a.py"]}`)),
		finish("planned"),
	}}
	sb := okSandbox()
	out, err := runScript(t, ws, m, s, runOpts{apply: false, sb: sb})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusFinished {
		t.Fatalf("status %s", out.Status)
	}
	if _, err := os.Lstat(filepath.Join(ws, "out.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a dry run created out.txt: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "src/a.py")); string(b) != "print(1)\n" {
		t.Fatalf("a dry run changed src/a.py: %q", b)
	}
	if len(sb.specs) != 0 {
		t.Fatalf("a dry run ran %v", sb.specs[0].Argv)
	}
	res := toolResults(s)
	if len(res) != 5 {
		t.Fatalf("tool results %+v", res)
	}
	for i, want := range []string{"planned (dry run): out.txt", "planned (dry run): src/a.py", "planned out\n", "print(2)\n", "planned (dry run): not executed"} {
		if res[i].IsError || !strings.HasPrefix(res[i].Text, want) {
			t.Errorf("result %d %q, want it to begin %q", i, res[i].Text, want)
		}
	}
	rep := mustVerify(t, ws)
	body := rep.Result.Body
	if body.Apply || len(body.Writes) != 2 || len(body.Runs) != 1 {
		t.Fatalf("body %+v", body)
	}
	for _, w := range body.Writes {
		if w.Applied {
			t.Errorf("write %+v is applied in a dry run", w)
		}
	}
	if w := body.Writes[0]; w.Path != "out.txt" || w.Content != canon.Sum([]byte("planned out\n")).String() || w.Bytes != 12 {
		t.Errorf("write %+v", w)
	}
	if r := body.Runs[0]; r.Applied || strings.Join(r.Argv, " ") != "python3 src/a.py" {
		t.Errorf("run %+v", r)
	}
	es := entries(t, ws)
	effects := ofType(es, "effect")
	if len(effects) != 3 || !strings.Contains(effects[0], `"kind":"write"`) || !strings.Contains(effects[2], `"kind":"run"`) {
		t.Fatalf("effects %q", effects)
	}
	for _, e := range effects {
		if !strings.Contains(e, `"applied":false`) {
			t.Errorf("effect %s is not marked planned", e)
		}
	}
	if c := ofType(es, "command"); len(c) != 0 {
		t.Fatalf("a dry run journalled commands %q", c)
	}
	if start := ofType(es, "run.start"); len(start) != 1 || !strings.Contains(start[0], `"apply":false`) {
		t.Fatalf("run.start %q", start)
	}
	for _, e := range es {
		if bytes.Contains(e.Line(), []byte("planned out")) {
			t.Errorf("the journal holds written content: %s", e.Line())
		}
	}
}

// TestNoSandboxHost: on a host without the sandbox, an applied run call
// is refused with the probe's reason and nothing runs; the other tools
// still work and the record verifies.
func TestNoSandboxHost(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	sb := &fakeSandbox{offers: nil, probe: errors.New("landlock: not supported")}
	s := &script{resps: []*provider.Response{
		calls(call("run", `{"argv":["python3","-V"]}`)),
		calls(call("read", `{"path":"in"}`), call("write", `{"path":"out.txt","content":"written\n"}`), call("mailbox", `{"action":"post","text":"hi"}`)),
		finish("done without commands"),
	}}
	k := newKey(t)
	out, err := runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true, sb: sb, cfg: func(c *Config) { c.Key = k }})
	if err != nil {
		t.Fatal(err)
	}
	if out.Status != StatusFinished {
		t.Fatalf("status %s", out.Status)
	}
	if len(sb.specs) != 0 {
		t.Fatalf("ran %v without the sandbox", sb.specs[0].Argv)
	}
	res := toolResults(s)
	if len(res) != 4 {
		t.Fatalf("tool results %+v", res)
	}
	if !res[0].IsError || !strings.Contains(res[0].Text, "sandbox") || !strings.Contains(res[0].Text, "landlock: not supported") || !strings.Contains(res[0].Text, "nothing was run") {
		t.Fatalf("run result %q", res[0].Text)
	}
	if r := refusals(t, ws); len(r) != 1 || !strings.Contains(r[0], "landlock: not supported") {
		t.Fatalf("refusals %q", r)
	}
	// The refused command has its outcome entry, naming the refusal and
	// no exit status: nothing ran.
	if c := ofType(entries(t, ws), "command"); len(c) != 1 || !strings.Contains(c[0], `"error":"session: the host cannot provide the required tier`) ||
		!strings.Contains(c[0], "landlock: not supported") || strings.Contains(c[0], `"exit"`) {
		t.Fatalf("commands journalled: %q", c)
	}
	for i, want := range []string{"the input\n", "wrote out.txt", "posted #1"} {
		if r := res[i+1]; r.IsError || !strings.HasPrefix(r.Text, want) {
			t.Errorf("result %d %q, want %q", i+1, r.Text, want)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != "written\n" {
		t.Fatalf("out.txt %q", b)
	}
	msgs, err := mailbox.List(ws, mailbox.FromAgent)
	if err != nil || len(msgs) != 1 || msgs[0].Text != "hi" {
		t.Fatalf("agent mailbox %+v, %v", msgs, err)
	}
	pub := k.Public()
	rep := runrecord.Verify(ws, &pub)
	checkReport(t, rep, trustedChecks, nil)
	if b := rep.Result.Body; len(b.Runs) != 0 || b.Refused != 1 || len(b.Writes) != 1 || !b.Writes[0].Applied {
		t.Fatalf("body %+v", b)
	}
}

// TestMailboxAcrossRuns: the model posts in one run, the operator
// replies between runs, and the next run reads the reply exactly once.
func TestMailboxAcrossRuns(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	m := baseManifest(t, nil)
	s1 := &script{resps: []*provider.Response{
		calls(call("mailbox", `{"action":"post","text":"Which version?"}`), call("mailbox", `{"action":"read"}`)),
		finish("asked"),
	}}
	if _, err := runScript(t, ws, m, s1, runOpts{apply: true}); err != nil {
		t.Fatal(err)
	}
	if res := toolResults(s1); len(res) != 2 || res[0].Text != "posted #1" || res[1].Text != "no new replies" {
		t.Fatalf("first run results %+v", res)
	}
	if _, err := mailbox.Post(ws, mailbox.FromOperator, "Use 3.12.", time.Now()); err != nil {
		t.Fatal(err)
	}
	n := len(entries(t, ws))
	s2 := &script{resps: []*provider.Response{
		calls(call("mailbox", `{"action":"read"}`)),
		calls(call("mailbox", `{"action":"read"}`)),
		finish("read"),
	}}
	if _, err := runScript(t, ws, m, s2, runOpts{apply: true}); err != nil {
		t.Fatal(err)
	}
	res := toolResults(s2)
	if len(res) != 2 {
		t.Fatalf("second run results %+v", res)
	}
	if res[0].IsError || !strings.HasPrefix(res[0].Text, "#1 ") || !strings.Contains(res[0].Text, "\nUse 3.12.\n") {
		t.Fatalf("first read %q", res[0].Text)
	}
	if res[1].IsError || res[1].Text != "no new replies" {
		t.Fatalf("second read %q", res[1].Text)
	}
	reads := ofType(entries(t, ws)[n:], "mailbox")
	if len(reads) != 2 || !strings.Contains(reads[0], `"seqs":[1]`) || !strings.Contains(reads[1], `"seqs":[]`) {
		t.Fatalf("mailbox entries %q", reads)
	}
	for _, e := range entries(t, ws) {
		if bytes.Contains(e.Line(), []byte("Which version")) || bytes.Contains(e.Line(), []byte("Use 3.12")) {
			t.Errorf("the journal holds message text: %s", e.Line())
		}
	}
	msgs, err := mailbox.List(ws, mailbox.FromAgent)
	if err != nil || len(msgs) != 1 || msgs[0].Text != "Which version?" {
		t.Fatalf("agent mailbox %+v, %v", msgs, err)
	}
	mustVerify(t, ws)
}

// TestAPIKeyNotRecorded: the provider's API key in the environment never
// reaches the record, the sandbox or the prompt; what the model writes is
// journalled by id, and lands only in the output it wrote.
func TestAPIKeyNotRecorded(t *testing.T) {
	const secret = "sk-test-SECRET-123"
	t.Setenv("ANTHROPIC_API_KEY", secret)
	ws := newWorkspace(t, defaultFiles())
	content := "key=" + secret + "\n"
	s := &script{resps: []*provider.Response{
		{Content: []provider.Block{{Type: "text", Text: "I will write the key " + secret + " to out.txt."},
			call("write", mustJSON(map[string]string{"path": "out.txt", "content": content})),
			call("run", `{"argv":["printenv","ANTHROPIC_API_KEY"]}`)},
			StopReason: "tool_use", Usage: provider.Usage{InputTokens: 10, OutputTokens: 5, Reported: true}, Attempts: 1},
		finish("wrote the output"),
	}}
	sb := okSandbox()
	k := newKey(t)
	if _, err := runScript(t, ws, baseManifest(t, nil), s, runOpts{apply: true, sb: sb, cfg: func(c *Config) { c.Key = k }}); err != nil {
		t.Fatal(err)
	}
	pub := k.Public()
	checkReport(t, runrecord.Verify(ws, &pub), trustedChecks, nil)

	// The model wrote the key as content: it is in out.txt, and only there.
	if b, _ := os.ReadFile(filepath.Join(ws, "out.txt")); string(b) != content {
		t.Fatalf("out.txt %q", b)
	}
	err := filepath.WalkDir(ws, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() || p == filepath.Join(ws, "out.txt") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("%s holds the API key", p)
		}
		if bytes.Contains(b, []byte("key=")) {
			t.Errorf("%s holds the written content", p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The journal and the result name the content by its id.
	id := canon.Sum([]byte(content)).String()
	if !bytes.Contains(readState(t, ws, JournalFile), []byte(id)) {
		t.Error("the journal does not name the written content's id")
	}
	if !bytes.Contains(readState(t, ws, ResultFile), []byte(id)) {
		t.Error("result.json does not name the written content's id")
	}
	// The command got no environment, and nothing the runner sent the
	// model holds the key.
	if len(sb.specs) != 1 || sb.specs[0].Env != nil {
		t.Fatalf("specs %+v", sb.specs)
	}
	for _, req := range s.requests() {
		if strings.Contains(req.System, secret) {
			t.Error("the system prompt holds the API key")
		}
		for _, msg := range req.Messages {
			if msg.Role == "assistant" {
				continue // the model's own words
			}
			for _, b := range msg.Content {
				if strings.Contains(b.Text, secret) || strings.Contains(string(b.Input), secret) {
					t.Errorf("a %s message holds the API key: %q", msg.Role, b.Text)
				}
			}
		}
	}
}

// TestFIFOInStateDirDoesNotHang: a FIFO planted where a state file should
// be is refused at once by Verify and by the next run, never opened in a
// way that blocks.
func TestFIFOInStateDirDoesNotHang(t *testing.T) {
	for _, name := range []string{ResultFile, JournalFile, ManifestFile, lockFile} {
		t.Run(name, func(t *testing.T) {
			ws := newWorkspace(t, defaultFiles())
			if _, err := runScript(t, ws, baseManifest(t, nil), &script{resps: []*provider.Response{finish("x")}}, runOpts{}); err != nil {
				t.Fatal(err)
			}
			p := filepath.Join(ws, StateDir, name)
			os.Remove(p)
			if err := syscall.Mkfifo(p, 0o600); err != nil {
				t.Fatal(err)
			}
			done := make(chan string, 2)
			go func() {
				rep := runrecord.Verify(ws, nil)
				done <- fmt.Sprintf("verify failed=%v", rep.Failed())
			}()
			go func() {
				_, err := runScript(t, ws, baseManifest(t, nil), &script{resps: []*provider.Response{finish("x")}}, runOpts{})
				done <- fmt.Sprintf("run err=%v", err)
			}()
			for range 2 {
				select {
				case got := <-done:
					if name != lockFile && !strings.Contains(got, "failed=true") && !strings.Contains(got, "err=runner") {
						t.Errorf("%s: %s", name, got)
					}
					if name == lockFile && strings.HasPrefix(got, "run") && !strings.Contains(got, "not a regular file") {
						t.Errorf("%s: %s", name, got)
					}
				case <-time.After(10 * time.Second):
					t.Fatalf("a FIFO at %s blocked Verify or Run", name)
				}
			}
		})
	}
}

// TestStrippedSignatureDetected: removing the signature from a signed
// result leaves the receipt beside an unsigned result, which fails.
func TestStrippedSignatureDetected(t *testing.T) {
	ws := newWorkspace(t, defaultFiles())
	k, _ := sign.Generate()
	if _, err := runScript(t, ws, baseManifest(t, nil), &script{resps: []*provider.Response{finish("x")}}, runOpts{cfg: func(c *Config) { c.Key = k }}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(ws, StateDir, ResultFile)
	b, _ := os.ReadFile(p)
	var res Result
	json.Unmarshal(b, &res)
	res.Signature = nil
	os.WriteFile(p, runrecord.JCS(res), 0o644)
	rep := runrecord.Verify(ws, nil)
	if !rep.Failed() || !strings.Contains(fmt.Sprint(rep.Checks), "was the signature removed") {
		t.Fatalf("checks %+v", rep.Checks)
	}
}
