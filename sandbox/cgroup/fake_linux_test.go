package cgroup

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
)

// fakeV2 is a cgroup v2 kernel over a temporary directory, as far as
// cgroup-v2.rst describes the files this package uses:
//
//   - mkdir creates the interface files: the core files, and those of
//     each controller the parent enables in cgroup.subtree_control;
//   - cgroup.subtree_control takes "+ctl -ctl" tokens, refuses a
//     controller not in cgroup.controllers (ENOENT), and refuses to
//     enable one in a non-root cgroup that holds processes (EBUSY);
//   - cgroup.procs moves a PID out of every other cgroup;
//   - cgroup.kill empties the cgroup and its descendants;
//   - rmdir refuses a cgroup with children or processes (EBUSY);
//   - writes to other files store the value, unless reject says no.
type fakeV2 struct {
	t    *testing.T
	root string

	mu     sync.Mutex
	writes []string                     // guarded by mu: "relpath=value" in order
	reject func(file, data string) bool // guarded by mu: a write to refuse with EINVAL
	stuck  bool                         // guarded by mu: cgroup.freeze never reports frozen
}

// newFakeV2 makes a root cgroup offering the given controllers.
func newFakeV2(t *testing.T, controllers string) *fakeV2 {
	t.Helper()
	f := &fakeV2{t: t, root: t.TempDir()}
	f.put(f.root, "cgroup.controllers", controllers)
	f.put(f.root, "cgroup.subtree_control", "")
	f.put(f.root, "cgroup.procs", "")
	f.put(f.root, "cpu.stat", "usage_usec 0\nuser_usec 0\nsystem_usec 0\n")
	return f
}

func (f *fakeV2) config() Config {
	return Config{Root: f.root, fs: &fsys{mkdir: f.mkdir, rmdir: f.rmdir, write: f.write}}
}

func (f *fakeV2) put(dir, name, value string) {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(value), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeV2) get(dir, name string) string {
	f.t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	if err != nil {
		f.t.Fatal(err)
	}
	return string(b)
}

func (f *fakeV2) mkdir(dir string) error {
	if err := os.Mkdir(dir, 0o755); err != nil {
		return err
	}
	enabled := strings.Fields(f.get(filepath.Dir(dir), "cgroup.subtree_control"))
	files := map[string]string{
		"cgroup.controllers":     strings.Join(enabled, " ") + "\n",
		"cgroup.subtree_control": "\n",
		"cgroup.procs":           "",
		"cgroup.events":          "populated 0\nfrozen 0\n",
		"cgroup.type":            "domain\n",
		"cgroup.kill":            "",
		"cgroup.freeze":          "0\n",
		"cpu.stat":               "usage_usec 0\nuser_usec 0\nsystem_usec 0\n",
	}
	if slices.Contains(enabled, "memory") {
		files["memory.max"] = "max\n"
		files["memory.swap.max"] = "max\n"
		files["memory.peak"] = "0\n"
		files["memory.events"] = "low 0\nhigh 0\nmax 0\noom 0\noom_kill 0\noom_group_kill 0\n"
	}
	if slices.Contains(enabled, "pids") {
		files["pids.max"] = "max\n"
		files["pids.peak"] = "0\n"
	}
	if slices.Contains(enabled, "cpu") {
		files["cpu.max"] = "max 100000\n"
	}
	for name, v := range files {
		f.put(dir, name, v)
	}
	return nil
}

func (f *fakeV2) rmdir(dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.IsDir() {
			return &os.PathError{Op: "rmdir", Path: dir, Err: syscall.EBUSY}
		}
	}
	if f.get(dir, "cgroup.procs") != "" {
		return &os.PathError{Op: "rmdir", Path: dir, Err: syscall.EBUSY}
	}
	return os.RemoveAll(dir)
}

