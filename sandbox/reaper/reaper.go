// Package reaper labels the host-side state of sandbox runs and removes
// what runs that died left behind.
//
// # What a run leaves on the host
//
// A run's sandbox lives in its own namespaces: its root is a tmpfs in
// init's mount namespace and its processes are init's PID namespace, so
// they end with init, and init dies with the cordon process that started
// it (PR_SET_PDEATHSIG). Two things stay on the host when that cordon
// process is killed before it cleans up (kill -9, a closed terminal):
// the run's cgroup directory in every hierarchy, and the run's record in
// the state directory (below). Nothing is mounted on the host's side.
//
// # Labels
//
// Every piece is labelled with the instance, the run and its owner:
//
//   - The instance is the cordon installation: InstanceID of its state
//     directory, 12 hex digits of SHA-256 of the directory's absolute
//     path. Two installations with different state directories have
//     different instances and never touch each other's runs.
//   - The run's cgroup is "cordon/INSTANCE/TENANT/NAME" beneath the
//     cordon process's own cgroup in every hierarchy, and NAME is
//     "RUNID-STARTED-PID-TICKS": the run ID, the run's start (Unix
//     seconds), and its owner: the cordon process's PID and its start
//     time in clock ticks since boot (field 22 of /proc/PID/stat), so
//     that a reused PID is not taken for the owner.
//   - The record, STATE/runs/RUNID.json, holds the same and the host's
//     boot ID (a record outlives a reboot; cgroups do not), and lists
//     the run's cgroup directories. It is written before the cgroup is
//     created and removed after the cgroup is, so a run whose cgroup is
//     placed beneath another cgroup than a later cordon process's own
//     (a v1 hierarchy where every process has a cgroup of its own) is
//     still found.
//
// # The sweep
//
// Sweep removes the leftovers of this instance's dead runs: runs found
// through the records in STATE/runs and through the labelled directories
// beneath this process's own cgroup's cordon/INSTANCE. A run is dead when
// its owner is gone (another boot, no such PID, or a PID whose start time
// differs, or a zombie) and none of its cgroup directories holds a
// process. A run whose owner lives is never touched, nor a cgroup that
// holds a process, nor anything not labelled with this instance: a
// recorded directory is removed only when its path ends in
// cordon/INSTANCE/TENANT/NAME as its record says and it is on a cgroup
// file system, and then only by rmdir(2), which the kernel refuses for a
// group that holds a process or a child group. Sweeps of one instance
// are serialised by an exclusive flock(2) on STATE/runs; a run holds it
// shared while it creates its cgroup, so that a sweep never removes the
// empty ancestor a new run is creating its group in.
//
// # Frozen runs
//
// A dead run whose cgroup holds processes is left alone, and so is one
// that is frozen ('cordon freeze'), whose processes cannot exit: SIGKILL
// stays pending until a thaw. Only Options.KillFrozen, which an operator
// asks for, kills a dead run's processes, and only those of a frozen
// cgroup (cgroup.KillFrozen: listed while frozen, so no PID is reused,
// killed, then thawed); the run is then removed as any other.
package reaper

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// RecordsDir is the directory, in the state directory, of run records.
const RecordsDir = "runs"

// InstanceID is the instance of the cordon installation whose state
// directory (an absolute, clean path) is stateDir.
func InstanceID(stateDir string) string {
	sum := sha256.Sum256([]byte("cordon instance\x00" + stateDir))
	return hex.EncodeToString(sum[:6])
}

// Owner is the process that owns a run, identified across PID reuse.
type Owner struct {
	PID int `json:"pid"`
	// Start is the process's start time in clock ticks after boot
	// (field 22 of /proc/PID/stat).
	Start uint64 `json:"start_ticks"`
	// Boot is the host's boot ID (/proc/sys/kernel/random/boot_id).
	Boot string `json:"boot_id"`
}

// Run is a run's label: what its cgroup's name and its record say.
type Run struct {
	Instance string `json:"instance"`
	ID       string `json:"run"`
	Tenant   string `json:"tenant"`
	// Started is when the run started, in Unix seconds.
	Started int64 `json:"started"`
	Owner   Owner `json:"owner"`
	// Cgroups are the run's cgroup directories, one per hierarchy.
	Cgroups []string `json:"cgroups"`
}

// The forms of a label's parts, checked byte by byte: compiling the
// equivalent regular expressions cost every cordon process (and every
// sandbox init, which links this package) about 0.2 ms at start.
//
//	validID      ^[A-Za-z0-9_]{1,64}$
//	validTenant  ^[A-Za-z0-9_][A-Za-z0-9_-]{0,63}$
//	validInst    ^[0-9a-f]{12}$
func validID(s string) bool { return len(s) >= 1 && len(s) <= 64 && all(s, isWord) }

func validTenant(s string) bool {
	return len(s) >= 1 && len(s) <= 64 && isWord(s[0]) && all(s[1:], func(c byte) bool { return isWord(c) || c == '-' })
}

