package reaper

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/sandbox/cgroup"
)

// These tests make real cgroups on this host and need root; they never
// skip.

var lim = cgroup.Limits{MemoryBytes: 64 << 20, PIDs: 16}

// deadOwner returns an owner that existed and is gone: a child that was
// started, killed and reaped.
func deadOwner(t *testing.T) Owner {
	t.Helper()
	cmd := exec.Command("sleep", "1000")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	st, _, err := procStart(cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Process.Kill()
	cmd.Wait()
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	return Owner{PID: cmd.Process.Pid, Start: st, Boot: self.Boot}
}

// leftover makes a run's cgroup, as Create does, and never closes it:
// what a killed cordon leaves. With record set it records the run first.
func leftover(t *testing.T, state, tenant string, owner Owner, record bool) *Run {
	t.Helper()
	b := make([]byte, 8)
	rand.Read(b)
	r := &Run{Instance: InstanceID(state), ID: hex.EncodeToString(b), Tenant: tenant, Started: time.Now().Unix(), Owner: owner}
	dirs, err := cgroup.Dirs(r.Group())
	if err != nil {
		t.Fatal(err)
	}
	r.Cgroups = dirs
	release := func() {}
	if record {
		if release, err = Begin(state, r); err != nil {
			t.Fatal(err)
		}
	}
	_, err = cgroup.New(r.Group(), lim)
	release()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if !exists(d) {
			t.Fatalf("%s missing after New", d)
		}
	}
	return r
}

func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

func sweep(t *testing.T, state string, opts Options) *Report {
	t.Helper()
	opts.Wait = true
	rep, err := Sweep(state, opts)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func ids(ls []Leftover) []string {
	var out []string
	for _, l := range ls {
		out = append(out, l.Run)
	}
	return out
}

// cleanupInstance sweeps a state directory when the test ends, and
// fails if anything of it is left.
func cleanupInstance(t *testing.T, state string) {
	t.Cleanup(func() {
		rep, err := Sweep(state, Options{Wait: true})
		if err != nil {
			t.Error(err)
			return
		}
		for _, k := range rep.Kept {
			if !strings.HasPrefix(k.Why, "owner alive") {
				t.Errorf("left behind: %+v", k)
			}
		}
	})
}

func TestOwnerAlive(t *testing.T) {
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := self.Alive(); !ok || err != nil {
		t.Errorf("this process: alive %v, %v", ok, err)
	}
	reused := self
	reused.Start++ // the PID of another process: PID reuse
	if ok, _ := reused.Alive(); ok {
		t.Error("a PID with another start time counts as alive")
	}
	rebooted := self
	rebooted.Boot = "another-boot"
	if ok, _ := rebooted.Alive(); ok {
		t.Error("an owner of another boot counts as alive")
	}
	if ok, _ := deadOwner(t).Alive(); ok {
		t.Error("a reaped child counts as alive")
	}
	// A zombie (exited, not yet reaped) is gone too.
	cmd := exec.Command("true")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	var z Owner
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		st, state, err := procStart(cmd.Process.Pid)
		if err == nil && state == "Z" {
			z = Owner{PID: cmd.Process.Pid, Start: st, Boot: self.Boot}
			break
		}
	}
	if z.PID == 0 {
		t.Fatal("the child never became a zombie")
	}
	if ok, _ := z.Alive(); ok {
		t.Error("a zombie counts as alive")
	}
}