func (f *fakeV2) write(file, data string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	rel, _ := filepath.Rel(f.root, file)
	f.writes = append(f.writes, rel+"="+data)
	if f.reject != nil && f.reject(file, data) {
		return &os.PathError{Op: "write", Path: file, Err: syscall.EINVAL}
	}
	if _, err := os.Stat(file); err != nil {
		return err // the kernel makes no new interface files
	}
	dir, name := filepath.Split(file)
	dir = filepath.Clean(dir)
	switch name {
	case "cgroup.subtree_control":
		have := strings.Fields(f.get(dir, "cgroup.controllers"))
		set := strings.Fields(f.get(dir, "cgroup.subtree_control"))
		for _, tok := range strings.Fields(data) {
			ctl := tok[1:]
			if !slices.Contains(have, ctl) {
				return &os.PathError{Op: "write", Path: file, Err: syscall.ENOENT}
			}
			switch {
			case tok[0] == '+' && dir != f.root && f.get(dir, "cgroup.procs") != "":
				return &os.PathError{Op: "write", Path: file, Err: syscall.EBUSY}
			case tok[0] == '+' && !slices.Contains(set, ctl):
				set = append(set, ctl)
			case tok[0] == '-':
				set = slices.DeleteFunc(set, func(s string) bool { return s == ctl })
			}
		}
		slices.Sort(set)
		f.put(dir, name, strings.Join(set, " ")+"\n")
	case "cgroup.procs":
		f.movePID(data, dir)
	case "cgroup.freeze":
		// cgroup-v2.rst: cgroup.events' frozen follows once every task
		// has stopped (a stuck fake never gets there).
		f.put(dir, name, data+"\n")
		if data == "0" || !f.stuck {
			ev := f.get(dir, "cgroup.events")
			ev = strings.Replace(ev, "frozen 0", "frozen "+data, 1)
			ev = strings.Replace(ev, "frozen 1", "frozen "+data, 1)
			f.put(dir, "cgroup.events", ev)
		}
	case "cgroup.kill":
		filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				f.put(p, "cgroup.procs", "")
				f.put(p, "cgroup.events", "populated 0\nfrozen 0\n")
			}
			return nil
		})
	default:
		f.put(dir, name, data+"\n")
	}
	return nil
}

// movePID removes pid from every cgroup.procs and appends it to dir's.
func (f *fakeV2) movePID(pid, dir string) {
	filepath.WalkDir(f.root, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return nil
		}
		pids := strings.Fields(f.get(p, "cgroup.procs"))
		pids = slices.DeleteFunc(pids, func(s string) bool { return s == pid })
		if p == dir {
			pids = append(pids, pid)
		}
		out := ""
		for _, s := range pids {
			out += s + "\n"
		}
		f.put(p, "cgroup.procs", out)
		if p != f.root {
			f.put(p, "cgroup.events", "populated "+strconv.Itoa(min(len(pids), 1))+"\nfrozen 0\n")
		}
		return nil
	})
}

// The tests below run the v2 code against fakeV2 only; this host has no
// cgroup v2 controllers to run them against.

var fakeLimits = Limits{MemoryBytes: 256 << 20, PIDs: 64, CPUMillis: 1500}

func TestV2FakeNew(t *testing.T) {
	f := newFakeV2(t, "cpuset cpu io memory hugetlb pids rdma misc\n")
	c := f.config()
	if err := c.Probe(); err != nil {
		t.Fatalf("Probe: %v", err)
	}
	g, err := c.New("cordon/acme/run-1", fakeLimits)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if g.Version() != 2 {
		t.Errorf("Version() = %d, want 2", g.Version())
	}
	leaf := filepath.Join(f.root, "cordon/acme/run-1")
	if !slices.Equal(g.dirs, []string{leaf}) {
		t.Errorf("dirs = %v, want [%s]", g.dirs, leaf)
	}
	want := map[string]string{
		"cgroup.subtree_control":                   "cpu memory pids\n",
		"cordon/cgroup.subtree_control":            "cpu memory pids\n",
		"cordon/acme/cgroup.subtree_control":       "cpu memory pids\n",
		"cordon/acme/run-1/memory.max":             "268435456\n",
		"cordon/acme/run-1/memory.swap.max":        "0\n",
		"cordon/acme/run-1/pids.max":               "64\n",
		"cordon/acme/run-1/cpu.max":                "150000 100000\n",
		"cordon/acme/run-1/cgroup.procs":           "",
		"cordon/acme/run-1/cgroup.subtree_control": "\n",
	}
	for name, v := range want {
		if got := f.get(f.root, name); got != v {
			t.Errorf("%s = %q, want %q", name, got, v)
		}
	}
	// Each controller is enabled once, in one write, root first.
	wantWrites := []string{
		"cgroup.subtree_control=+cpu +memory +pids",
		"cordon/cgroup.subtree_control=+cpu +memory +pids",
		"cordon/acme/cgroup.subtree_control=+cpu +memory +pids",
		"cordon/acme/run-1/memory.max=268435456",
		"cordon/acme/run-1/memory.swap.max=0",
		"cordon/acme/run-1/pids.max=64",
		"cordon/acme/run-1/cpu.max=150000 100000",
	}
	if !slices.Equal(f.writes, wantWrites) {
		t.Errorf("writes = %q,\nwant %q", f.writes, wantWrites)
	}

	if err := g.Add(4242); err != nil {
		t.Fatalf("Add: %v", err)
	}
	if got := f.get(leaf, "cgroup.procs"); got != "4242\n" {
		t.Errorf("cgroup.procs after Add = %q", got)
	}
	f.put(leaf, "cpu.stat", "usage_usec 1500\nuser_usec 1000\nsystem_usec 500\nnr_periods 0\n")
	f.put(leaf, "memory.peak", "1048576\n")
	f.put(leaf, "pids.peak", "3\n")
	f.put(leaf, "memory.events", "low 0\nhigh 0\nmax 9\noom 2\noom_kill 1\noom_group_kill 0\n")
	s, err := g.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if want := (Stats{CPUNanos: 1_500_000, PeakMemoryBytes: 1 << 20, PIDsPeak: 3, OOMKills: 1}); s != want {
		t.Errorf("Stats() = %+v, want %+v", s, want)
	}

	if err := g.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	if got := f.writes[len(f.writes)-1]; got != "cordon/acme/run-1/cgroup.kill=1" {
		t.Errorf("Kill wrote %q last, want cgroup.kill=1", got)
	}
	if err := g.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if exists(filepath.Join(f.root, "cordon")) {
		t.Errorf("%s/cordon exists after Close; New made it", f.root)
	}
	if !exists(filepath.Join(f.root, "cgroup.procs")) {
		t.Errorf("Close removed the root")
	}
}

