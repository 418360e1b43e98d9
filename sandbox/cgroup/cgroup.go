// Package cgroup gives one sandbox run a control group of its own: it
// limits the run's memory (with swap disabled), number of tasks and CPU
// bandwidth, kills every process in it, and reads its accounting. It
// implements the kernel interfaces documented in the Linux source tree:
// Documentation/admin-guide/cgroup-v2.rst for the unified hierarchy (v2),
// and for v1 Documentation/admin-guide/cgroup-v1/{memory,pids,cpuacct,
// freezer-subsystem}.rst with Documentation/scheduler/sched-bwc.rst.
//
// # Placement
//
// A group named "cordon/<tenant>/<run>" is created beneath this process's
// own cgroup, as /proc/self/cgroup names it, in every hierarchy it needs:
// on v1 the memory, pids, cpu, cpuacct and freezer hierarchies (cpu and
// cpuacct may be one co-mounted hierarchy); on v2 the one unified
// hierarchy, with the cpu, memory and pids controllers enabled in the
// cgroup.subtree_control of every ancestor up to this process's cgroup.
// Config.Root names another place instead.
//
// v2 forbids processes in a cgroup whose subtree_control enables a
// controller ("no internal processes"). When this process's own cgroup
// holds processes, New moves this process (all its threads) into a leaf
// child named "cordon-supervisor" and enables the controllers in the
// parent, so later groups are siblings of that leaf. That fails, and New
// refuses, when other processes share the cgroup: run cordon in a
// delegated cgroup of its own (systemd Delegate=yes, or a container with
// its own cgroup namespace) or set Config.Root.
//
// # Limits
//
// Memory and PIDs limits are always set; CPU bandwidth only when asked.
// Every limit is written exactly and read back: a value the kernel would
// round (a memory limit that is not a whole number of pages) is refused
// with ErrInvalid, and a read-back that differs from what was written is
// an error. Swap is disabled for the group: v2 memory.swap.max is 0; v1
// memory.memsw.limit_in_bytes equals the memory limit when the kernel
// accounts swap, and memory.swappiness is 0 always. Where v1 does not
// account swap, swappiness 0 is the only guard: it "really prevents from
// any swapping" when the group reaches its limit (cgroup-v1/memory.rst),
// but global memory pressure may still swap the group's pages out.
//
// # Fail closed
//
// Probe and New refuse, wrapping ErrUnavailable and naming everything
// missing, when a controller or facility is absent; nothing degrades to
// an unlimited group. v1 needs the freezer, so that Kill can stop the
// group's processes from forking, and their PIDs from being reused, while
// it signals them; v2 needs cgroup.kill (Linux 5.14).
//
// # Freezing
//
// Freeze and Thaw stop and restart every process of a group with the
// cgroup freezer (v1 freezer.state, v2 cgroup.freeze), waiting at most
// FreezeTimeout for the kernel to report it done; sandbox.Control uses
// them to freeze a running command.
//
// # Directories
//
// A process removes only cgroup directories it created: a group's own by
// its Close, and an ancestor such as "cordon/<tenant>" by the Close of
// the last group beneath it. Groups are safe to create and close from
// several goroutines; two processes managing groups beneath the same
// cgroup may race on shared ancestors. A group whose process died before
// its Close stays behind; Dirs says where a group lives, Idle whether it
// still holds processes, and RemoveIdle removes it once it holds none
// (package sandbox/reaper decides which groups are such leftovers).
//
// # Not Linux
//
// On other systems Probe and New return errors wrapping both
// ErrUnavailable and errors.ErrUnsupported.
package cgroup

import (
	"errors"
	"fmt"
	"math"
	"os"
	"strings"
	"sync"
	"time"
)

var (
	// ErrUnavailable is returned by Probe and New when this host cannot
	// create limited groups: a controller or facility is missing, or the
	// cgroup filesystem cannot be written.
	ErrUnavailable = errors.New("cgroup: unavailable")
	// ErrInvalid is returned by New for a malformed path or limits.
	ErrInvalid = errors.New("cgroup: invalid argument")
	// ErrBusy is returned by RemoveIdle for a group that holds a process
	// or a child group.
	ErrBusy = errors.New("cgroup: busy")
)

// Limits bound the processes of one group.
type Limits struct {
	// MemoryBytes caps the group's memory. It must be positive and a
	// whole number of pages (os.Getpagesize), since the kernel would
	// round any other value down.
	MemoryBytes int64
	// PIDs caps the number of tasks (processes and threads); must be
	// positive.
	PIDs int64
	// CPUMillis is the CPU bandwidth in thousandths of a CPU: 1000 is
	// one CPU, 2500 two and a half. Zero means no CPU limit; otherwise it
	// must be at least MinCPUMillis. It is applied as a quota of
	// CPUMillis*100 µs every 100 ms.
	CPUMillis int64
}

