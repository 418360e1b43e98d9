package cgroup

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// treeMu serialises this process's creation and removal of cgroup
// directories, so that one group's New never loses a shared ancestor to
// another group's Close or failed New. Other processes managing the same
// subtree are not excluded.
var treeMu sync.Mutex

// made holds the directories this process created and has not removed.
// Only these are ever removed: a group's own directories by its Close,
// and its ancestors by the Close of the last group beneath them, whichever
// group made them. Guarded by treeMu.
var made = map[string]bool{}

func (c Config) newGroup(path string, lim Limits) (*Group, error) {
	h, err := c.discover()
	if err != nil {
		return nil, err
	}
	if err := h.check(); err != nil {
		return nil, err
	}
	treeMu.Lock()
	defer treeMu.Unlock()

	g := &Group{name: path, version: h.version, fs: h.fs, ctl: map[string]string{}}
	ok := false
	defer func() {
		if !ok {
			g.removeLocked() // the one cleanup: every directory New made
		}
	}()
	switch h.version {
	case 1:
		err = g.createV1(h, path, lim)
	case 2:
		err = g.createV2(h, path, lim)
	}
	if err != nil {
		return nil, err
	}
	ok = true
	return g, nil
}

// mkdirs creates the directories of path beneath base. Ancestors may
// exist already; the last component must not. Each directory on the path
// that this process made, now or for another group, is recorded in
// g.owned. enable, if not nil, is called on base and on every ancestor
// before its child is created. Requires treeMu.
func (g *Group) mkdirs(base, path string, enable func(dir string) error) (string, error) {
	dir := base
	comps := strings.Split(path, "/")
	for i, c := range comps {
		if enable != nil {
			if err := enable(dir); err != nil {
				return "", err
			}
		}
		dir = filepath.Join(dir, c)
		err := g.fs.mkdir(dir)
		switch {
		case err == nil:
			made[dir] = true
		case errors.Is(err, os.ErrExist) && i < len(comps)-1:
			// a shared ancestor
		case errors.Is(err, os.ErrExist):
			return "", fmt.Errorf("cgroup: group %q exists already at %s", g.name, dir)
		default:
			return "", fmt.Errorf("cgroup: %w", err)
		}
		if made[dir] {
			g.owned = append(g.owned, dir)
		}
	}
	return dir, nil
}

// set writes value to the file name in dir and requires the kernel to
// read it back unchanged.
func (g *Group) set(dir, name, value string) error {
	file := filepath.Join(dir, name)
	if err := g.fs.write(file, value); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	if got := strings.TrimSuffix(string(b), "\n"); got != value {
		return fmt.Errorf("cgroup: %s: wrote %q, kernel reads back %q", file, value, got)
	}
	return nil
}

// --- v1 ---

func (g *Group) createV1(h *host, path string, lim Limits) error {
	for _, ctl := range v1Controllers {
		base := h.base[ctl]
		// A co-mounted hierarchy (cpu,cpuacct) gets one directory.
		if j := slices.IndexFunc(v1Controllers, func(c string) bool { return g.ctl[c] != "" && sameDir(h.base[c], base) }); j >= 0 {
			g.ctl[ctl] = g.ctl[v1Controllers[j]]
			continue
		}
		dir, err := g.mkdirs(base, path, nil)
		if err != nil {
			return err
		}
		g.ctl[ctl] = dir
		g.dirs = append(g.dirs, dir)
	}

	mem := g.ctl["memory"]
	// A new memory cgroup inherits oom_kill_disable; with it set, tasks
	// at the limit would hang instead of being killed.
	if b, err := os.ReadFile(filepath.Join(mem, "memory.oom_control")); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	} else if v, found, err := parseKeyed(b, "oom_kill_disable"); err != nil || !found || v != 0 {
		return fmt.Errorf("cgroup: %s/memory.oom_control: oom_kill_disable is not 0", mem)
	}
	m := strconv.FormatInt(lim.MemoryBytes, 10)
	if err := g.set(mem, "memory.limit_in_bytes", m); err != nil {
		return err
	}
	// memsw (memory+swap) exists only where the kernel accounts swap; it
	// must not be below limit_in_bytes, which is why it is written second.
	if exists(filepath.Join(mem, "memory.memsw.limit_in_bytes")) {
		if err := g.set(mem, "memory.memsw.limit_in_bytes", m); err != nil {
			return err
		}
	}
	if err := g.set(mem, "memory.swappiness", "0"); err != nil {
		return err
	}
	if err := g.set(g.ctl["pids"], "pids.max", strconv.FormatInt(lim.PIDs, 10)); err != nil {
		return err
	}
	if lim.CPUMillis > 0 {
		if err := g.set(g.ctl["cpu"], "cpu.cfs_period_us", strconv.Itoa(cpuPeriodMicros)); err != nil {
			return err
		}
		if err := g.set(g.ctl["cpu"], "cpu.cfs_quota_us", strconv.FormatInt(lim.CPUMillis*cpuPeriodMicros/1000, 10)); err != nil {
			return err
		}
	}
	state, err := os.ReadFile(filepath.Join(g.ctl["freezer"], "freezer.state"))
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	if string(state) != "THAWED\n" {
		return fmt.Errorf("cgroup: %s is %q, not THAWED", g.ctl["freezer"], strings.TrimSpace(string(state)))
	}
	return nil
}

