package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/sandbox/reaper"
)

// runReap is 'cordon reap': remove what this installation's dead runs
// left on the host (their cgroups and records), and say what it removed.
// Every run does the same before it starts; this is the sweep on demand.
func runReap(e *env, args []string) error {
	fs := flag.NewFlagSet("reap", flag.ContinueOnError)
	olderThan := durationVar(fs, "older-than", 0, "remove only leftovers of runs that started at least this long ago")
	dryRun := fs.Bool("dry-run", false, "print what would be removed (and, with --kill-frozen, killed), and remove nothing")
	killFrozen := fs.Bool("kill-frozen", false, "kill the processes of a dead run whose cgroup is frozen (a 'cordon exec --record' killed while frozen), then remove it; use it only when no cordon of this state directory runs in another PID namespace, where a live run looks dead")
	stateDir := fs.String("state", "", "the state directory of the installation to sweep (default: $CORDON_STATE, /var/lib/cordon as root, else $XDG_STATE_HOME/cordon or ~/.local/state/cordon)")
	asJSON := fs.Bool("json", false, "print the report as one JSON object")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErrorf("reap: unexpected arguments %q", pos)
	}
	if *olderThan < 0 {
		return usageErrorf("reap: --older-than %s is negative", *olderThan)
	}
	state, err := execStateDir(*stateDir)
	if err != nil {
		return fmt.Errorf("reap: %w", err)
	}
	rep, err := reaper.Sweep(state, reaper.Options{OlderThan: *olderThan, DryRun: *dryRun, Wait: true, KillFrozen: *killFrozen})
	if err != nil {
		return fmt.Errorf("reap: %w", err)
	}
	if *asJSON {
		b, err := json.Marshal(rep)
		if err == nil {
			b, err = canon.JCS(b)
		}
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(e.stdout, "%s\n", b)
		return err
	}
	printReap(e.stdout, rep)
	return nil
}

func printReap(w io.Writer, rep *reaper.Report) {
	verb, killVerb := "removed", "killed"
	if rep.DryRun {
		verb, killVerb = "would remove", "would kill"
	}
	head := func(l reaper.Leftover) string {
		s := "run " + l.Run
		if l.Tenant != "" {
			s += fmt.Sprintf(" (tenant %s, started %s, owner pid %d)", l.Tenant, time.Unix(l.Started, 0).UTC().Format(time.RFC3339), l.OwnerPID)
		}
		return s
	}
	for _, l := range rep.Removed {
		fmt.Fprintf(w, "%s: %s\n", head(l), verb)
		if len(l.Killed) > 0 {
			fmt.Fprintf(w, "  %s the frozen run's processes %s\n", killVerb, pidList(l.Killed))
		}
		for _, p := range l.Paths {
			fmt.Fprintf(w, "  %s %s\n", verb, p)
		}
	}
	for _, l := range rep.Kept {
		fmt.Fprintf(w, "%s: left alone: %s\n", head(l), oneLine(l.Why))
		if len(l.Killed) > 0 {
			fmt.Fprintf(w, "  %s the frozen run's processes %s\n", killVerb, pidList(l.Killed))
		}
	}
	fmt.Fprintf(w, "reap: instance %s: %s %d dead run(s), left %d alone\n", rep.Instance, verb, len(rep.Removed), len(rep.Kept))
}

// pidList is "pid 12" or "pids 12 13".
func pidList(pids []int) string {
	s := "pid"
	if len(pids) > 1 {
		s = "pids"
	}
	for _, p := range pids {
		s += " " + strconv.Itoa(p)
	}
	return s
}