const (
	// MinCPUMillis is the smallest CPU limit: the kernel's minimum quota
	// is 1 ms in a 100 ms period.
	MinCPUMillis = 10
	// cpuPeriodMicros is the bandwidth period, the kernel's default.
	cpuPeriodMicros = 100_000
	// maxCPUMillis keeps the quota in microseconds far from overflow;
	// the kernel refuses much smaller quotas already.
	maxCPUMillis = math.MaxInt64 / cpuPeriodMicros
)

// check returns an error wrapping ErrInvalid that names every invalid
// limit, or nil.
func (l Limits) check(pageSize int64) error {
	var bad []string
	switch {
	case l.MemoryBytes <= 0:
		bad = append(bad, fmt.Sprintf("MemoryBytes %d is not positive", l.MemoryBytes))
	case l.MemoryBytes%pageSize != 0:
		bad = append(bad, fmt.Sprintf("MemoryBytes %d is not a multiple of the page size %d", l.MemoryBytes, pageSize))
	}
	if l.PIDs <= 0 {
		bad = append(bad, fmt.Sprintf("PIDs %d is not positive", l.PIDs))
	}
	if l.CPUMillis != 0 && (l.CPUMillis < MinCPUMillis || l.CPUMillis > maxCPUMillis) {
		bad = append(bad, fmt.Sprintf("CPUMillis %d is outside [%d, %d] and not 0", l.CPUMillis, MinCPUMillis, maxCPUMillis))
	}
	if bad != nil {
		return fmt.Errorf("%w: %s", ErrInvalid, strings.Join(bad, "; "))
	}
	return nil
}

// KillTimeout bounds how long Kill and Close wait for a group to empty.
const KillTimeout = 2 * time.Second

// Stats is a group's resource accounting. A field the kernel does not
// provide reads 0; which kernels lack what is noted on each field.
type Stats struct {
	// CPUNanos is the CPU time used by the group's tasks, user and
	// system: v1 cpuacct.usage; v2 cpu.stat usage_usec × 1000.
	CPUNanos int64
	// PeakMemoryBytes is the most memory the group has used: v1
	// memory.max_usage_in_bytes; v2 memory.peak (Linux 5.19; 0 before).
	PeakMemoryBytes int64
	// PIDsPeak is the most tasks the group has held at once: pids.peak
	// (Linux 6.1; 0 before).
	PIDsPeak int64
	// OOMKills counts tasks killed by the OOM killer because the group
	// reached its memory limit: v1 memory.oom_control oom_kill (Linux
	// 4.13; 0 before); v2 memory.events oom_kill.
	OOMKills int64
}

// Config places groups. The zero value places them beneath this
// process's own cgroup.
type Config struct {
	// Root, when not empty, is the directory groups are created beneath,
	// instead of this process's own cgroup. For v2 it is a cgroup2
	// directory (it has cgroup.controllers) that this process may manage
	// and that holds no processes; for v1 it is a directory with one
	// directory per hierarchy named after its controllers ("memory",
	// "pids", "cpu,cpuacct" or "cpu" and "cpuacct", "freezer"), such as
	// /sys/fs/cgroup, and groups are created at Root/<hierarchy>/<path>.
	// This process is never moved when Root is set.
	Root string

	fs *fsys // nil: the real cgroup filesystem; tests substitute a fake kernel
}

// fsys is how the package changes the cgroup filesystem; reads use os
// directly. Tests replace it with a fake kernel.
type fsys struct {
	mkdir func(dir string) error
	rmdir func(dir string) error
	// write writes data to an existing file in one write(2), as cgroup
	// interface files require.
	write func(file, data string) error
}

// Probe returns nil when this host can create limited groups beneath this
// process's own cgroup. Otherwise its error wraps ErrUnavailable and names
// every missing controller and facility, e.g.
// "cgroup: unavailable: missing controllers: pids, memory (v1 at /sys/fs/cgroup)".
func Probe() error { return Config{}.Probe() }

// Probe is like the package's Probe, for groups placed by c.
func (c Config) Probe() error { return c.probe() }

// New creates the group path, a relative slash-separated name such as
// "cordon/acme/run-42", and sets lim on it. Every component must match
// [A-Za-z0-9_-][A-Za-z0-9._-]*; missing ancestors are created; the group
// itself must not exist yet. On error, every directory New created is
// removed. See the package documentation for where groups are placed,
// and for v2, when New moves this process.
func New(path string, lim Limits) (*Group, error) { return Config{}.New(path, lim) }

// New is like the package's New, for a group placed by c.
func (c Config) New(path string, lim Limits) (*Group, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	if err := lim.check(int64(os.Getpagesize())); err != nil {
		return nil, err
	}
	return c.newGroup(path, lim)
}