// sameDir reports whether a and b name one directory.
func sameDir(a, b string) bool {
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// --- v2 ---

func (g *Group) createV2(h *host, path string, lim Limits) error {
	if err := h.prepareV2(); err != nil {
		return err
	}
	dir, err := g.mkdirs(h.dir, path, g.enableV2)
	if err != nil {
		return err
	}
	g.dirs = []string{dir}
	for _, ctl := range v2Controllers {
		g.ctl[ctl] = dir
	}
	if !exists(filepath.Join(dir, "cgroup.kill")) {
		return fmt.Errorf("%w: no cgroup.kill in %s (Linux 5.14)", ErrUnavailable, dir)
	}
	if err := g.set(dir, "memory.max", strconv.FormatInt(lim.MemoryBytes, 10)); err != nil {
		return err
	}
	if err := g.set(dir, "memory.swap.max", "0"); err != nil {
		return err
	}
	if err := g.set(dir, "pids.max", strconv.FormatInt(lim.PIDs, 10)); err != nil {
		return err
	}
	if lim.CPUMillis > 0 {
		q := strconv.FormatInt(lim.CPUMillis*cpuPeriodMicros/1000, 10)
		if err := g.set(dir, "cpu.max", q+" "+strconv.Itoa(cpuPeriodMicros)); err != nil {
			return err
		}
	}
	return nil
}

// enableV2 enables v2Controllers in dir's cgroup.subtree_control, writing
// only those not yet enabled, and checks that all are.
func (g *Group) enableV2(dir string) error {
	return enableV2(g.fs, dir)
}

func enableV2(fs fsys, dir string) error {
	file := filepath.Join(dir, "cgroup.subtree_control")
	b, err := os.ReadFile(file)
	if err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	var add []string
	for _, ctl := range v2Controllers {
		if !slices.Contains(strings.Fields(string(b)), ctl) {
			add = append(add, "+"+ctl)
		}
	}
	if add == nil {
		return nil
	}
	if err := fs.write(file, strings.Join(add, " ")); err != nil {
		return fmt.Errorf("cgroup: enable controllers: %w", err)
	}
	if b, err = os.ReadFile(file); err != nil {
		return fmt.Errorf("cgroup: %w", err)
	}
	for _, ctl := range v2Controllers {
		if !slices.Contains(strings.Fields(string(b)), ctl) {
			return fmt.Errorf("cgroup: %s: %s not enabled after writing %q", file, ctl, strings.Join(add, " "))
		}
	}
	return nil
}

// prepareV2 enables the controllers in h.dir. When that fails because
// h.dir, this process's own cgroup, holds processes, it moves this process
// into the leaf h.dir/selfLeaf and tries again; if that fails too, it
// moves the process back and removes the leaf.
func (h *host) prepareV2() error {
	err := enableV2(h.fs, h.dir)
	if err == nil || !h.self || !errors.Is(err, syscall.EBUSY) {
		return err
	}
	leaf := filepath.Join(h.dir, selfLeaf)
	if err := h.fs.mkdir(leaf); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cgroup: %w", err)
	}
	pid := strconv.Itoa(os.Getpid())
	if err := h.fs.write(filepath.Join(leaf, "cgroup.procs"), pid); err != nil {
		return fmt.Errorf("cgroup: move this process to %s: %w", leaf, err)
	}
	err = enableV2(h.fs, h.dir)
	if err == nil {
		return nil
	}
	back := h.fs.write(filepath.Join(h.dir, "cgroup.procs"), pid)
	if back == nil {
		back = h.fs.rmdir(leaf)
	}
	if errors.Is(err, syscall.EBUSY) {
		err = fmt.Errorf("%w: %s holds other processes, so controllers cannot be enabled for children (no internal processes): run in a cgroup of its own or set Config.Root: %v",
			ErrUnavailable, h.dir, err)
	}
	return errors.Join(err, back)
}

// --- both ---

