package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// digestOf is the outputs digest of dir, as a frozen run's /work would be
// digested (Sandbox.outputsDigest), with outputs declared as given.
func digestOf(t *testing.T, dir string, outputs ...string) string {
	t.Helper()
	w, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sb := &Sandbox{runID: "redteam", work: w, spec: &Spec{Outputs: outputs}}
	d, err := sb.outputsDigest()
	if err != nil {
		t.Fatal(err)
	}
	return d.String()
}

// F1 (docs/security/redteam-freeze.md): the outputs digest records a
// file's bytes but not its mode, so an output made executable (or
// setgid, or world-writable) while the run is frozen thaws as if nothing
// had changed. A directory's mode is not recorded either.
func TestRedteamFreezeDigestIgnoresMode(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out")
	if err := os.MkdirAll(filepath.Join(out, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(out, "run.sh")
	if err := os.WriteFile(script, []byte("#!/bin/sh\necho hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	atFreeze := digestOf(t, dir, "out")
	// While frozen, someone outside flips the modes.
	if err := os.Chmod(script, 0o4777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(out, "sub"), 0o777); err != nil {
		t.Fatal(err)
	}
	if atThaw := digestOf(t, dir, "out"); atThaw == atFreeze {
		t.Errorf("outputs digest %s before and after chmod 4777 of out/run.sh and 0777 of out/sub: "+
			"a mode change while frozen is not seen, and the thaw is allowed", atFreeze)
	}
}

// F2 (docs/security/redteam-freeze.md): the outputs digest reads every
// byte of every regular file, with no bound on bytes (only on entries).
// A program can leave, within its RLIMIT_FSIZE (256 MiB by default) and
// with no tmpfs page used, many sparse files or hard links to one: each
// freeze (and thaw) then hashes zeros for minutes to hours, holding the
// Control's lock — the run's wall clock paused, its Wait unable to
// detach, cordon exec unable to end even when interrupted.
// The digest is run in a child process (killed after the bound) so that a
// failing test does not hash for minutes.
func TestRedteamFreezeDigestUnboundedBytes(t *testing.T) {
	if dir := os.Getenv("CORDON_REDTEAM_DIGEST_DIR"); dir != "" {
		digestOf(t, dir)
		return
	}
	dir := t.TempDir()
	first := filepath.Join(dir, "z0")
	f, err := os.Create(first)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(256 << 20); err != nil { // the default RLIMIT_FSIZE
		t.Fatal(err)
	}
	f.Close()
	// 400 names for one sparse 256 MiB file: 100 GiB of zeros to hash,
	// 400 of the 100,000 entries allowed, 0 bytes of /work's tmpfs.
	for i := 1; i < 400; i++ {
		if err := os.Link(first, filepath.Join(dir, fmt.Sprintf("z%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	const bound = 5 * time.Second // well over FreezeTimeout
	cmd := exec.Command(os.Args[0], "-test.run=^TestRedteamFreezeDigestUnboundedBytes$", "-test.count=1")
	cmd.Env = append(os.Environ(), "CORDON_REDTEAM_DIGEST_DIR="+dir)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(bound):
		cmd.Process.Kill()
		<-done
		t.Errorf("digesting a /work of 400 links to one sparse 256 MiB file (no tmpfs page) did not end within %v: "+
			"a freeze or thaw holds the run's Control that long and longer, with no bound on the bytes hashed", bound)
	}
}

// F5 (docs/security/redteam-freeze.md): the walk of a declared output
// starts with a Stat that follows a link, so a declared output that the
// program has made a link out of /work (ln -s / /work/out) is not
// digested as "link:/" (as §9.5 says a link is) but fails the digest
// ("path escapes from parent"), and with it every freeze: the program
// decides, at will and at any moment, that it cannot be frozen. (A link
// to a path inside /work is digested as what it points to, not as a link.)
func TestRedteamFreezeDeclaredOutputLinkRefusesFreeze(t *testing.T) {
	dir := t.TempDir()
	if err := os.Symlink("/", filepath.Join(dir, "out")); err != nil {
		t.Fatal(err)
	}
	w, err := os.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	sb := &Sandbox{runID: "redteam", work: w, spec: &Spec{Outputs: []string{"out"}}}
	if _, err := sb.outputsDigest(); err != nil {
		t.Errorf("outputs digest with the declared output a link to /: %v; the freeze is refused, so the program chose not to be frozen", err)
	}
}
