package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Every file of evidence cordon exec writes — the receipt and its unit,
// the record and its head, the journal — is refused (exit 125, before
// the program starts) when a declared output is copied back onto it or
// onto a directory above it (red team freeze F4); beside the outputs it
// is allowed.
func TestExecRecordEvidenceUnderOutputRefused(t *testing.T) {
	requireRootFreeze(t)
	keyFile := filepath.Join(t.TempDir(), "key.pem")
	if code := run([]string{"keygen", "--out", keyFile}, nil, io.Discard, io.Discard); code != 0 {
		t.Fatal("keygen")
	}
	for _, c := range []struct {
		name string
		args func(ws string) []string
	}{
		{"record is an output", func(ws string) []string {
			return []string{"--record", filepath.Join(ws, "rec.jsonl"), "--out", "rec.jsonl"}
		}},
		{"record's head is an output", func(ws string) []string { return []string{"--record", filepath.Join(ws, "rec"), "--out", "rec.head"} }},
		{"record under an output directory", func(ws string) []string {
			return []string{"--record", filepath.Join(ws, "d", "rec"), "--out", "d"}
		}},
		{"record through a link to an output", func(ws string) []string {
			if err := os.Symlink(filepath.Join(ws, "d"), filepath.Join(ws, "l")); err != nil {
				t.Fatal(err)
			}
			return []string{"--record", filepath.Join(ws, "l", "rec"), "--out", "d"}
		}},
		{"receipt's unit is an output", func(ws string) []string {
			return []string{"--receipt", filepath.Join(ws, "r.jcr"), "--out", "r.jcr.unit.json"}
		}},
		{"journal is an output", func(ws string) []string {
			return []string{"--journal", filepath.Join(ws, "j.jsonl"), "--out", "j.jsonl", "--record", filepath.Join(t.TempDir(), "rec")}
		}},
		{"the whole workspace is an output", func(ws string) []string { return []string{"--record", filepath.Join(ws, "rec"), "--out", "."} }},
	} {
		t.Run(c.name, func(t *testing.T) {
			state, ws := t.TempDir(), t.TempDir()
			if err := os.Mkdir(filepath.Join(ws, "d"), 0o755); err != nil {
				t.Fatal(err)
			}
			args := append([]string{"exec", "--state", state, "--workspace", ws, "--key", keyFile, "--out", "ran"}, c.args(ws)...)
			var errb bytes.Buffer
			code := run(append(args, "--", "/bin/sh", "-c", "echo ran > /work/ran"), nil, io.Discard, &errb)
			if code != 125 || !strings.Contains(errb.String(), "copied back") {
				t.Errorf("exit %d, want 125 and a refusal naming the output: %s", code, errb.String())
			}
			if _, err := os.Stat(filepath.Join(ws, "ran")); err == nil {
				t.Error("the program ran: the refusal came after the start")
			}
		})
	}
	// Beside the outputs, in the same workspace: allowed.
	state, ws := t.TempDir(), t.TempDir()
	var errb bytes.Buffer
	code := run([]string{"exec", "--state", state, "--workspace", ws, "--key", keyFile, "--out", "ran", "--record", filepath.Join(ws, "rec"),
		"--", "/bin/sh", "-c", "echo ran > /work/ran"}, nil, io.Discard, &errb)
	if code != 0 {
		t.Fatalf("a record beside the outputs: exit %d: %s", code, errb.String())
	}
	if b, err := os.ReadFile(filepath.Join(ws, "ran")); err != nil || string(b) != "ran\n" {
		t.Errorf("the output: %q, %v", b, err)
	}
}