func (g *Group) joinFiles() ([]*os.File, error) {
	if g.version != 1 {
		return nil, fmt.Errorf("cgroup %q: joining by thread needs cgroup v1: %w", g.name, errors.ErrUnsupported)
	}
	return tasksFiles(g.dirs)
}

func (g *Group) leaveFiles() ([]*os.File, error) {
	if g.version != 1 {
		return nil, fmt.Errorf("cgroup %q: leaving by thread needs cgroup v1: %w", g.name, errors.ErrUnsupported)
	}
	// Each directory is its base joined with the group's path.
	bases := make([]string, len(g.dirs))
	for i, dir := range g.dirs {
		base, ok := strings.CutSuffix(dir, "/"+g.name)
		if !ok || base == "" {
			return nil, fmt.Errorf("cgroup %q: %s does not end in the group's path", g.name, dir)
		}
		bases[i] = base
	}
	return tasksFiles(bases)
}

// tasksFiles opens the "tasks" file of each of dirs for writing.
func tasksFiles(dirs []string) ([]*os.File, error) {
	var files []*os.File
	for _, dir := range dirs {
		f, err := os.OpenFile(filepath.Join(dir, "tasks"), os.O_WRONLY, 0)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, fmt.Errorf("cgroup: %w", err)
		}
		files = append(files, f)
	}
	return files, nil
}

func (g *Group) add(pid int) error {
	for _, dir := range g.dirs {
		if err := g.fs.write(filepath.Join(dir, "cgroup.procs"), strconv.Itoa(pid)); err != nil {
			return fmt.Errorf("cgroup: add %d to %q: %w", pid, g.name, err)
		}
	}
	return nil
}

func (g *Group) stats() (Stats, error) {
	var s Stats
	var err error
	read := func(ctl, name string, parse func([]byte) (int64, error), optional bool) int64 {
		if err != nil {
			return 0
		}
		file := filepath.Join(g.ctl[ctl], name)
		b, rerr := os.ReadFile(file)
		if optional && errors.Is(rerr, os.ErrNotExist) {
			return 0
		}
		if rerr != nil {
			err = fmt.Errorf("cgroup: %w", rerr)
			return 0
		}
		v, perr := parse(b)
		if perr != nil {
			err = fmt.Errorf("cgroup: %s: %w", file, perr)
		}
		return v
	}
	keyed := func(key string) func([]byte) (int64, error) {
		return func(b []byte) (int64, error) {
			v, _, err := parseKeyed(b, key) // absent keys read 0
			return v, err
		}
	}
	switch g.version {
	case 1:
		s.CPUNanos = read("cpuacct", "cpuacct.usage", parseInt, false)
		s.PeakMemoryBytes = read("memory", "memory.max_usage_in_bytes", parseInt, false)
		s.PIDsPeak = read("pids", "pids.peak", parseInt, true)
		s.OOMKills = read("memory", "memory.oom_control", keyed("oom_kill"), false)
	case 2:
		s.CPUNanos = read("cpu", "cpu.stat", keyed("usage_usec"), false) * 1000
		s.PeakMemoryBytes = read("memory", "memory.peak", parseInt, true)
		s.PIDsPeak = read("pids", "pids.peak", parseInt, true)
		s.OOMKills = read("memory", "memory.events", keyed("oom_kill"), false)
	}
	return s, err
}

func (g *Group) kill() error {
	deadline := time.Now().Add(KillTimeout)
	if g.version == 2 {
		if err := g.fs.write(filepath.Join(g.dirs[0], "cgroup.kill"), "1"); err != nil {
			return fmt.Errorf("cgroup: kill %q: %w", g.name, err)
		}
		if ok, err := waitUntil(deadline, g.empty); err != nil || ok {
			return err
		}
		return fmt.Errorf("cgroup: kill %q: not empty after %v", g.name, KillTimeout)
	}
	for {
		if ok, err := g.empty(); err != nil || ok {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("cgroup: kill %q: not empty after %v", g.name, KillTimeout)
		}
		// While the group is frozen no process in it can fork or exit,
		// so no PID read from cgroup.procs can be reused before it is
		// signalled. A group that does not freeze within a round is
		// signalled anyway: the tasks that did freeze cannot run, and
		// those that did not would die of the signal.
		if err := g.freezeV1(soon(deadline)); err != nil {
			return fmt.Errorf("cgroup: kill %q: %w", g.name, err)
		}
		pids, err := g.procs()
		for _, pid := range pids {
			if kerr := syscall.Kill(pid, syscall.SIGKILL); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
				err = errors.Join(err, fmt.Errorf("kill %d: %w", pid, kerr))
			}
		}
		// Frozen tasks die of SIGKILL only once thawed.
		if terr := g.fs.write(filepath.Join(g.ctl["freezer"], "freezer.state"), "THAWED"); terr != nil {
			err = errors.Join(err, terr)
		}
		if err != nil {
			return fmt.Errorf("cgroup: kill %q: %w", g.name, err)
		}
		// Give the killed processes a moment to exit before looking again.
		if _, err := waitUntil(soon(deadline), g.empty); err != nil {
			return fmt.Errorf("cgroup: kill %q: %w", g.name, err)
		}
	}
}

