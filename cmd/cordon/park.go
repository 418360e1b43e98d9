package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cordon-dev/cordon/agent/runner"
)

// runPark is `cordon park WORKSPACE`: it asks the workspace's live run to
// park (docs/SPEC.md §9.4) by dropping WORKSPACE/.cordon/park/RUN; the
// runner honours it at its next turn boundary (a command running now is
// finished first), and `cordon run --resume WORKSPACE` continues the run.
func runPark(e *env, args []string) error {
	fs := flag.NewFlagSet("park", flag.ContinueOnError)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := nArgs("park", pos, "WORKSPACE"); err != nil {
		return err
	}
	ws, err := filepath.Abs(pos[0])
	if err != nil {
		return fmt.Errorf("park: %w", err)
	}
	state := filepath.Join(ws, runner.StateDir)
	l, err := liveRunFor("park", state, "only a live run parks; a run that waits for a reply parks by itself")
	if err != nil {
		return err
	}
	if !l.Park {
		return fmt.Errorf("park: run %s cannot park: it was started by a caller that cannot resume it (the control plane or a fleet); cancel it there instead", l.Run)
	}
	dir := filepath.Join(state, runner.ParkDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("park: %w", err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("park: %s is not a directory; remove it (park requests are put there)", dir)
	}
	name := filepath.Join(dir, l.Run)
	if _, err := os.Lstat(name); err == nil {
		fmt.Fprintf(e.stdout, "run %s: a park request is already waiting (%s)\n", l.Run, name)
		return nil
	}
	if err := writeExclusive(name, []byte("park\n")); err != nil {
		return fmt.Errorf("park: %w", err)
	}
	fmt.Fprintf(e.stdout, "run %s: asked to park at its next turn boundary (a running command is finished first); then resume it with 'cordon run --resume --manifest MANIFEST %s'\n", l.Run, ws)
	return nil
}
