package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

// TestKillFrozen: KillFrozen refuses a group that is not frozen, one with
// a process outside the frozen group (v1) and one with a child group, and
// a plain directory; a dry run lists the frozen processes and leaves them;
// then it kills them all and the group empties.
func TestKillFrozen(t *testing.T) {
	requireRoot(t)
	g := newTestGroup(t, testLimits)
	cmd := exec.Command("/bin/sh", "-c", `read _; (sleep 1000 &); sleep 1000`)
	in := startGated(t, cmd)
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintln(in)
	var pids []int
	// Settled: the shell and its two sleeps, the subshell that started
	// the background one gone (it would "die" under the checks below).
	ok, err := waitUntil(time.Now().Add(5*time.Second), func() (bool, error) {
		var err error
		pids, err = g.procs()
		if err != nil {
			return true, err
		}
		sleeps := 0
		for _, pid := range pids {
			if comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); string(comm) == "sleep\n" {
				sleeps++
			}
		}
		return len(pids) == 3 && sleeps == 2, nil
	})
	if !ok || err != nil {
		t.Fatalf("group holds %v, want 3 processes: %v", pids, err)
	}
	allAlive := func(when string) {
		t.Helper()
		for _, pid := range pids {
			if !alive(pid) {
				t.Fatalf("%s: process %d died", when, pid)
			}
		}
	}

	if got, err := KillFrozen(g.dirs, false); !errors.Is(err, ErrBusy) || got != nil {
		t.Errorf("KillFrozen of a thawed group = %v, %v; want ErrBusy", got, err)
	}
	if frozen, err := FrozenLeftover(g.dirs); frozen || err != nil {
		t.Errorf("FrozenLeftover of a thawed group = %v, %v", frozen, err)
	}
	allAlive("refused while thawed")
	if err := g.Freeze(); err != nil {
		t.Fatal(err)
	}
	if frozen, err := FrozenLeftover(g.dirs); !frozen || err != nil {
		t.Errorf("FrozenLeftover of a frozen group = %v, %v", frozen, err)
	}

	// v1: a process in one of the group's hierarchies but not in the
	// frozen one is not frozen, and its PID could be reused: refused.
	if g.version == 1 {
		other := exec.Command("sleep", "1000")
		if err := other.Start(); err != nil {
			t.Fatal(err)
		}
		defer func() { other.Process.Kill(); other.Wait() }()
		pidsDir := g.ctl["pids"]
		if pidsDir == "" || pidsDir == g.ctl["freezer"] {
			t.Fatalf("no pids hierarchy apart from the freezer's: %v", g.ctl)
		}
		if err := os.WriteFile(filepath.Join(pidsDir, "cgroup.procs"), []byte(strconv.Itoa(other.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
		if _, err := KillFrozen(g.dirs, false); !errors.Is(err, ErrBusy) || !alive(other.Process.Pid) {
			t.Errorf("KillFrozen with an unfrozen process in %s = %v; want ErrBusy, nothing killed", pidsDir, err)
		}
		other.Process.Kill()
		other.Wait()
	}
	// A child group, whose processes cgroup.procs does not list: refused.
	child := filepath.Join(g.dirs[0], "child")
	if err := os.Mkdir(child, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := KillFrozen(g.dirs, false); !errors.Is(err, ErrBusy) {
		t.Errorf("KillFrozen with a child group = %v; want ErrBusy", err)
	}
	if err := os.Remove(child); err != nil {
		t.Fatal(err)
	}
	if _, err := KillFrozen([]string{t.TempDir()}, true); !errors.Is(err, ErrInvalid) {
		t.Errorf("KillFrozen of a plain directory = %v; want ErrInvalid", err)
	}
	allAlive("refusals")

	got, err := KillFrozen(g.dirs, true)
	if err != nil || !slices.Equal(got, pids) {
		t.Errorf("dry run = %v, %v; want %v", got, err, pids)
	}
	allAlive("dry run")
	if frozen, err := g.Frozen(); !frozen || err != nil {
		t.Errorf("after a dry run, frozen = %v, %v", frozen, err)
	}

	got, err = KillFrozen(g.dirs, false)
	if err != nil || !slices.Equal(got, pids) {
		t.Errorf("KillFrozen = %v, %v; want %v", got, err, pids)
	}
	for _, pid := range pids {
		if alive(pid) {
			t.Errorf("process %d is alive after KillFrozen", pid)
		}
	}
	for _, d := range g.dirs {
		if ok, err := Idle(d); !ok || err != nil {
			t.Errorf("Idle(%s) = %v, %v after KillFrozen", d, ok, err)
		}
	}
	if frozen, err := g.Frozen(); frozen || err != nil {
		t.Errorf("after KillFrozen, frozen = %v, %v; want thawed", frozen, err)
	}
}