// soon returns 100 ms from now, or deadline if that is earlier: the
// length of one round of Kill.
func soon(deadline time.Time) time.Time {
	t := time.Now().Add(100 * time.Millisecond)
	if t.After(deadline) {
		return deadline
	}
	return t
}

// freezeV1 writes FROZEN to the v1 freezer until freezer.state reads
// FROZEN or until passes. Tasks can hold a group in FREEZING: a parent
// waiting in vfork for a child frozen first, or a task that forked while
// the freezer swept the group. Writing FROZEN again sweeps the group
// again, and thawing for a moment every tenth try lets such tasks move
// on, as runc does (libcontainer/cgroups/fs/freezer.go).
func (g *Group) freezeV1(until time.Time) error {
	state := filepath.Join(g.ctl["freezer"], "freezer.state")
	for i := 0; ; i++ {
		if i%10 == 9 {
			if err := g.fs.write(state, "THAWED"); err != nil {
				return err
			}
		}
		if err := g.fs.write(state, "FROZEN"); err != nil {
			return err
		}
		b, err := os.ReadFile(state)
		if err != nil {
			return err
		}
		if string(b) == "FROZEN\n" || time.Now().After(until) {
			return nil
		}
		time.Sleep(100 * time.Microsecond)
	}
}

// procs returns the PIDs in cgroup.procs of every hierarchy, without
// duplicates.
func (g *Group) procs() ([]int, error) {
	var all []int
	for _, dir := range g.dirs {
		b, err := os.ReadFile(filepath.Join(dir, "cgroup.procs"))
		if err != nil {
			return nil, err
		}
		pids, err := parsePIDs(b)
		if err != nil {
			return nil, fmt.Errorf("%s/cgroup.procs: %w", dir, err)
		}
		all = append(all, pids...)
	}
	slices.Sort(all)
	return slices.Compact(all), nil
}

// empty reports whether no process is left in the group.
func (g *Group) empty() (bool, error) {
	if g.version == 2 {
		file := filepath.Join(g.dirs[0], "cgroup.events")
		b, err := os.ReadFile(file)
		if err != nil {
			return false, err
		}
		v, found, err := parseKeyed(b, "populated")
		if err != nil || !found {
			return false, fmt.Errorf("%s: no populated key", file)
		}
		return v == 0, nil
	}
	pids, err := g.procs()
	return len(pids) == 0, err
}

// waitUntil polls cond, backing off from 0.1 to 20 ms, until it returns
// true or an error, or deadline passes.
func waitUntil(deadline time.Time, cond func() (bool, error)) (bool, error) {
	for d := 100 * time.Microsecond; ; d = min(2*d, 20*time.Millisecond) {
		if ok, err := cond(); err != nil || ok {
			return ok, err
		}
		if time.Now().After(deadline) {
			return false, nil
		}
		time.Sleep(d)
	}
}

func (g *Group) remove() error {
	treeMu.Lock()
	defer treeMu.Unlock()
	return g.removeLocked()
}

// removeLocked removes the directories in g.owned, children first. The
// group's own directories must go: removal is retried while the kernel
// reports them busy, and on failure the rest stay in g.owned, for a later
// Close. An ancestor still busy with other groups stays, for the last of
// them to remove. Requires treeMu.
func (g *Group) removeLocked() error {
	deadline := time.Now().Add(KillTimeout)
	var errs []error
	for len(g.owned) > 0 {
		dir := g.owned[len(g.owned)-1]
		own := slices.Contains(g.dirs, dir)
		err := g.fs.rmdir(dir)
		for own && errors.Is(err, syscall.EBUSY) && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
			err = g.fs.rmdir(dir)
		}
		switch {
		case err == nil || errors.Is(err, os.ErrNotExist):
			delete(made, dir)
		case own:
			return fmt.Errorf("cgroup: remove %q: %w", g.name, errors.Join(append(errs, err)...))
		case errors.Is(err, syscall.EBUSY) || errors.Is(err, syscall.ENOTEMPTY):
			// still in use
		default:
			errs = append(errs, err)
		}
		g.owned = g.owned[:len(g.owned)-1]
	}
	if errs != nil {
		return fmt.Errorf("cgroup: remove %q: %w", g.name, errors.Join(errs...))
	}
	return nil
}
