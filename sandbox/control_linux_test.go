package sandbox

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/tier"
)

// A program counting in a loop into /work/c is frozen (its counter stops,
// seen from outside), stays frozen past its wall-clock limit without
// being killed (the limit is paused), is refused a thaw while its output
// differs from the freeze's, thaws once it is restored, and exits 0.
func TestControlFreezeThaw(t *testing.T) {
	requireRoot(t, "freezes the run's cgroup")
	s, out := lifecycleSpec(t, "/bin/sh", "-c", `i=0; while [ ! -e /work/stop ]; do i=$((i+1)); echo $i >> /work/c; done`)
	s.Outputs = []string{"c"}
	s.Limits.Wall = 5 * time.Second
	c := NewControl()
	s.Control = c
	if _, err := c.Freeze(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Freeze before the run = %v, want ErrNotRunning", err)
	}
	created := time.Now()
	sb, err := Create(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy()
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	<-c.Attached()
	if c.RunID() != sb.runID {
		t.Errorf("RunID() = %q, want %q", c.RunID(), sb.runID)
	}
	work := "/proc/self/fd/" + strconv.Itoa(int(sb.work.Fd()))
	// How far it has counted: the size of the file it appends to.
	read := func() int64 {
		for range 1000 {
			if fi, err := os.Stat(filepath.Join(work, "c")); err == nil && fi.Size() > 0 {
				return fi.Size()
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Fatalf("no counter in /work/c; the program wrote %q", out)
		return 0
	}
	advances := func() bool {
		a := read()
		time.Sleep(200 * time.Millisecond)
		return read() > a
	}
	if !advances() {
		t.Fatal("the counter does not advance")
	}
	f, err := c.Freeze()
	if err != nil {
		t.Fatalf("Freeze: %v", err)
	}
	if len(f.PIDs) == 0 || f.Outputs.IsZero() || f.RunID != sb.runID {
		t.Errorf("Freeze = %+v, want pids, an outputs digest and the run id", f)
	}
	if _, err := c.Freeze(); !errors.Is(err, ErrFrozen) {
		t.Errorf("a second Freeze = %v, want ErrFrozen", err)
	}
	if advances() {
		t.Error("the counter advances while frozen")
	}
	// Stay frozen past the wall-clock limit, counting from Create.
	time.Sleep(time.Until(created.Add(s.Limits.Wall + 500*time.Millisecond)))
	// An output changed while frozen: the thaw is refused, the run stays frozen.
	cfile := filepath.Join(work, "c")
	was, err := os.ReadFile(cfile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfile, []byte("forged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Thaw(); !errors.Is(err, ErrChanged) {
		t.Fatalf("Thaw after an output changed = %v, want ErrChanged", err)
	}
	if !c.IsFrozen() {
		t.Error("a refused thaw left the run thawed")
	}
	if err := os.WriteFile(cfile, was, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Thaw(); err != nil {
		t.Fatalf("Thaw once the output is restored: %v", err)
	}
	if _, err := c.Thaw(); !errors.Is(err, ErrNotFrozen) {
		t.Errorf("a second Thaw = %v, want ErrNotFrozen", err)
	}
	if !advances() {
		t.Error("the counter does not advance after the thaw")
	}
	// Created as the program's uid: root is not mapped in the sandbox.
	if err := asOwner(sb.hostBase+insideUID, sb.hostBase+insideGID, func() error {
		return os.WriteFile(filepath.Join(work, "stop"), nil, 0o644)
	}); err != nil {
		t.Fatal(err)
	}
	res, err := sb.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if res.TimedOut || res.ExitCode != 0 {
		t.Errorf("exit %d, timed out %v; want 0: the time frozen does not count against the wall clock", res.ExitCode, res.TimedOut)
	}
	if _, err := c.Thaw(); !errors.Is(err, ErrNotRunning) {
		t.Errorf("Thaw after the run = %v, want ErrNotRunning", err)
	}
}

// A run that is not frozen still times out at its limit.
func TestControlWallClockRuns(t *testing.T) {
	requireRoot(t, "freezes the run's cgroup")
	s, _ := lifecycleSpec(t, "/bin/sh", "-c", `while :; do :; done`)
	s.Limits.Wall = 500 * time.Millisecond
	s.Control = NewControl()
	res, err := Run(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut {
		t.Errorf("not timed out: %+v", res)
	}
}

func TestControlRefusedAtS4AndPrepared(t *testing.T) {
	s, _ := lifecycleSpec(t, "/bin/true")
	s.Tier = tier.S4
	s.Control = NewControl()
	if _, err := Run(t.Context(), s); err == nil || !strings.Contains(err.Error(), "cannot be frozen") {
		t.Errorf("Run at S4 with a Control = %v, want refused", err)
	}
	p := &Spec{Control: NewControl()}
	if f := p.preparedFields(); !strings.Contains(f, "Control") {
		t.Errorf("preparedFields() = %q, want Control named", f)
	}
}

// A sandbox destroyed while frozen, without Wait, is killed whole: Destroy
// does not hang on the frozen processes.
func TestControlDestroyFrozen(t *testing.T) {
	requireRoot(t, "freezes the run's cgroup")
	s, _ := lifecycleSpec(t, "/bin/sh", "-c", `while :; do :; done`)
	c := NewControl()
	s.Control = c
	sb, err := Create(t.Context(), s)
	if err != nil {
		t.Fatal(err)
	}
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, err := c.Freeze(); err == nil {
			break
		} else if !errors.Is(err, ErrNotRunning) || time.Now().After(deadline) {
			t.Fatalf("Freeze: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	done := make(chan error, 1)
	go func() { done <- sb.Destroy() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Destroy: %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("Destroy of a frozen sandbox hangs")
	}
}
