package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/sandbox/cgroup"
	"github.com/cordon-dev/cordon/sandbox/reaper"
)

// records returns the run records in a state directory.
func records(t *testing.T, state string) []reaper.Run {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(state, reaper.RecordsDir))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []reaper.Run
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(state, reaper.RecordsDir, e.Name()))
		if err != nil {
			continue // removed meanwhile
		}
		var r reaper.Run
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", e.Name(), err)
		}
		out = append(out, r)
	}
	return out
}

// waitRun waits until the state directory records one run whose cgroup
// exists in every hierarchy and is idle (or not), and returns it.
func waitRun(t *testing.T, state string, idle bool) reaper.Run {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if rs := records(t, state); len(rs) == 1 && len(rs[0].Cgroups) > 0 {
			ok := true
			for _, d := range rs[0].Cgroups {
				got, err := cgroup.Idle(d)
				ok = ok && err == nil && got == idle
			}
			if ok {
				return rs[0]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no run with an idle=%v cgroup after 30s: %+v", state, idle, records(t, state))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func allExist(paths []string) bool {
	return !slices.ContainsFunc(paths, func(p string) bool { _, err := os.Lstat(p); return err != nil })
}

func noneExist(paths []string) bool {
	return !slices.ContainsFunc(paths, func(p string) bool { _, err := os.Lstat(p); return err == nil })
}

// cordonCmd runs the cordon binary (this test binary, through the PATH
// that testscript.Main set up) and returns its output.
func cordonCmd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("cordon", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("cordon %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// startKilled starts 'cordon exec -- sleep 100' with the state
// directory, waits until the program runs in its cgroup, and returns the
// command, still running, and its run.
func startRun(t *testing.T, state string) (*exec.Cmd, reaper.Run) {
	t.Helper()
	cmd := exec.Command("cordon", "exec", "--state", state, "--", "sleep", "100")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	return cmd, waitRun(t, state, false)
}

// kill9 kills a cordon exec with SIGKILL, as a closed terminal or an OOM
// kill would, and waits until its run's cgroup has emptied (init dies
// with its parent; the program with init).
func kill9(t *testing.T, cmd *exec.Cmd, state string) reaper.Run {
	t.Helper()
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	cmd.Wait()
	return waitRun(t, state, true)
}

// TestReapAfterKill: a cordon exec killed with SIGKILL leaves its cgroup
// directories (in every hierarchy) and its record behind; 'cordon reap'
// leaves a live run alone, a dry run removes nothing, the next run of
// the same installation removes them, and another installation's
// leftover is untouched until its own sweep.
func TestReapAfterKill(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("needs root: kill -9 leaves the run's cgroup behind, and a rootless run here has none (uid %d)", os.Geteuid())
	}
	stateA, stateB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")

	cmdA, live := startRun(t, stateA)
	// A live run is never reaped.
	out := cordonCmd(t, "reap", "--state", stateA)
	if !strings.Contains(out, "run "+live.ID+" (tenant _single") || !strings.Contains(out, "left alone: owner alive") {
		t.Errorf("reap during a run said:\n%s", out)
	}
	if !allExist(live.Cgroups) || cmdA.Process.Signal(syscall.Signal(0)) != nil {
		t.Fatalf("reap during a run removed its cgroup or ended it")
	}
	if ok, _ := cgroup.Idle(live.Cgroups[0]); ok {
		t.Fatal("the live run's cgroup emptied during reap")
	}

	deadA := kill9(t, cmdA, stateA)
	if deadA.ID != live.ID || !allExist(deadA.Cgroups) {
		t.Fatalf("after kill -9, want the run's cgroup left behind: %+v", deadA)
	}
	t.Logf("left behind by kill -9: %v", deadA.Cgroups)
	recordA := filepath.Join(stateA, reaper.RecordsDir, deadA.ID+".json")

	cmdB, _ := startRun(t, stateB)
	deadB := kill9(t, cmdB, stateB)
	if !allExist(deadB.Cgroups) {
		t.Fatal("B's leftover is missing")
	}

	out = cordonCmd(t, "reap", "--state", stateA, "--dry-run")
	if !strings.Contains(out, "would remove "+deadA.Cgroups[0]) || !strings.Contains(out, "would remove "+recordA) {
		t.Errorf("dry run said:\n%s", out)
	}
	if !allExist(deadA.Cgroups) || !allExist([]string{recordA}) {
		t.Fatal("a dry run removed something")
	}

	// The next run of installation A sweeps A's leftover first.
	cordonCmd(t, "exec", "--state", stateA, "--", "true")
	if !noneExist(deadA.Cgroups) || !noneExist([]string{recordA}) {
		t.Errorf("after the next run, A's leftover remains: %v", deadA.Cgroups)
	}
	if !allExist(deadB.Cgroups) {
		t.Fatalf("A's run removed B's leftover")
	}
	if rs := records(t, stateA); len(rs) != 0 {
		t.Errorf("A records %+v after its runs", rs)
	}

	// B's own reap removes B's, and says so.
	var rep reaper.Report
	if err := json.Unmarshal([]byte(cordonCmd(t, "reap", "--state", stateB, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed) != 1 || rep.Removed[0].Run != deadB.ID || rep.Instance != reaper.InstanceID(stateB) {
		t.Errorf("reap of B: %+v", rep)
	}
	if !noneExist(deadB.Cgroups) {
		t.Errorf("B's leftover remains after its reap: %v", deadB.Cgroups)
	}
}
