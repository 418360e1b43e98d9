package sandbox

import (
	"context"
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
// being killed (the limit is paused), thaws, and exits 0.
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
	if _, err := c.Thaw(); err != nil {
		t.Fatalf("Thaw of an unchanged run: %v", err)
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

// An output changed from outside while the run is frozen — its bytes, or
// only its mode — refuses the thaw and the run stays frozen; putting the
// bytes back does not undo it (the digest records the ctime, which cannot
// be set back), and cancelling the run ends it, frozen.
func TestControlThawRefusedOnChange(t *testing.T) {
	requireRoot(t, "freezes the run's cgroup")
	s, _ := lifecycleSpec(t, "/bin/sh", "-c", `echo 1 > /work/c; while :; do :; done`)
	s.Outputs = []string{"c"}
	s.Limits.Wall = 30 * time.Second
	c := NewControl()
	s.Control = c
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sb, err := Create(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy()
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	<-c.Attached()
	cfile := filepath.Join("/proc/self/fd/"+strconv.Itoa(int(sb.work.Fd())), "c")
	var was []byte
	for range 1000 {
		if was, _ = os.ReadFile(cfile); len(was) > 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(was) == 0 {
		t.Fatal("the program wrote no /work/c")
	}
	for _, change := range []struct {
		name string
		do   func() error
	}{
		{"its bytes rewritten", func() error { return os.WriteFile(cfile, []byte("forged\n"), 0o644) }},
		{"its bytes put back", func() error { return os.WriteFile(cfile, was, 0o644) }},
		{"its mode made setuid", func() error { return os.Chmod(cfile, 0o4755) }},
	} {
		if _, err := c.Freeze(); err != nil {
			t.Fatalf("Freeze before %s: %v", change.name, err)
		}
		if err := change.do(); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Thaw(); !errors.Is(err, ErrChanged) {
			t.Fatalf("Thaw after %s = %v, want ErrChanged", change.name, err)
		}
		if !c.IsFrozen() {
			t.Fatalf("a thaw refused after %s left the run thawed", change.name)
		}
		if change.name != "its mode made setuid" {
			// Undo the freeze the way no thaw can: a fresh run would be
			// needed; here the group is thawed directly to go on.
			if err := sb.cg.Thaw(); err != nil {
				t.Fatal(err)
			}
			c.mu.Lock()
			c.frozen = nil
			c.mu.Unlock()
			sb.deadline.Reset(s.Limits.Wall)
		}
	}
	cancel()
	done := make(chan error, 1)
	go func() { _, err := sb.Wait(); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Wait of a run cancelled while frozen succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a run cancelled while frozen did not end within 10s")
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

// The outputs digest refuses a tree of more than MaxDigestEntries entries
// (naming the bound) and one deeper than MaxDigestDepth, stops as soon as
// the Control's run has ended, and sees a new hard link to an output (its
// link count) and a link's target, which it does not follow.
func TestControlDigestBounds(t *testing.T) {
	digest := func(dir string, c *Control, outputs ...string) (string, error) {
		w, err := os.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		sb := &Sandbox{runID: "bounds", work: w, spec: &Spec{Outputs: outputs, Control: c}}
		d, err := sb.outputsDigest()
		return d.String(), err
	}
	big := t.TempDir()
	for i := range MaxDigestEntries + 1 {
		f, err := os.Create(filepath.Join(big, strconv.Itoa(i)))
		if err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if _, err := digest(big, nil); err == nil || !strings.Contains(err.Error(), strconv.Itoa(MaxDigestEntries)) {
		t.Errorf("digest of %d entries = %v, want a refusal naming the bound %d", MaxDigestEntries+2, err, MaxDigestEntries)
	}
	ended := NewControl()
	ended.detach()
	if _, err := digest(big, ended); !errors.Is(err, errDigestStopped) {
		t.Errorf("digest after the run ended = %v, want errDigestStopped", err)
	}

	deep := t.TempDir()
	p := deep
	for range MaxDigestDepth + 1 {
		p = filepath.Join(p, "d")
	}
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := digest(deep, nil); err == nil || !strings.Contains(err.Error(), strconv.Itoa(MaxDigestDepth)) {
		t.Errorf("digest of a tree %d deep = %v, want a refusal naming the bound %d", MaxDigestDepth+1, err, MaxDigestDepth)
	}

	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("f", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	before, err := digest(dir, nil, "l")
	if err != nil {
		t.Fatal(err)
	}
	// The link's target changes (not what it points to): seen.
	if err := os.WriteFile(filepath.Join(dir, "g"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("g", filepath.Join(dir, "l")); err != nil {
		t.Fatal(err)
	}
	if after, err := digest(dir, nil, "l"); err != nil || after == before {
		t.Errorf("digest of the declared output l, a link re-pointed from f to g: %s then %s (%v), want a change", before, after, err)
	}
	before, err = digest(dir, nil, "f")
	if err != nil {
		t.Fatal(err)
	}
	// A hard link to f outside the declared outputs: f's link count moves.
	if err := os.Link(filepath.Join(dir, "f"), filepath.Join(dir, "h")); err != nil {
		t.Fatal(err)
	}
	if after, err := digest(dir, nil, "f"); err != nil || after == before {
		t.Errorf("digest of f before and after a hard link to it: %s then %s (%v), want a change", before, after, err)
	}
}
