package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/cordon-dev/cordon/sandbox"
)

// TestRootlessExec: 'cordon exec' as an unprivileged user runs the
// program as uid 1000 inside and as an id of the user's subordinate range
// outside, while init is the user itself: the uid map shows both. As
// root, the test runs cordon as the rootless test user (CORDON_TEST_ROOTLESS_USER,
// else cordontest; .ci/run creates it).
func TestRootlessExec(t *testing.T) {
	bin, err := exec.LookPath("cordon")
	if err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) *exec.Cmd { return exec.Command(bin, args...) }
	usedState := "" // as root: the state directory the user's cordon must use
	caller := os.Geteuid()
	if caller == 0 {
		name := os.Getenv("CORDON_TEST_ROOTLESS_USER")
		if name == "" {
			name = "cordontest"
		}
		u, err := user.Lookup(name)
		if err != nil {
			msg := fmt.Sprintf("the rootless tests run as user %q, with subordinate ids: %v (.ci/run creates it)", name, err)
			if os.Getenv("CORDON_CI") != "" {
				t.Fatal(msg)
			}
			t.Skip(msg)
		}
		caller, _ = strconv.Atoi(u.Uid)
		// The test binary's directory is root's alone: a copy the user can
		// run, named cordon, in a directory of its own.
		dir, err := os.MkdirTemp("", "cordon-rootless-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.RemoveAll(dir) })
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		copied := filepath.Join(dir, "cordon")
		if err := os.WriteFile(copied, b, 0o755); err != nil {
			t.Fatal(err)
		}
		state := filepath.Join(dir, "state")
		if err := os.Mkdir(state, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(state, caller, caller); err != nil {
			t.Fatal(err)
		}
		usedState = state
		run = func(args ...string) *exec.Cmd {
			// --reset-env clears the environment: the state directory
			// is given again after it, and CI's GORACE (a race-built
			// cordon sleeps a second at exit without it).
			prog := []string{"/usr/bin/env", "CORDON_STATE=" + state}
			if v, ok := os.LookupEnv("GORACE"); ok {
				prog = append(prog, "GORACE="+v)
			}
			prog = append(prog, copied)
			cmd := exec.Command("setpriv", append(append([]string{"--reuid=" + u.Uid, "--regid=" + u.Gid, "--init-groups", "--reset-env"}, prog...), args...)...)
			cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=" + u.HomeDir, "CORDON_STATE=" + state}
			cmd.Dir = dir
			return cmd
		}
	} else {
		t.Setenv("CORDON_STATE", t.TempDir())
	}

	cmd := run("exec", "--stats", "--json", "--", "sh", "-c", "id -u; cat /proc/self/uid_map")
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("cordon exec as uid %d: %v\n%s", caller, err, stderr.String())
	}
	if usedState != "" {
		if _, err := os.Stat(filepath.Join(usedState, "runs")); err != nil {
			t.Fatalf("cordon exec as uid %d did not use the state directory %s: %v", caller, usedState, err)
		}
	}
	m := regexp.MustCompile(`^1000\n +0 +(\d+) +1\n +1 +(\d+) +65535\n$`).FindStringSubmatch(stdout.String())
	if m == nil || m[1] != strconv.Itoa(caller) {
		t.Fatalf("cordon exec as uid %d printed %q: want uid 1000, init the caller, the rest its subordinate range", caller, stdout.String())
	}
	sub, _ := strconv.Atoi(m[2])
	lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
	var stats struct {
		HostUID int `json:"host_uid"`
	}
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &stats); err != nil {
		t.Fatalf("--stats --json: %v\n%s", err, stderr.String())
	}
	if stats.HostUID != sub+999 || stats.HostUID == caller || sub <= caller && caller < sub+65535 {
		t.Errorf("the program ran as host uid %d; want %d, in the subordinate range from %d and not the caller's %d", stats.HostUID, sub+999, sub, caller)
	}
	// Without cgroup limits, cordon says what the run goes without.
	note := strings.Contains(stderr.String(), "cordon: note: exec: rootless without cgroup limits")
	if cgroupless := caller != os.Geteuid() || sandbox.CgroupLimits() != nil; note != cgroupless {
		t.Errorf("the note on cgroup limits: printed %v, want %v\n%s", note, cgroupless, stderr.String())
	}
}
