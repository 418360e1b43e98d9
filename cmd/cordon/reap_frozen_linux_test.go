package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/sandbox/cgroup"
	"github.com/cordon-dev/cordon/sandbox/reaper"
)

// frozenRun is a 'cordon exec --record' process, its run, and the PIDs
// 'cordon freeze' froze.
type frozenRun struct {
	cmd   *exec.Cmd
	state string
	id    string // the record's run id, for freeze and thaw
	pids  []int
	run   reaper.Run
}

// startFrozen starts 'cordon exec --record' of a looping program with the
// state directory, as a process of its own, and freezes its run.
func startFrozen(t *testing.T, state string) *frozenRun {
	t.Helper()
	dir := t.TempDir()
	cordonCmd(t, "keygen", "--out", filepath.Join(dir, "key.pem"))
	var stderr syncBuffer
	cmd := exec.Command("cordon", "exec", "--state", state, "--record", filepath.Join(dir, "run.record"),
		"--key", filepath.Join(dir, "key.pem"), "--", "sh", "-c", "while :; do sleep 0.01; done")
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fr := &frozenRun{cmd: cmd, state: state}
	t.Cleanup(func() {
		exec.Command("cordon", "thaw", "--state", state, fr.id).Run()
		cmd.Process.Kill()
		cmd.Wait()
		// Whatever a failed test left frozen.
		exec.Command("cordon", "reap", "--kill-frozen", "--state", state).Run()
	})
	re := regexp.MustCompile(`run ([0-9a-f]{16}): freeze it`)
	deadline := time.Now().Add(20 * time.Second)
	for fr.id == "" {
		if m := re.FindStringSubmatch(stderr.String()); m != nil {
			fr.id = m[1]
		} else if time.Now().After(deadline) {
			t.Fatalf("no run id: %s", stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	for {
		out, err := exec.Command("cordon", "freeze", "--state", state, "--json", fr.id).CombinedOutput()
		if err == nil {
			var rep freezeReply
			if err := json.Unmarshal(out, &rep); err != nil || rep.State != "frozen" || len(rep.PIDs) == 0 {
				t.Fatalf("freeze: %v: %s", err, out)
			}
			fr.pids = rep.PIDs
			break
		}
		if !strings.Contains(string(out), "no running program") || time.Now().After(deadline) {
			t.Fatalf("freeze: %v: %s (exec: %s)", err, out, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// The sandbox's run (the reaper's) is another id than the record's.
	for _, r := range records(t, state) {
		if r.Owner.PID == cmd.Process.Pid {
			fr.run = r
		}
	}
	if fr.run.ID == "" || len(fr.run.Cgroups) == 0 {
		t.Fatalf("no run of pid %d recorded in %s: %+v", cmd.Process.Pid, state, records(t, state))
	}
	return fr
}

// kill9 kills the cordon exec with SIGKILL, as a closed terminal or an
// OOM kill would, and waits for it.
func (fr *frozenRun) kill9(t *testing.T) {
	t.Helper()
	if err := fr.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	fr.cmd.Wait()
}

// procState is field 3 of /proc/PID/stat, or "" when there is no such
// process.
func procState(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
	return f[0]
}

// stuck fails unless every one of the run's processes is alive and its
// cgroup is frozen and holds processes, in every hierarchy.
func (fr *frozenRun) stuck(t *testing.T, when string) {
	t.Helper()
	for _, pid := range fr.pids {
		if s := procState(pid); s == "" || s == "Z" {
			t.Errorf("%s: run %s's process %d is gone (state %q)", when, fr.id, pid, s)
		}
	}
	for _, d := range fr.run.Cgroups {
		if idle, err := cgroup.Idle(d); err != nil || idle {
			t.Errorf("%s: run %s's cgroup %s: idle %v, %v", when, fr.id, d, idle, err)
		}
	}
	if frozen, err := cgroup.FrozenLeftover(fr.run.Cgroups); err != nil || !frozen {
		t.Errorf("%s: run %s's cgroup frozen %v, %v", when, fr.id, frozen, err)
	}
}

func reapJSON(t *testing.T, args ...string) reaper.Report {
	t.Helper()
	var rep reaper.Report
	out := cordonCmd(t, append([]string{"reap", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatalf("reap %v: %v: %s", args, err, out)
	}
	return rep
}

func findLeftover(ls []reaper.Leftover, id string) *reaper.Leftover {
	for i := range ls {
		if ls[i].Run == id {
			return &ls[i]
		}
	}
	return nil
}

// TestReapKillFrozen: a 'cordon exec --record' killed with SIGKILL while
// its run is frozen leaves the run's processes frozen for good; 'cordon
// reap' reports and leaves them, '--kill-frozen --dry-run' lists them
// and leaves them, and '--kill-frozen' kills them and removes the run's
// cgroup in every hierarchy, but never touches a live frozen run or
// another installation's frozen leftover.
func TestReapKillFrozen(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("needs root: freezing a run needs its cgroup, and a rootless run here has none (uid %d)", os.Geteuid())
	}
	stateA, stateB := filepath.Join(t.TempDir(), "a"), filepath.Join(t.TempDir(), "b")
	dead := startFrozen(t, stateA)
	live := startFrozen(t, stateA)
	other := startFrozen(t, stateB)
	dead.kill9(t)
	other.kill9(t)
	time.Sleep(300 * time.Millisecond) // time for a kill to take effect, were it to
	if _, err := os.Stat(filepath.Join(dead.run.Cgroups[0], "cgroup.freeze")); err == nil {
		// cgroup v2 lets a fatal signal through the freezer: init's
		// death signal ends the run, and a plain reap removes it.
		t.Logf("cgroup v2: the run ends with its cordon; nothing is left frozen")
		for _, pid := range dead.pids {
			if s := procState(pid); s != "" && s != "Z" {
				t.Errorf("v2: process %d of the run whose cordon was killed remains (state %s)", pid, s)
			}
		}
		if rep := reapJSON(t, "--state", stateA); findLeftover(rep.Removed, dead.run.ID) == nil {
			t.Errorf("v2: reap did not remove the dead run: %+v", rep)
		}
		return
	}
	dead.stuck(t, "after kill -9")
	other.stuck(t, "after kill -9")
	live.stuck(t, "live")
	if t.Failed() {
		t.FailNow()
	}

	// reap alone reports the dead frozen run and leaves it.
	out := cordonCmd(t, "reap", "--state", stateA)
	if !strings.Contains(out, "run "+dead.run.ID+" (tenant _single") || !strings.Contains(out, "left alone: holds processes (its owner is gone), frozen: they cannot exit until killed (--kill-frozen)") {
		t.Errorf("reap said:\n%s", out)
	}
	dead.stuck(t, "after reap")

	// A dry run lists the PIDs it would kill, and kills nothing.
	rep := reapJSON(t, "--state", stateA, "--kill-frozen", "--dry-run")
	lo := findLeftover(rep.Removed, dead.run.ID)
	if lo == nil || !slices.Equal(lo.Killed, sorted(dead.pids)) || !slices.Contains(lo.Paths, dead.run.Cgroups[0]) {
		t.Errorf("dry run: %+v; want run %s, pids %v", rep, dead.run.ID, dead.pids)
	}
	out = cordonCmd(t, "reap", "--state", stateA, "--kill-frozen", "--dry-run")
	if !strings.Contains(out, "would kill the frozen run's processes pid") || !strings.Contains(out, " "+strconv.Itoa(dead.pids[0])) {
		t.Errorf("dry run said:\n%s", out)
	}
	dead.stuck(t, "after a dry run")

	// --kill-frozen kills them and removes the run.
	rep = reapJSON(t, "--state", stateA, "--kill-frozen")
	lo = findLeftover(rep.Removed, dead.run.ID)
	if lo == nil || !slices.Equal(lo.Killed, sorted(dead.pids)) {
		t.Errorf("reap --kill-frozen: %+v; want run %s removed, pids %v killed", rep, dead.run.ID, dead.pids)
	}
	if kept := findLeftover(rep.Kept, live.run.ID); kept == nil || !strings.HasPrefix(kept.Why, "owner alive") || len(kept.Killed) != 0 {
		t.Errorf("reap --kill-frozen: the live run: %+v", kept)
	}
	if findLeftover(rep.Removed, other.run.ID) != nil || findLeftover(rep.Kept, other.run.ID) != nil {
		t.Errorf("reap of A reports B's run: %+v", rep)
	}
	if !noneExist(dead.run.Cgroups) || !noneExist([]string{filepath.Join(stateA, reaper.RecordsDir, dead.run.ID+".json")}) {
		t.Errorf("the killed run's cgroup or record remains: %v", dead.run.Cgroups)
	}
	if len(dead.run.Cgroups) < 2 {
		t.Logf("one hierarchy: %v", dead.run.Cgroups)
	}
	for _, pid := range dead.pids {
		if s := procState(pid); s != "" && s != "Z" {
			t.Errorf("the killed run's process %d remains (state %s)", pid, s)
		}
	}
	live.stuck(t, "live, after reap --kill-frozen")
	other.stuck(t, "another installation's, after reap --kill-frozen")

	// B's own reap kills B's.
	rep = reapJSON(t, "--state", stateB, "--kill-frozen")
	if lo := findLeftover(rep.Removed, other.run.ID); lo == nil || !slices.Equal(lo.Killed, sorted(other.pids)) || !noneExist(other.run.Cgroups) {
		t.Errorf("reap --kill-frozen of B: %+v", rep)
	}
}

func sorted(pids []int) []int {
	s := slices.Clone(pids)
	slices.Sort(s)
	return slices.Compact(s)
}
