package main

import (
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/cordon-dev/cordon/cmd/cordon/internal/handoff"
	"github.com/cordon-dev/cordon/internal/phase"
)

// phasesEnv, when set, holds the monotonic clock reading (nanoseconds,
// CLOCK_MONOTONIC) at which the caller started cordon; cordon then
// records where its time goes and prints it at exit (package phase,
// scripts/bench-phases).
const phasesEnv = handoff.PhasesEnv

// startPhases enables phase marks when the caller asked for them.
func startPhases() {
	v := os.Getenv(phasesEnv)
	if v == "" {
		return
	}
	t0, err := strconv.ParseInt(v, 10, 64)
	if err != nil || t0 <= 0 {
		fmt.Fprintf(os.Stderr, "cordon: warning: %s=%q is not a clock reading in nanoseconds; phases not recorded\n", phasesEnv, v)
		return
	}
	phase.Enable()
	phase.AddAt("spawned", t0)
	phase.Add("main")
}

// printPhases writes the recorded marks, one a line, as nanoseconds
// since the first: "cordon: phase NS NAME"; marks from before the first
// are left out.
func printPhases(w io.Writer) {
	if !phase.Enabled() {
		return
	}
	phase.Add("exit")
	marks := phase.Marks()
	for _, m := range marks {
		// Before the first ("spawned"): a warm slot's init's marks of
		// its preparation, before this caller came.
		if m.T >= marks[0].T {
			fmt.Fprintf(w, "cordon: phase %d %s\n", m.T-marks[0].T, m.Name)
		}
	}
}