func validInst(s string) bool {
	return len(s) == 12 && all(s, func(c byte) bool { return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' })
}

func isWord(c byte) bool {
	return 'A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_'
}

// all reports whether ok holds for every byte of s.
func all(s string, ok func(byte) bool) bool {
	for i := 0; i < len(s); i++ {
		if !ok(s[i]) {
			return false
		}
	}
	return true
}

// NewRun labels a new run of the instance whose state directory is
// stateDir, owned by this process and starting now. Its Cgroups are for
// the caller to fill in, from cgroup.Dirs(r.Group()).
func NewRun(stateDir, tenant, id string) (*Run, error) {
	self, err := Self()
	if err != nil {
		return nil, err
	}
	r := &Run{Instance: InstanceID(stateDir), ID: id, Tenant: tenant, Started: time.Now().Unix(), Owner: self}
	if err := r.check(); err != nil {
		return nil, err
	}
	return r, nil
}

func (r *Run) check() error {
	switch {
	case !validInst(r.Instance):
		return fmt.Errorf("reaper: malformed instance %q", r.Instance)
	case !validID(r.ID):
		return fmt.Errorf("reaper: malformed run ID %q", r.ID)
	case !validTenant(r.Tenant):
		return fmt.Errorf("reaper: malformed tenant %q", r.Tenant)
	case r.Started <= 0 || r.Owner.PID <= 0 || r.Owner.Start == 0:
		return fmt.Errorf("reaper: run %s: malformed start or owner", r.ID)
	}
	return nil
}

// Name is the name of the run's cgroup directory.
func (r *Run) Name() string {
	return fmt.Sprintf("%s-%d-%d-%d", r.ID, r.Started, r.Owner.PID, r.Owner.Start)
}

// Group is the run's cgroup path, relative to the cgroup it is created
// beneath (cgroup.New's path).
func (r *Run) Group() string {
	return "cordon/" + r.Instance + "/" + r.Tenant + "/" + r.Name()
}

// parseName reads a cgroup directory name written by Name.
func parseName(name string) (id string, started int64, pid int, ticks uint64, ok bool) {
	f := strings.Split(name, "-")
	if len(f) != 4 || !validID(f[0]) {
		return "", 0, 0, 0, false
	}
	var err1, err2, err3 error
	started, err1 = strconv.ParseInt(f[1], 10, 64)
	pid, err2 = strconv.Atoi(f[2])
	ticks, err3 = strconv.ParseUint(f[3], 10, 64)
	if err1 != nil || err2 != nil || err3 != nil || started <= 0 || pid <= 0 || ticks == 0 ||
		fmt.Sprintf("%s-%d-%d-%d", f[0], started, pid, ticks) != name {
		return "", 0, 0, 0, false
	}
	return f[0], started, pid, ticks, true
}

// Options shape a sweep.
type Options struct {
	// OlderThan, when positive, leaves runs that started less than this
	// long ago alone, dead or not.
	OlderThan time.Duration
	// DryRun reports what the sweep would remove and removes nothing.
	DryRun bool
	// Wait waits for another sweep of the instance, or for runs creating
	// their cgroups, to finish; without it a sweep that cannot take the
	// instance's lock at once does nothing and reports Skipped.
	Wait bool
	// KillFrozen kills the processes of a dead run whose cgroup is
	// frozen (cgroup.KillFrozen), then removes the run as a leftover. A
	// frozen process cannot exit, so the run's processes would otherwise
	// stay forever. It is the operator's choice ('cordon reap
	// --kill-frozen'), never the sweep at a run's start: an owner is
	// judged in this process's PID namespace, where a live owner in
	// another PID namespace looks dead.
	KillFrozen bool
}

// Leftover is one run the sweep looked at.
type Leftover struct {
	Run      string `json:"run"`
	Tenant   string `json:"tenant"`
	Started  int64  `json:"started"`
	OwnerPID int    `json:"owner_pid"`
	// Paths are what was removed (or, in a dry run, would be): the run's
	// cgroup directories, emptied ancestors of its own instance, and its
	// record. For a run left alone, the directories that remain.
	Paths []string `json:"paths"`
	// Killed are the PIDs (in the sweep's PID namespace) of the frozen
	// run's processes that Options.KillFrozen killed (or, in a dry run,
	// would kill).
	Killed []int `json:"killed,omitempty"`
	// Why says why a run was left alone: "owner alive", "holds
	// processes" (and whether it is frozen), "younger than --older-than", or an error.
	Why string `json:"why,omitempty"`
}

// Report is what a sweep did.
type Report struct {
	Instance string     `json:"instance"`
	Removed  []Leftover `json:"removed"`
	Kept     []Leftover `json:"kept"`
	// Skipped is set when another sweep or a starting run held the
	// instance's lock and Options.Wait was not set.
	Skipped bool `json:"skipped"`
	DryRun  bool `json:"dry_run"`
}

// Pending reports whether the instance whose state directory is stateDir
// has any run records: a run about to start sweeps only then (every run's
// cgroup is recorded before it is made, so no record means nothing of
// this instance's to remove), which keeps the sweep off the common path.
// An unreadable directory counts as pending, so the sweep says why.
func Pending(stateDir string) bool {
	f, err := os.Open(filepath.Join(stateDir, RecordsDir))
	if errors.Is(err, fs.ErrNotExist) {
		return false
	}
	if err != nil {
		return true
	}
	defer f.Close()
	names, err := f.Readdirnames(1)
	return err != nil && !errors.Is(err, io.EOF) || len(names) > 0
}