// The sweep removes a dead run's cgroups (found by record or by label),
// its emptied ancestors and its record; it leaves a live run, a run
// whose cgroup holds a process, another instance's runs and unlabelled
// directories alone.
func TestSweep(t *testing.T) {
	requireRoot(t)
	stateA, stateB := t.TempDir(), t.TempDir()
	cleanupInstance(t, stateA)
	cleanupInstance(t, stateB)
	self, err := Self()
	if err != nil {
		t.Fatal(err)
	}
	dead := leftover(t, stateA, "alice", deadOwner(t), true)
	unrecorded := leftover(t, stateA, "bob", deadOwner(t), false)
	live := leftover(t, stateA, "alice", self, true)
	busy := leftover(t, stateA, "carol", deadOwner(t), true)
	other := leftover(t, stateB, "alice", deadOwner(t), true) // another instance

	// A process in busy's cgroup, in every hierarchy.
	proc := exec.Command("sleep", "1000")
	if err := proc.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { proc.Process.Kill(); proc.Wait() }()
	for _, d := range busy.Cgroups {
		if err := os.WriteFile(filepath.Join(d, "cgroup.procs"), []byte(strconv.Itoa(proc.Process.Pid)), 0); err != nil {
			t.Fatal(err)
		}
	}
	// An unlabelled directory in this instance's tree is not cordon's run.
	stray := filepath.Join(filepath.Dir(live.Cgroups[0]), "stray")
	if err := os.Mkdir(stray, 0o755); err != nil {
		t.Fatal(err)
	}

	// A dry run, and a sweep of runs older than an hour, remove nothing.
	rep := sweep(t, stateA, Options{DryRun: true})
	if got := ids(rep.Removed); !slices.Equal(got, sorted(dead.ID, unrecorded.ID)) {
		t.Errorf("dry run would remove %v, want %v", got, sorted(dead.ID, unrecorded.ID))
	}
	rep = sweep(t, stateA, Options{OlderThan: time.Hour})
	if len(rep.Removed) != 0 {
		t.Errorf("--older-than 1h removed %v", ids(rep.Removed))
	}
	for _, r := range []*Run{dead, unrecorded, live, busy, other} {
		for _, d := range r.Cgroups {
			if !exists(d) {
				t.Fatalf("%s removed by a dry run or --older-than", d)
			}
		}
	}

	rep = sweep(t, stateA, Options{})
	if got := ids(rep.Removed); !slices.Equal(got, sorted(dead.ID, unrecorded.ID)) {
		t.Errorf("removed %v, want %v", got, sorted(dead.ID, unrecorded.ID))
	}
	for _, r := range []*Run{dead, unrecorded} {
		for _, d := range r.Cgroups {
			if exists(d) {
				t.Errorf("dead run's %s is still there", d)
			}
		}
	}
	if exists(recordFile(stateA, dead.ID)) {
		t.Error("the dead run's record is still there")
	}
	// bob's tenant directory held only the dead run: gone with it.
	if d := filepath.Dir(unrecorded.Cgroups[0]); exists(d) {
		t.Errorf("%s, emptied, is still there", d)
	}
	kept := map[string]string{}
	for _, k := range rep.Kept {
		kept[k.Run] = k.Why
	}
	if !strings.HasPrefix(kept[live.ID], "owner alive") || !strings.HasPrefix(kept[busy.ID], "holds processes") {
		t.Errorf("kept %v", kept)
	}
	for _, r := range []*Run{live, busy, other} {
		for _, d := range r.Cgroups {
			if !exists(d) {
				t.Errorf("%s was removed", d)
			}
		}
	}
	if !exists(stray) {
		t.Error("an unlabelled directory was removed")
	}
	if err := os.Remove(stray); err != nil {
		t.Fatal(err)
	}

	// Once busy's process is gone, it is a leftover like the others.
	proc.Process.Kill()
	proc.Wait()
	rep = sweep(t, stateA, Options{})
	if got := ids(rep.Removed); !slices.Equal(got, []string{busy.ID}) {
		t.Errorf("removed %v, want %v", got, busy.ID)
	}
	// Another instance's sweep removes its own.
	rep = sweep(t, stateB, Options{})
	if got := ids(rep.Removed); !slices.Equal(got, []string{other.ID}) {
		t.Errorf("instance B removed %v, want %v", got, other.ID)
	}
	// The live run, once its owner is gone (here: its record names a
	// gone owner, as it would after this process died), goes too.
	for _, d := range live.Cgroups {
		if err := cgroup.RemoveIdle(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := End(stateA, live); err != nil {
		t.Fatal(err)
	}
	gone := leftover(t, stateA, "alice", deadOwner(t), true)
	rep = sweep(t, stateA, Options{})
	if got := ids(rep.Removed); !slices.Equal(got, []string{gone.ID}) {
		t.Errorf("removed %v, want %v", got, gone.ID)
	}
	for _, d := range gone.Cgroups {
		for _, p := range []string{d, filepath.Dir(d), filepath.Dir(filepath.Dir(d))} {
			if exists(p) {
				t.Errorf("%s is still there", p)
			}
		}
	}
}

// A record the sweep cannot trust is reported and left, and the
// directory it names is not touched.
func TestSweepRefusesForeignRecords(t *testing.T) {
	requireRoot(t)
	state := t.TempDir()
	cleanupInstance(t, state)
	other := t.TempDir()
	cleanupInstance(t, other)
	victim := leftover(t, other, "alice", deadOwner(t), true) // another instance's cgroup
	if err := os.Mkdir(filepath.Join(state, RecordsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name string, r any) {
		b, _ := json.Marshal(r)
		if err := os.WriteFile(filepath.Join(state, RecordsDir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Our instance's label, but naming the other instance's directories.
	forged := *victim
	forged.Instance = InstanceID(state)
	write(forged.ID+".json", forged)
	// The other instance's record, copied here.
	write("0000000000000001.json", func() Run { r := *victim; r.ID = "0000000000000001"; return r }())
	if err := os.WriteFile(filepath.Join(state, RecordsDir, "bad.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	rep := sweep(t, state, Options{})
	if len(rep.Removed) != 0 || len(rep.Kept) != 3 {
		t.Errorf("removed %+v, kept %+v", rep.Removed, rep.Kept)
	}
	for _, d := range victim.Cgroups {
		if !exists(d) {
			t.Errorf("%s, another instance's, was removed", d)
		}
	}
	for _, f := range []string{forged.ID + ".json", "0000000000000001.json", "bad.json"} {
		if err := os.Remove(filepath.Join(state, RecordsDir, f)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			t.Fatal(err)
		}
	}
}

// A sweep that cannot take the instance's lock at once, because a run
// is creating its cgroup, does nothing unless told to wait.
func TestSweepSkipsWhileLocked(t *testing.T) {
	state := t.TempDir()
	cleanupInstance(t, state)
	self, _ := Self()
	r := &Run{Instance: InstanceID(state), ID: "00000000000000aa", Tenant: "alice", Started: time.Now().Unix(), Owner: self}
	release, err := Begin(state, r)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Sweep(state, Options{})
	if err != nil || !rep.Skipped {
		t.Errorf("Sweep while a run holds the lock: %+v, %v", rep, err)
	}
	release()
	if err := End(state, r); err != nil {
		t.Fatal(err)
	}
	rep, err = Sweep(state, Options{})
	if err != nil || rep.Skipped {
		t.Errorf("Sweep after release: %+v, %v", rep, err)
	}
}

func sorted(s ...string) []string { slices.Sort(s); return s }

// requireRoot skips a test that makes cgroups (v1 here) when the suite
// runs as another user; as root it never skips.
func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root: makes the leftover cgroups it sweeps (uid %d)", os.Geteuid())
	}
}
