package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/agent/runner"
	"github.com/cordon-dev/cordon/internal/flock"
)

// TestParkVerb: `cordon park` drops a request for the live run that may
// park, says so when one is already waiting, and refuses a live run
// whose caller cannot resume it (Live.Park false) and a workspace with no
// live run.
func TestParkVerb(t *testing.T) {
	ws := t.TempDir()
	state := filepath.Join(ws, runner.StateDir)
	os.Mkdir(state, 0o700)
	park := func() (string, error) {
		var stdout bytes.Buffer
		err := runPark(&env{stdin: strings.NewReader(""), stdout: &stdout, stderr: &stdout}, []string{ws})
		return stdout.String(), err
	}
	lock, err := os.OpenFile(filepath.Join(state, "lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if _, err := park(); err == nil || !strings.Contains(err.Error(), "no run is in progress") {
		t.Fatalf("no live run: %v", err)
	}
	if err := flock.TryLock(lock); err != nil {
		t.Fatal(err)
	}
	const run = "0123456789abcdef0123456789abcdef"
	live := func(mayPark bool) {
		b, _ := json.Marshal(runner.Live{Type: runner.LiveType, Run: run, Agent: "b3:x", Next: 1, Grants: json.RawMessage(`{}`), Park: mayPark})
		if err := os.WriteFile(filepath.Join(state, runner.LiveFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	live(false)
	if _, err := park(); err == nil || !strings.Contains(err.Error(), "cannot park") {
		t.Fatalf("a run that cannot park: %v", err)
	}
	if _, err := os.Lstat(filepath.Join(state, runner.ParkDir, run)); err == nil {
		t.Fatal("a request was dropped for a run that cannot park")
	}
	live(true)
	out, err := park()
	if err != nil || !strings.Contains(out, "asked to park at its next turn boundary") {
		t.Fatalf("%q %v", out, err)
	}
	if b, err := os.ReadFile(filepath.Join(state, runner.ParkDir, run)); err != nil || string(b) != "park\n" {
		t.Fatalf("request: %q %v", b, err)
	}
	if out, err := park(); err != nil || !strings.Contains(out, "already waiting") {
		t.Fatalf("%q %v", out, err)
	}
}