// Dirs returns the directories that the group path has, or that New
// would give it, beneath this process's own cgroup: one per hierarchy
// (co-mounted controllers share one), in the order New creates them. It
// creates and checks nothing beyond reading where the hierarchies are.
func Dirs(path string) ([]string, error) { return Config{}.Dirs(path) }

// Dirs is like the package's Dirs, for a group placed by c.
func (c Config) Dirs(path string) ([]string, error) {
	if err := checkPath(path); err != nil {
		return nil, err
	}
	return c.dirs(path)
}

// Idle reports whether the group directory dir, in any hierarchy, holds
// no process: its cgroup.procs is empty. dir must be on a cgroup or
// cgroup2 file system.
func Idle(dir string) (bool, error) { return idle(dir) }

// RemoveIdle removes the group directory dir, in any hierarchy, when it
// holds no process and no child group; otherwise it removes nothing and
// returns an error wrapping ErrBusy. It never signals a process. dir
// must be on a cgroup or cgroup2 file system, or the error wraps
// ErrInvalid. It is for groups left behind by a process that died
// before it closed them; the kernel refuses the removal if a process
// joins the group meanwhile.
func RemoveIdle(dir string) error { return removeIdle(dir) }

// selfLeaf is the v2 leaf this process moves itself into; see the package
// documentation. No group path may begin with it.
const selfLeaf = "cordon-supervisor"

// checkPath returns an error wrapping ErrInvalid unless path is a valid
// group name.
func checkPath(path string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: group path %q %s", ErrInvalid, path, why)
	}
	if path == "" {
		return bad("is empty")
	}
	comps := strings.Split(path, "/")
	if comps[0] == selfLeaf {
		return bad("begins with the reserved name " + selfLeaf)
	}
	for _, c := range comps {
		if c == "" || len(c) > 255 || c[0] == '.' {
			return bad("has an empty, overlong or dot-leading component")
		}
		for _, r := range c {
			if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || r == '_' || r == '-' || r == '.') {
				return bad(fmt.Sprintf("has the character %q", r))
			}
		}
	}
	return nil
}

// Group is one control group, present in every hierarchy it needs. Its
// methods may be called from several goroutines; they run one at a time.
type Group struct {
	name    string // the path given to New
	version int
	fs      fsys
	// dirs has the group's directory in each hierarchy, deduplicated:
	// one for v2.
	dirs []string
	// ctl has the group's directory for each controller used; on v2
	// every entry is dirs[0].
	ctl map[string]string
	// owned has the directories on the group's paths that this process
	// made, parents before children; see made.
	owned []string

	mu     sync.Mutex
	closed bool // guarded by mu
}

// Version returns 1 or 2: the cgroup version the group lives in.
func (g *Group) Version() int { return g.version }

// JoinFiles opens, for writing, the v1 "tasks" file of the group in every
// hierarchy. A thread that writes "0" to each moves itself alone into the
// group; processes it then forks are born there. Unlike Add, such a move
// does not take the kernel's global thread-group lock, whose first use in
// a while waits for an RCU grace period (milliseconds). The kernel checks
// the permission against the credentials that opened the file, so a
// thread with fewer privileges can use them; the caller must close them
// before anything untrusted runs. On v2 it returns an error wrapping
// errors.ErrUnsupported: use Add.
func (g *Group) JoinFiles() ([]*os.File, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, fmt.Errorf("cgroup %q: join files: %w", g.name, os.ErrClosed)
	}
	return g.joinFiles()
}

// LeaveFiles opens, for writing, the v1 "tasks" file of the cgroup the
// group was made beneath (New's path is relative to it), in every
// hierarchy and in JoinFiles' order. A thread that joined the group
// through JoinFiles writes "0" to each to move itself out again, without
// the global lock, once the processes it forked are born: the group then
// empties when they end, without waiting for that thread. The same
// conditions as JoinFiles' hold; on v2 it returns an error wrapping
// errors.ErrUnsupported.
func (g *Group) LeaveFiles() ([]*os.File, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, fmt.Errorf("cgroup %q: leave files: %w", g.name, os.ErrClosed)
	}
	return g.leaveFiles()
}

// Add moves the process pid, with all its threads, into the group in
// every hierarchy. On error the process may be in some hierarchies and
// not others; the caller must then kill it.
func (g *Group) Add(pid int) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("cgroup %q: add: %w", g.name, os.ErrClosed)
	}
	if pid <= 0 {
		return fmt.Errorf("%w: pid %d", ErrInvalid, pid)
	}
	return g.add(pid)
}

// Stats returns the group's accounting.
func (g *Group) Stats() (Stats, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return Stats{}, fmt.Errorf("cgroup %q: stats: %w", g.name, os.ErrClosed)
	}
	return g.stats()
}