func TestV2FakeStatsOldKernel(t *testing.T) {
	f := newFakeV2(t, "cpu memory pids\n")
	g, err := f.config().New("run", fakeLimits)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	leaf := filepath.Join(f.root, "run")
	os.Remove(filepath.Join(leaf, "memory.peak")) // before Linux 5.19
	os.Remove(filepath.Join(leaf, "pids.peak"))   // before Linux 6.1
	f.put(leaf, "cpu.stat", "usage_usec 7\n")
	s, err := g.Stats()
	if err != nil {
		t.Fatalf("Stats: %v", err)
	}
	if want := (Stats{CPUNanos: 7000}); s != want {
		t.Errorf("Stats() = %+v, want %+v", s, want)
	}
	f.put(leaf, "memory.events", "oom_kill x\n")
	if _, err := g.Stats(); err == nil {
		t.Errorf("Stats with a malformed memory.events succeeded")
	}
}

func TestV2FakeNoCPULimit(t *testing.T) {
	f := newFakeV2(t, "cpu memory pids\n")
	g, err := f.config().New("run", Limits{MemoryBytes: 1 << 20, PIDs: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if got := f.get(f.root, "run/cpu.max"); got != "max 100000\n" {
		t.Errorf("cpu.max = %q, want the default", got)
	}
}

func TestV2FakeMissing(t *testing.T) {
	f := newFakeV2(t, "cpu io\n")
	err := f.config().Probe()
	want := "cgroup: unavailable: missing controllers: memory, pids (v2 at " + f.root + ")"
	if !errors.Is(err, ErrUnavailable) || err.Error() != want {
		t.Errorf("Probe() = %v, want %q", err, want)
	}
	if _, err := f.config().New("x", fakeLimits); !errors.Is(err, ErrUnavailable) {
		t.Errorf("New() = %v, want ErrUnavailable", err)
	}
	if exists(filepath.Join(f.root, "x")) {
		t.Errorf("New made a group while refusing")
	}

	// A non-root cgroup (it has cgroup.type) without cgroup.kill: < 5.14.
	f = newFakeV2(t, "cpu memory pids\n")
	f.put(f.root, "cgroup.type", "domain\n")
	err = f.config().Probe()
	if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "no cgroup.kill") {
		t.Errorf("Probe() = %v, want ErrUnavailable naming cgroup.kill", err)
	}
}

func TestV2FakeNewCleansUp(t *testing.T) {
	f := newFakeV2(t, "cpu memory pids\n")
	f.reject = func(file, data string) bool { return strings.HasSuffix(file, "pids.max") }
	if _, err := f.config().New("a/b/c", fakeLimits); err == nil {
		t.Fatal("New succeeded although pids.max was refused")
	}
	if exists(filepath.Join(f.root, "a")) {
		t.Errorf("New left %s/a behind", f.root)
	}
	if len(made) != 0 {
		t.Errorf("made = %v after a failed New, want empty", made)
	}
}

func TestV2FakeReadBack(t *testing.T) {
	f := newFakeV2(t, "cpu memory pids\n")
	c := f.config()
	fs := *c.fs
	// A kernel that stores another value than the one written.
	fs.write = func(file, data string) error {
		if strings.HasSuffix(file, "memory.swap.max") {
			data = "max"
		}
		return f.write(file, data)
	}
	c.fs = &fs
	_, err := c.New("x", fakeLimits)
	if err == nil || !strings.Contains(err.Error(), `wrote "0", kernel reads back "max"`) {
		t.Errorf("New() = %v, want a read-back mismatch", err)
	}
	if exists(filepath.Join(f.root, "x")) {
		t.Errorf("New left %s/x behind", f.root)
	}
}

func TestV2FakeSharedAncestors(t *testing.T) {
	f := newFakeV2(t, "cpu memory pids\n")
	os.Mkdir(filepath.Join(f.root, "pre"), 0o755) // made by someone else
	f.put(filepath.Join(f.root, "pre"), "cgroup.subtree_control", "cpu memory pids\n")
	f.put(filepath.Join(f.root, "pre"), "cgroup.procs", "")
	c := f.config()
	a, err := c.New("pre/t/a", fakeLimits)
	if err != nil {
		t.Fatal(err)
	}
	b, err := c.New("pre/t/b", fakeLimits)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.New("pre/t/a", fakeLimits); err == nil {
		t.Errorf("New of an existing group succeeded")
	}
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if !exists(filepath.Join(f.root, "pre/t/b")) {
		t.Fatalf("closing a removed its sibling")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if exists(filepath.Join(f.root, "pre/t")) {
		t.Errorf("pre/t exists after its last group closed")
	}
	if !exists(filepath.Join(f.root, "pre")) {
		t.Errorf("Close removed pre, which this process did not make")
	}
}

// The "no internal processes" rule: this process's own cgroup holds
// processes, so it moves itself into a leaf first.
func TestV2FakeSelfLeaf(t *testing.T) {
	self := strconv.Itoa(os.Getpid())
	for _, tc := range []struct {
		name   string
		others string
		ok     bool
	}{
		{"alone", "", true},
		{"with another process", "99999999\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeV2(t, "cpu memory pids\n")
			own := filepath.Join(f.root, "svc")
			if err := f.mkdir(own); err != nil {
				t.Fatal(err)
			}
			// The parent delegates the controllers to svc.
			f.put(f.root, "cgroup.subtree_control", "cpu memory pids\n")
			f.put(own, "cgroup.controllers", "cpu memory pids\n")
			f.put(own, "cgroup.procs", self+"\n"+tc.others)
			h := &host{version: 2, dir: own, self: true, fs: *f.config().fs}
			err := h.prepareV2()
			leaf := filepath.Join(own, selfLeaf)
			if tc.ok {
				if err != nil {
					t.Fatalf("prepareV2: %v", err)
				}
				if got := f.get(leaf, "cgroup.procs"); got != self+"\n" {
					t.Errorf("%s/cgroup.procs = %q, want this process", selfLeaf, got)
				}
				if got := f.get(own, "cgroup.subtree_control"); got != "cpu memory pids\n" {
					t.Errorf("subtree_control = %q", got)
				}
				// A second New finds the controllers enabled and moves nothing.
				n := len(f.writes)
				if err := h.prepareV2(); err != nil || len(f.writes) != n {
					t.Errorf("second prepareV2 = %v, wrote %q", err, f.writes[n:])
				}
				return
			}
			if !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "other processes") {
				t.Fatalf("prepareV2 = %v, want ErrUnavailable naming the other processes", err)
			}
			if got := f.get(own, "cgroup.procs"); !strings.Contains(got, self) {
				t.Errorf("this process was not moved back: %s/cgroup.procs = %q", own, got)
			}
			if exists(leaf) {
				t.Errorf("%s exists after a failed move", leaf)
			}
		})
	}
}

func TestV2FakeNotSelf(t *testing.T) {
	// With Config.Root, a cgroup holding processes is refused, and
	// nothing is moved.
	f := newFakeV2(t, "cpu memory pids\n")
	own := filepath.Join(f.root, "svc")
	f.mkdir(own)
	f.put(f.root, "cgroup.subtree_control", "cpu memory pids\n")
	f.put(own, "cgroup.controllers", "cpu memory pids\n")
	f.put(own, "cgroup.procs", "1\n")
	c := f.config()
	c.Root = own
	if _, err := c.New("x", fakeLimits); !errors.Is(err, syscall.EBUSY) {
		t.Errorf("New() = %v, want EBUSY", err)
	}
	if exists(filepath.Join(own, selfLeaf)) {
		t.Errorf("New moved this process although Config.Root was set")
	}
}
