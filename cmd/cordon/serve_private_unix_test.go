//go:build unix

package main

import (
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// openServe opens what `cordon serve` would with args.
func openServe(t *testing.T, args ...string) error {
	t.Helper()
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	sf := addServeFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	_, _, release, err := sf.open(t.Context(), &env{stdout: io.Discard, stderr: io.Discard}, "serve")
	if err == nil {
		release()
	}
	return err
}

func wantRefused(t *testing.T, err error, name, fix string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s accepted", name)
	}
	msg := err.Error()
	var h *hintError
	if errors.As(err, &h) {
		msg += " (" + h.hint + ")"
	}
	if !strings.Contains(msg, name) || !strings.Contains(msg, fix) {
		t.Errorf("refusal %q does not name %s and the fix %q", msg, name, fix)
	}
}

// Finding 5: the state directory and the key files must be the
// process's own and not writable by others; control.db is 0600.
func TestServeStatePrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	if err := openServe(t, "--state", dir); err != nil {
		t.Fatal(err)
	}
	for _, sfx := range []string{"", "-wal", "-shm"} {
		st, err := os.Stat(filepath.Join(dir, "control.db"+sfx))
		if err != nil {
			if sfx == "" {
				t.Fatal(err)
			}
			continue
		}
		if m := st.Mode().Perm(); m != 0o600 {
			t.Errorf("control.db%s mode %04o, want 0600", sfx, m)
		}
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, openServe(t, "--state", dir), dir, "chmod go-w")
	os.Chmod(dir, 0o700)
	admin := filepath.Join(dir, "admin.key")
	os.Chmod(admin, 0o620)
	wantRefused(t, openServe(t, "--state", dir), admin, "chmod go-w")
	os.Chmod(admin, 0o600)
	steward := filepath.Join(dir, "steward.key")
	os.Chmod(steward, 0o606)
	wantRefused(t, openServe(t, "--state", dir), steward, "chmod go-w")
	os.Chmod(steward, 0o600)
	if err := openServe(t, "--state", dir); err != nil {
		t.Fatal(err)
	}
}

// Finding 5: a state directory or admin key another user owns is
// refused (the red team planted an admin key in a foreign state dir).
func TestServeStateForeignOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("needs root: chown to another uid (uid %d)", os.Geteuid())
	}
	dir := filepath.Join(t.TempDir(), "state")
	if err := openServe(t, "--state", dir); err != nil {
		t.Fatal(err)
	}
	admin := filepath.Join(dir, "admin.key")
	if err := os.Chown(admin, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, openServe(t, "--state", dir), admin, "chown 0")
	os.Chown(admin, 0, 0)
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	wantRefused(t, openServe(t, "--state", dir), dir, "chown 0")
}

// Finding 6: a second server on one state directory is refused while the
// first holds it (the second's recovery would fail the first's running
// runs), and admitted once the first is gone.
func TestServeStateLocked(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	sf := addServeFlags(fs)
	if err := fs.Parse([]string{"--state", dir}); err != nil {
		t.Fatal(err)
	}
	_, _, release, err := sf.open(t.Context(), &env{stdout: io.Discard, stderr: io.Discard}, "serve")
	if err != nil {
		t.Fatal(err)
	}
	wantRefused(t, openServe(t, "--state", dir), dir, "its own --state")
	release()
	if err := openServe(t, "--state", dir); err != nil {
		t.Fatalf("after the first server released the state directory: %v", err)
	}
}

// Finding 10: the worker id tenants see in run views names neither the
// host nor the process.
func TestWorkerIDOpaque(t *testing.T) {
	id := workerID("build-host-7.internal", 4242)
	if strings.Contains(id, "build-host") || strings.Contains(id, "4242") || !strings.HasPrefix(id, "wrk_") {
		t.Errorf("worker id %q shows the host or pid", id)
	}
	if id == workerID("build-host-7.internal", 4243) {
		t.Errorf("two processes share worker id %q", id)
	}
}