// Exists returns nil when the group's directory is still there in every
// hierarchy (a warm pool checks a parked sandbox's group before it hands
// it out), and an error naming the first that is not.
func (g *Group) Exists() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("cgroup %q: %w", g.name, os.ErrClosed)
	}
	for _, d := range g.dirs {
		fi, err := os.Lstat(d)
		if err != nil {
			return fmt.Errorf("cgroup %q: %w", g.name, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("cgroup %q: %s is not a directory", g.name, d)
		}
	}
	return nil
}

// Kill kills every process in the group with SIGKILL and waits until the
// group is empty, for at most KillTimeout. A process that forks while
// Kill runs is killed too: v2 writes cgroup.kill; v1 freezes the group,
// signals every process listed in cgroup.procs, thaws it, and repeats
// until it is empty. Killed processes that are children of this process
// leave the group when they exit, before they are reaped.
func (g *Group) Kill() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("cgroup %q: kill: %w", g.name, os.ErrClosed)
	}
	return g.kill()
}

// Close kills every process in the group, as Kill does, then removes the
// group's directories, and those of its ancestors that this process
// created and that no other group of this process still uses. After a
// successful Close, Close returns nil and the other methods an error
// wrapping os.ErrClosed. After a
// failed Close, Close may be called again.
func (g *Group) Close() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil
	}
	if err := g.kill(); err != nil {
		return err
	}
	if err := g.remove(); err != nil {
		return err
	}
	g.closed = true
	return nil
}

// FreezeTimeout bounds how long Freeze and Thaw wait for the kernel to
// report the group frozen or thawed.
const FreezeTimeout = 2 * time.Second

// Freeze stops every process in the group, as the cgroup freezer does: on
// v1 it writes FROZEN to freezer.state and waits until it reads FROZEN
// (FREEZING means a task has not stopped yet, and it tries again); on v2
// it writes 1 to cgroup.freeze and waits until cgroup.events reads
// "frozen 1". A group that is not frozen within FreezeTimeout is thawed
// again and the error names it. Without a freezer (no v1 freezer
// hierarchy; no cgroup.freeze, before Linux 5.2) the error wraps
// ErrUnavailable and says what to enable. Kill and Close work on a frozen
// group.
func (g *Group) Freeze() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("cgroup %q: freeze: %w", g.name, os.ErrClosed)
	}
	return g.freeze()
}

// Thaw lets the processes of a frozen group run again: v1 writes THAWED,
// v2 writes 0 to cgroup.freeze, and it waits, for at most FreezeTimeout,
// until the kernel reports the group thawed.
func (g *Group) Thaw() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return fmt.Errorf("cgroup %q: thaw: %w", g.name, os.ErrClosed)
	}
	return g.thaw()
}

// Frozen reports whether the kernel reports the group frozen (v1
// freezer.state FROZEN, v2 cgroup.events frozen 1).
func (g *Group) Frozen() (bool, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return false, fmt.Errorf("cgroup %q: frozen: %w", g.name, os.ErrClosed)
	}
	return g.frozen()
}

// Procs returns the PIDs of the group's processes (cgroup.procs of every
// hierarchy), sorted, without duplicates.
func (g *Group) Procs() ([]int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed {
		return nil, fmt.Errorf("cgroup %q: procs: %w", g.name, os.ErrClosed)
	}
	pids, err := g.procs()
	if err != nil {
		return nil, fmt.Errorf("cgroup %q: %w", g.name, err)
	}
	return pids, nil
}

// FrozenLeftover reports whether the group whose directories (one per
// hierarchy) are dirs is frozen by its own freezer: v2 cgroup.freeze
// reads 1, v1 freezer.state reads FROZEN (FREEZING is not frozen: some
// task still runs). Without a freezer file in any of dirs the error
// wraps ErrUnavailable. Every dir must be on a cgroup or cgroup2 file
// system, or the error wraps ErrInvalid.
func FrozenLeftover(dirs []string) (bool, error) { return frozenLeftover(dirs) }

// KillFrozen kills every process of a frozen group left behind by a
// process that died, and returns their PIDs. dirs are the group's
// directories, one per hierarchy. While the group is frozen no process
// in it can fork, and on v1 none can exit, so a PID read from its
// cgroup.procs names that process until it is thawed: KillFrozen reads
// the frozen group's cgroup.procs, refuses (ErrBusy) if any of dirs
// holds a child group or a process not in that list, opens a pidfd for
// each process, reads the list again to check that each is still there
// and the group still frozen, sends each SIGKILL through its pidfd (a
// PID reused meanwhile is never signalled), and only then thaws the
// group, so that the kills take effect. It waits, for at most
// KillTimeout, until every one of dirs is empty. A group that is not
// frozen is refused with an error wrapping ErrBusy. With dryRun it
// checks the same, returns the PIDs, and signals and thaws nothing.
func KillFrozen(dirs []string, dryRun bool) ([]int, error) { return killFrozen(dirs, dryRun) }
