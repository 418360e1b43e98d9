package main

import (
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// phaseLines parses "cordon: phase NS NAME" lines of stderr.
func phaseLines(stderr string) (names []string, at map[string]int64) {
	at = map[string]int64{}
	for _, line := range strings.Split(stderr, "\n") {
		rest, ok := strings.CutPrefix(line, "cordon: phase ")
		if !ok {
			continue
		}
		ns, name, _ := strings.Cut(rest, " ")
		v, err := strconv.ParseInt(ns, 10, 64)
		if err != nil {
			continue
		}
		names = append(names, name)
		at[name] = v
	}
	return names, at
}

// TestResidentPhases: a served caller that asks for phase marks
// (CORDON_PHASES, the monotonic time of its spawn) gets the hand-off's,
// the warm process's and the slot's init's on one time line, in order;
// a caller that does not ask gets none, although the warm process
// records them for its slot; a value that is not a clock reading gets a
// warning and none.
func TestResidentPhases(t *testing.T) {
	state := t.TempDir()
	startResident(t, state, 1)
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		t.Fatal(err)
	}
	cmd := residentCmd(t, "exec", "--stats", "--state", state, "--", "true")
	cmd.Env = append(cmd.Env, phasesEnv+"="+strconv.FormatInt(ts.Nano(), 10))
	r := runCmd(t, cmd)
	if r.code != 0 || !strings.Contains(r.stderr, servedLine) {
		t.Fatalf("exec with phases: exit %d, %s", r.code, r.stderr)
	}
	names, at := phaseLines(r.stderr)
	// In order; "hand-off: request sent" is taken once the send has
	// returned, when the warm process may already have read it ("main").
	order := []string{"hand-off: started", "hand-off: connected", "hand-off: ready", "main",
		"exec: session opened", "init: program started", "init: program reaped", "wait: exit status", "hand-off: answered"}
	prev := int64(0)
	for _, name := range order {
		v, ok := at[name]
		if !ok {
			t.Fatalf("no %q mark among %q:\n%s", name, names, r.stderr)
		}
		if v < prev {
			t.Fatalf("%q at %d ns, before the mark before it (%d ns):\n%s", name, v, prev, r.stderr)
		}
		prev = v
	}
	if s, ok := at["hand-off: request sent"]; !ok || s < at["hand-off: ready"] || s > at["hand-off: answered"] {
		t.Fatalf("hand-off: request sent at %d ns (%v), not between ready and answered:\n%s", s, ok, r.stderr)
	}
	if at["hand-off: answered"] > 60e9 {
		t.Fatalf("marks are not since the spawn: answered at %d ns", at["hand-off: answered"])
	}
	// The slot's init recorded its preparation too, before this caller
	// came: those marks are left out, and none is before the spawn.
	for _, name := range names {
		if name == "init: root built" || at[name] < 0 {
			t.Fatalf("a mark of the slot's preparation reached the caller: %q at %d ns", name, at[name])
		}
	}

	waitWarm(t, state)
	r = runCmd(t, residentCmd(t, "exec", "--stats", "--state", state, "--", "true"))
	if r.code != 0 || !strings.Contains(r.stderr, servedLine) || strings.Contains(r.stderr, "cordon: phase") {
		t.Fatalf("exec without phases: exit %d, marks or not served:\n%s", r.code, r.stderr)
	}

	waitWarm(t, state)
	cmd = residentCmd(t, "exec", "--stats", "--state", state, "--", "true")
	cmd.Env = append(cmd.Env, phasesEnv+"=soon")
	r = runCmd(t, cmd)
	if r.code != 0 || !strings.Contains(r.stderr, servedLine) || strings.Contains(r.stderr, "cordon: phase") || !strings.Contains(r.stderr, "is not a clock reading") {
		t.Fatalf("exec with a bad %s: exit %d:\n%s", phasesEnv, r.code, r.stderr)
	}
}
