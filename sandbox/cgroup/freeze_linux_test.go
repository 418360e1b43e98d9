package cgroup

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestV2FakeFreezeThaw(t *testing.T) {
	f := newFakeV2(t, "cpu memory pids\n")
	g, err := f.config().New("cordon/acme/run-1", fakeLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.Add(4242); err != nil {
		t.Fatal(err)
	}
	leaf := filepath.Join(f.root, "cordon/acme/run-1")
	if err := g.Freeze(); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if got := f.get(leaf, "cgroup.freeze"); got != "1\n" {
		t.Errorf("cgroup.freeze after Freeze = %q, want 1", got)
	}
	if ok, err := g.Frozen(); !ok || err != nil {
		t.Errorf("Frozen() = %v, %v after Freeze", ok, err)
	}
	if pids, err := g.Procs(); err != nil || !slices.Equal(pids, []int{4242}) {
		t.Errorf("Procs() = %v, %v", pids, err)
	}
	if err := g.Thaw(); err != nil {
		t.Fatalf("Thaw: %v", err)
	}
	if ok, err := g.Frozen(); ok || err != nil {
		t.Errorf("Frozen() = %v, %v after Thaw", ok, err)
	}
	if !slices.Contains(f.writes, "cordon/acme/run-1/cgroup.freeze=1") || !slices.Contains(f.writes, "cordon/acme/run-1/cgroup.freeze=0") {
		t.Errorf("writes = %q, want cgroup.freeze=1 and =0", f.writes)
	}
}

// A group whose tasks never all stop (cgroup.events stays frozen 0) is
// thawed again, and the error names the group and the file.
func TestV2FakeFreezeTimeout(t *testing.T) {
	defer func(d time.Duration) { freezeTimeout = d }(freezeTimeout)
	freezeTimeout = 50 * time.Millisecond
	f := newFakeV2(t, "cpu memory pids\n")
	f.stuck = true
	g, err := f.config().New("cordon/acme/run-2", fakeLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	err = g.Freeze()
	if err == nil || !strings.Contains(err.Error(), `"cordon/acme/run-2"`) || !strings.Contains(err.Error(), "frozen 1") {
		t.Fatalf("Freeze of a stuck group = %v, want an error naming the group and frozen 1", err)
	}
	if got := f.get(filepath.Join(f.root, "cordon/acme/run-2"), "cgroup.freeze"); got != "0\n" {
		t.Errorf("cgroup.freeze after a failed Freeze = %q, want 0 (thawed again)", got)
	}
}

// No cgroup.freeze (Linux before 5.2): refused, saying what is needed.
func TestV2FakeNoFreezer(t *testing.T) {
	f := newFakeV2(t, "cpu memory pids\n")
	g, err := f.config().New("cordon/acme/run-3", fakeLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := os.Remove(filepath.Join(f.root, "cordon/acme/run-3/cgroup.freeze")); err != nil {
		t.Fatal(err)
	}
	for name, op := range map[string]func() error{"Freeze": g.Freeze, "Thaw": g.Thaw} {
		if err := op(); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "Linux 5.2") {
			t.Errorf("%s without cgroup.freeze = %v, want ErrUnavailable naming Linux 5.2", name, err)
		}
	}
}

// A v1 group without a freezer hierarchy is refused, saying what to mount.
func TestFreezeV1NoFreezer(t *testing.T) {
	g := &Group{name: "cordon/x", version: 1, ctl: map[string]string{"memory": t.TempDir()}}
	if err := g.Freeze(); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "freezer hierarchy") {
		t.Errorf("Freeze without a freezer = %v, want ErrUnavailable saying to mount the freezer", err)
	}
}

// A process counting in a loop stops counting while its group is
// frozen, as seen from outside, and counts again once it is thawed.
func TestFreezeThawV1(t *testing.T) {
	requireRoot(t)
	g := newTestGroup(t, testLimits)
	counter := filepath.Join(t.TempDir(), "n")
	cmd := exec.Command("/bin/sh", "-c", `read _; i=0; while :; do i=$((i+1)); echo $i > "$0.tmp"; mv "$0.tmp" "$0"; done`, counter)
	in := startGated(t, cmd)
	if err := g.Add(cmd.Process.Pid); err != nil {
		t.Fatalf("Add: %v", err)
	}
	fmt.Fprintln(in)
	read := func() int {
		for range 100 {
			b, err := os.ReadFile(counter)
			if n, perr := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && perr == nil {
				return n
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatal("the counter never appeared")
		return 0
	}
	advances := func() bool {
		a := read()
		time.Sleep(200 * time.Millisecond)
		return read() > a
	}
	if !advances() {
		t.Fatal("the counter does not advance before Freeze")
	}
	if err := g.Freeze(); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if got := readFile(t, filepath.Join(g.ctl["freezer"], "freezer.state")); got != "FROZEN" {
		t.Errorf("freezer.state after Freeze = %q", got)
	}
	if ok, err := g.Frozen(); !ok || err != nil {
		t.Errorf("Frozen() = %v, %v", ok, err)
	}
	if advances() {
		t.Error("the counter advances while the group is frozen")
	}
	if pids, err := g.Procs(); err != nil || !slices.Contains(pids, cmd.Process.Pid) {
		t.Errorf("Procs() = %v, %v; want it to hold %d", pids, err, cmd.Process.Pid)
	}
	if err := g.Thaw(); err != nil {
		t.Fatalf("Thaw: %v", err)
	}
	if !advances() {
		t.Error("the counter does not advance after Thaw")
	}
	// A frozen group is killed whole.
	if err := g.Freeze(); err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if err := g.Kill(); err != nil {
		t.Fatalf("Kill of a frozen group: %v", err)
	}
	if err := g.Freeze(); err != nil { // an empty group freezes at once
		t.Errorf("Freeze of an empty group: %v", err)
	}
}
