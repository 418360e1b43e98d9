package reaper

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/sandbox/cgroup"
)

const bootIDFile = "/proc/sys/kernel/random/boot_id"

// Self is this process as a run's owner.
func Self() (Owner, error) { return selfOnce() }

var selfOnce = sync.OnceValues(func() (Owner, error) {
	pid := os.Getpid()
	st, _, err := procStart(pid)
	if err != nil {
		return Owner{}, fmt.Errorf("reaper: this process's start time: %w", err)
	}
	boot, err := bootID()
	if err != nil {
		return Owner{}, err
	}
	return Owner{PID: pid, Start: st, Boot: boot}, nil
})

func bootID() (string, error) {
	b, err := os.ReadFile(bootIDFile)
	if err != nil {
		return "", fmt.Errorf("reaper: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// procStart returns field 22 (starttime) and field 3 (state) of
// /proc/PID/stat.
func procStart(pid int) (uint64, string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, "", err
	}
	i := bytes.LastIndexByte(b, ')') // the command name may hold anything
	if i < 0 {
		return 0, "", fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	f := strings.Fields(string(b[i+1:])) // fields 3…
	if len(f) < 20 {
		return 0, "", fmt.Errorf("/proc/%d/stat: malformed", pid)
	}
	st, err := strconv.ParseUint(f[19], 10, 64)
	if err != nil {
		return 0, "", fmt.Errorf("/proc/%d/stat: malformed start time: %w", pid, err)
	}
	return st, f[0], nil
}

// Alive reports whether the owner is still running: this boot, a process
// with its PID and start time, not a zombie. It answers for processes in
// this process's PID namespace.
func (o Owner) Alive() (bool, error) {
	boot, err := bootID()
	if err != nil {
		return false, err
	}
	if o.Boot != boot {
		return false, nil
	}
	st, state, err := procStart(o.PID)
	if errors.Is(err, fs.ErrNotExist) || errors.Is(err, unix.ESRCH) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return st == o.Start && state != "Z" && state != "X", nil
}

// lock opens STATE/runs (created 0700 if missing) and takes a flock of
// the kind how (unix.LOCK_SH, unix.LOCK_EX, possibly | unix.LOCK_NB).
func lock(stateDir string, how int) (*os.File, error) {
	dir := filepath.Join(stateDir, RecordsDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("reaper: %w", err)
	}
	f, err := os.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("reaper: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func recordFile(stateDir, id string) string {
	return filepath.Join(stateDir, RecordsDir, id+".json")
}

// Begin records the run in STATE/runs/ID.json, with the cgroup
// directories it is about to create (r.Cgroups), and holds the
// instance's lock shared until release is called: call it once the
// run's cgroup exists, or New failed.
func Begin(stateDir string, r *Run) (release func(), err error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	f, err := lock(stateDir, unix.LOCK_SH)
	if err != nil {
		return nil, fmt.Errorf("reaper: locking %s: %w", filepath.Join(stateDir, RecordsDir), err)
	}
	b, err := json.Marshal(r)
	if err == nil {
		err = writeNew(recordFile(stateDir, r.ID), append(b, '\n'))
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("reaper: recording run %s: %w", r.ID, err)
	}
	return func() { f.Close() }, nil
}

// End removes the run's record, once its cgroup is gone.
func End(stateDir string, r *Run) error {
	err := os.Remove(recordFile(stateDir, r.ID))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// writeNew writes a file that must not exist. It is not synced: the
// record only has to outlive the process that wrote it (a kill -9), which
// the page cache ensures; a machine that goes down loses its cgroups too,
// so a record lost with it names nothing left behind. (A sync here cost
// every run a few milliseconds.)
func writeNew(name string, b []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(name)
	}
	return err
}

// candidate is a run the sweep found, by its record or its cgroup.
type candidate struct {
	run    Run
	record bool     // found by its record
	dirs   []string // its cgroup directories
}

// Sweep removes the leftovers of the dead runs of the instance whose
// state directory is stateDir, as the package documentation describes.
// A run it cannot judge or remove is reported in Kept with the reason;
// the error is for a sweep that could not run at all.
func Sweep(stateDir string, opts Options) (*Report, error) {
	inst := InstanceID(stateDir)
	rep := &Report{Instance: inst, DryRun: opts.DryRun, Removed: []Leftover{}, Kept: []Leftover{}}
	how := unix.LOCK_EX
	if !opts.Wait {
		how |= unix.LOCK_NB
	}
	f, err := lock(stateDir, how)
	if errors.Is(err, unix.EWOULDBLOCK) {
		rep.Skipped = true
		return rep, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reaper: locking %s: %w", filepath.Join(stateDir, RecordsDir), err)
	}
	defer f.Close()

	cands := map[string]*candidate{}
	if err := readRecords(stateDir, inst, cands, rep); err != nil {
		return nil, err
	}
	boot, err := bootID()
	if err != nil {
		return nil, err
	}
	scanCgroups(inst, boot, cands)

	now := time.Now()
	for _, id := range slices.Sorted(maps.Keys(cands)) {
		c := cands[id]
		lo := Leftover{Run: c.run.ID, Tenant: c.run.Tenant, Started: c.run.Started, OwnerPID: c.run.Owner.PID}
		keep := func(why string) {
			lo.Why = why
			for _, d := range c.dirs {
				if _, err := os.Lstat(d); err == nil {
					lo.Paths = append(lo.Paths, d)
				}
			}
			if c.record {
				lo.Paths = append(lo.Paths, recordFile(stateDir, id))
			}
			rep.Kept = append(rep.Kept, lo)
		}
		if opts.OlderThan > 0 && now.Sub(time.Unix(c.run.Started, 0)) < opts.OlderThan {
			keep("younger than " + opts.OlderThan.String())
			continue
		}
		alive, err := c.run.Owner.Alive()
		if err != nil {
			keep("owner: " + err.Error())
			continue
		}
		if alive {
			keep(fmt.Sprintf("owner alive (pid %d)", c.run.Owner.PID))
			continue
		}
		paths, killed, why := removeRun(stateDir, c, opts)
		lo.Paths, lo.Killed = paths, killed
		if why != "" {
			keep(why)
			continue
		}
		rep.Removed = append(rep.Removed, lo)
	}
	return rep, nil
}

// readRecords adds the runs recorded in STATE/runs to cands. A record
// that is malformed, or another instance's, is reported kept.
func readRecords(stateDir, inst string, cands map[string]*candidate, rep *Report) error {
	dir := filepath.Join(stateDir, RecordsDir)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("reaper: %w", err)
	}
	for _, e := range ents {
		id, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !e.Type().IsRegular() {
			continue
		}
		file := filepath.Join(dir, e.Name())
		var r Run
		b, err := os.ReadFile(file)
		if err == nil {
			dec := json.NewDecoder(bytes.NewReader(b))
			dec.DisallowUnknownFields()
			err = dec.Decode(&r)
		}
		if err == nil {
			err = r.check()
		}
		if err == nil && r.ID != id {
			err = fmt.Errorf("it records run %q", r.ID)
		}
		if err == nil {
			for _, d := range r.Cgroups {
				if !labelled(d, &r) {
					err = fmt.Errorf("cgroup directory %q is not labelled with the run", d)
				}
			}
		}
		switch {
		case err != nil:
			rep.Kept = append(rep.Kept, Leftover{Run: id, Paths: []string{file}, Why: "malformed record: " + err.Error()})
		case r.Instance != inst:
			rep.Kept = append(rep.Kept, Leftover{Run: id, Tenant: r.Tenant, Started: r.Started, OwnerPID: r.Owner.PID,
				Paths: []string{file}, Why: "recorded by instance " + r.Instance + ", not " + inst + " (was the state directory moved?)"})
		default:
			cands[id] = &candidate{run: r, record: true, dirs: r.Cgroups}
		}
	}
	return nil
}

// labelled reports whether dir is a clean absolute path ending in the
// run's cgroup path, cordon/INSTANCE/TENANT/NAME.
func labelled(dir string, r *Run) bool {
	return filepath.IsAbs(dir) && filepath.Clean(dir) == dir && strings.HasSuffix(dir, "/"+r.Group())
}

// scanCgroups adds the labelled run directories beneath this process's
// own cgroup's cordon/INSTANCE, in every hierarchy, to cands. A host
// without cgroups has none.
func scanCgroups(inst, boot string, cands map[string]*candidate) {
	bases, err := cgroup.Dirs("cordon/" + inst)
	if err != nil {
		return
	}
	for _, base := range bases {
		tenants, _ := os.ReadDir(base)
		for _, t := range tenants {
			if !t.IsDir() || !validTenant(t.Name()) {
				continue
			}
			runs, _ := os.ReadDir(filepath.Join(base, t.Name()))
			for _, e := range runs {
				id, started, pid, ticks, ok := parseName(e.Name())
				if !e.IsDir() || !ok {
					continue
				}
				dir := filepath.Join(base, t.Name(), e.Name())
				c := cands[id]
				if c == nil {
					// Its record is gone; a cgroup does not outlive the boot.
					c = &candidate{run: Run{Instance: inst, ID: id, Tenant: t.Name(), Started: started,
						Owner: Owner{PID: pid, Start: ticks, Boot: boot}}}
					cands[id] = c
				}
				if c.run.Tenant == t.Name() && c.run.Name() == e.Name() && !slices.Contains(c.dirs, dir) {
					c.dirs = append(c.dirs, dir)
				}
			}
		}
	}
}

// removeRun removes a dead run's cgroup directories, the ancestors of its
// own instance they leave empty, and its record, or in a dry run lists
// them. With opts.KillFrozen it first kills the processes of a frozen
// run. It returns the paths, the PIDs killed and, when it removed
// nothing or not all, why.
func removeRun(stateDir string, c *candidate, opts Options) ([]string, []int, string) {
	dryRun := opts.DryRun
	var paths, present []string
	var killed []int
	for _, d := range c.dirs {
		if _, err := os.Lstat(d); err == nil {
			present = append(present, d)
		}
	}
	busy := false
	for _, d := range present {
		idle, err := cgroup.Idle(d)
		if err != nil {
			return nil, nil, err.Error()
		}
		busy = busy || !idle
	}
	if busy {
		frozen, err := cgroup.FrozenLeftover(present)
		switch {
		case errors.Is(err, cgroup.ErrUnavailable):
			return nil, nil, "holds processes (its owner is gone)"
		case err != nil:
			return nil, nil, "holds processes (its owner is gone); frozen? " + err.Error()
		case !frozen:
			return nil, nil, "holds processes (its owner is gone)"
		case !opts.KillFrozen:
			return nil, nil, "holds processes (its owner is gone), frozen: they cannot exit until killed (--kill-frozen)"
		}
		killed, err = cgroup.KillFrozen(present, dryRun)
		if err != nil {
			return nil, killed, "holds processes (its owner is gone), frozen: killing them: " + err.Error()
		}
	}
	for _, d := range present {
		if !dryRun {
			if err := cgroup.RemoveIdle(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return paths, killed, err.Error()
			}
		}
		paths = append(paths, d)
		// The tenant's and the instance's directories, once empty; never
		// "cordon" itself, which other instances share.
		for _, up := range []string{filepath.Dir(d), filepath.Dir(filepath.Dir(d))} {
			if dryRun || slices.Contains(paths, up) {
				continue
			}
			if err := cgroup.RemoveIdle(up); err == nil {
				paths = append(paths, up)
			}
		}
	}
	if c.record {
		file := recordFile(stateDir, c.run.ID)
		if !dryRun {
			if err := os.Remove(file); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return paths, killed, err.Error()
			}
		}
		paths = append(paths, file)
	}
	return paths, killed, ""
}
