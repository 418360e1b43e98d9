// Package sandbox runs one untrusted command contained, as specified in
// docs/sandbox.md: new user, mount, PID, network, IPC, UTS and cgroup
// namespaces; a fresh tmpfs root entered with pivot_root; a read-only
// runtime; a staged workspace built from declared inputs only, of which
// only declared outputs come back; no capabilities, no_new_privs, a new
// session; a seccomp filter (package sandbox/seccomp); Landlock; rlimits
// and cgroup limits (package sandbox/cgroup); a wall-clock timeout that
// kills the whole run; and exec control by content hash at the kernel
// boundary.
//
// The contract is fail-closed. Create probes every facility the tier
// needs before anything runs and refuses, naming each missing one;
// nothing is ever run with weaker isolation than the tier promises.
//
// Run is one whole run. A Sandbox gives its lifecycle step by step, as
// runc does: Create (namespaces, root, cgroup; init ready, the program
// not started), Start, Wait, and Destroy, which undoes whatever was done.
//
// Linux only: on every other system Run and Create return an error
// wrapping errors.ErrUnsupported.
//
// A binary that uses this package re-executes itself as the sandbox's
// init process; the package's init function recognises that invocation
// (argv[0] is InitArg0) and never returns to the program's main.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/cordon-dev/cordon/evidence/canon"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/internal/phase"
	"github.com/cordon-dev/cordon/sandbox/stage"
	"github.com/cordon-dev/cordon/tier"
)

// InitArg0 is argv[0] of the re-executed binary acting as sandbox init.
const InitArg0 = "cordon-sandbox-init"

// SpawnerArg0 is argv[0] of the re-executed binary acting as a spawner
// (spawn_linux.go), which starts sandbox inits for the process that
// started it.
const SpawnerArg0 = "cordon-sandbox-spawner"

// Exit statuses of a run that did not produce the program's own status,
// as timeout(1) and env(1) use them.
const (
	ExitTimeout     = 124 // the wall-clock limit was reached
	ExitRefused     = 125 // cordon refused or failed to set the run up
	ExitCannotExec  = 126 // the program exists but could not be executed
	ExitNotFound    = 127 // the program was not found in the runtime
	exitSignalShift = 128 // a program killed by signal N exits 128+N
)

var (
	// ErrUnavailable wraps a refusal because this host lacks a kernel
	// facility the requested tier needs.
	ErrUnavailable = errors.New("sandbox: required facility unavailable")
	// ErrRefused wraps a refusal of the spec itself: a grant, a path or
	// a limit that does not allow the run.
	ErrRefused = errors.New("sandbox: refused")
	// ErrNotFound is returned when the program is not in the runtime.
	ErrNotFound = errors.New("sandbox: program not found")
	// ErrCannotExec is returned when the program exists but is not an
	// executable regular file.
	ErrCannotExec = errors.New("sandbox: program cannot be executed")
	// ErrLifecycle wraps the error of a Sandbox method called out of
	// order: Start twice or after Destroy, Wait before Start, twice or
	// after Destroy.
	ErrLifecycle = errors.New("sandbox: lifecycle call out of order")
)

// Run runs the spec's program in a new sandbox and returns what it did:
// Create, Start, Wait, and Destroy whatever happens. An error means the
// program did not run to completion inside the sandbox (Result is nil)
// or its outputs could not be copied back (Result.OutputsErr). A refusal
// is an *ExitError with Code 125, 126 or 127.
func Run(ctx context.Context, s *Spec) (*Result, error) {
	if s.Tier == tier.S4 {
		return runGVisor(ctx, s) // gvisor_linux.go: S4 has no step-by-step lifecycle
	}
	phase.Add("sandbox: run")
	early := *s
	early.goEarly = s.Workspace == ""
	sb, err := Create(ctx, &early)
	if err != nil {
		return nil, err
	}
	// A cgroup that cannot be removed does not change what the run did.
	defer func() {
		_ = sb.Destroy()
		phase.Add("sandbox: destroyed")
	}()
	if err := sb.Start(); err != nil {
		return nil, err
	}
	res, err := sb.Wait()
	phase.Add("sandbox: waited")
	return res, err
}

// Limits bound one run. Every member must be positive; Spec.Check
// refuses zero or negative values rather than reading them as "none".
type Limits struct {
	Wall          time.Duration // wall clock, from start to kill
	MemoryBytes   int64         // cgroup memory limit, swap included
	PIDs          int64         // cgroup pids limit (and RLIMIT_NPROC)
	CPUMillis     int64         // CPU bandwidth, 1000 = one CPU
	NoFile        int64         // RLIMIT_NOFILE
	FileSizeBytes int64         // RLIMIT_FSIZE
	TmpBytes      int64         // size of the tmpfs at /tmp
	WorkBytes     int64         // size of the tmpfs at /work
	Stage         stage.Limits  // inputs in and outputs out
	// CgroupOptional lets the run go without a cgroup where this host
	// gives none (CgroupLimits: a rootless caller without a delegated
	// cgroup v2 subtree); MemoryBytes and CPUMillis are then not enforced,
	// and PIDs only as RLIMIT_NPROC. Without it such a run is refused.
	// LimitsFor sets it exactly when the grant set limits neither memory
	// nor CPU; it never widens what a grant set promises.
	CgroupOptional bool
}

// LimitsFor returns DefaultLimits with what the grant set's limits name
// put in place: wall clock, memory, PIDs and file size. Grant limits the
// sandbox cannot enforce (cpu_ms, energy_uj, max_runs) are an error,
// never ignored. The default memory and CPU limits are optional where
// the host gives the run no cgroup (Limits.CgroupOptional) unless the
// grant set names a memory limit.
func LimitsFor(gs *grant.Set) (Limits, error) {
	l := DefaultLimits()
	g := gs.Limits
	switch {
	case g.CPUMS != nil:
		return l, errors.New("limits.cpu_ms is not enforced by the sandbox yet; remove it or use wall_ms")
	case g.EnergyUJ != nil:
		return l, errors.New("limits.energy_uj is not enforced by the sandbox yet")
	case g.MaxRuns != nil:
		return l, errors.New("limits.max_runs is not enforced by the sandbox yet")
	}
	if g.WallMS != nil {
		l.Wall = time.Duration(*g.WallMS) * time.Millisecond
	}
	if g.MemoryBytes != nil {
		l.MemoryBytes = *g.MemoryBytes
	}
	l.CgroupOptional = g.MemoryBytes == nil
	if g.PIDs != nil {
		l.PIDs = *g.PIDs
	}
	if g.FileSizeBytes != nil {
		l.FileSizeBytes = *g.FileSizeBytes
	}
	return l, nil
}

// DefaultLimits are the limits of a run whose grant set names none.
func DefaultLimits() Limits {
	return Limits{
		Wall:          10 * time.Minute,
		MemoryBytes:   1 << 30,
		PIDs:          256,
		CPUMillis:     1000,
		NoFile:        1024,
		FileSizeBytes: 256 << 20,
		TmpBytes:      256 << 20,
		WorkBytes:     512 << 20,
		Stage:         stage.DefaultLimits(),
	}
}

// Spec describes one run. Programs, paths and grants are the caller's
// words; Run resolves and checks all of them before anything starts.
type Spec struct {
	// Argv is the command: Argv[0] is a program name resolved in the
	// runtime's PATH, or an absolute path inside the runtime.
	Argv []string
	// Grants is the run's grant set; it must require exactly Tier.
	Grants *grant.Set
	// Tier is S2 (single tenant), S3 (multi-tenant) or S4 (gVisor, Run
	// only).
	Tier tier.Tier
	// Tenant names the tenant at S3 ("" at S2).
	Tenant string
	// StateDir holds cordon's per-tenant state (uid/gid allocations and
	// run directories). It must be a directory owned by the invoking
	// user and not writable by others.
	StateDir string
	// Workspace is the host directory inputs come from and outputs go
	// to. Inputs and Outputs are paths relative to it.
	Workspace       string
	Inputs, Outputs []string
	// OutputsOptional makes Outputs exact files the program may or may
	// not make (stage.OutPresent): missing ones are skipped, a directory
	// at one refuses the copy-back. Otherwise every output must exist and
	// may be a directory (stage.Out).
	OutputsOptional bool
	// Env holds the values of the environment variables the grant set
	// names (name → value); a name the grants do not list is refused.
	Env map[string]string
	// Egress serves the program's network connections when the grant set
	// has egress rules, and must then be set: the program reaches it, and
	// nothing else, through the forwarder at 127.0.0.1:ProxyPort that
	// HTTP_PROXY and its relatives name. Without egress rules the run has
	// no network at all and Egress is not used.
	Egress Egress
	// Decided, if not nil, is called with the program's exec decision
	// (an allowance) before the program starts; an error refuses the run,
	// so a caller that must record the decision never runs unrecorded.
	Decided DecisionFunc
	// Mounted, if not nil, is called after Decided with every change the
	// grant set's fs rules make to the sandbox's file system (host paths
	// bound, /work or /tmp made executable, deny.fs paths hidden), when
	// there is any, before the program starts; an error refuses the run.
	Mounted MountFunc
	// Limits bound the run.
	Limits Limits
	// Stdin, Stdout and Stderr are the program's standard streams; nil
	// means /dev/null inside the sandbox. Anything else, an *os.File
	// included, is copied through a pipe: the program never receives a
	// terminal or any other of cordon's files. A file given as Stdin is
	// read only while the program runs.
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	// Image, if not nil, is the run's runtime in place of the host's
	// (image.go); S2 and S3 only.
	Image *ImageRuntime
	// Control, if not nil, can freeze and thaw the running program
	// (control.go); S2 and S3 with a cgroup only, and never a pooled run.
	Control *Control
	// Spawner, if not nil, starts init in place of this process
	// (spawn_linux.go): a large process's fork is costly. S2 and S3, not
	// Prepare.
	Spawner *Spawner

	// goEarly is set by Run only, when Start has nothing to stage (no
	// workspace): Create then tells init to go with its configuration,
	// so that init starts the program as soon as its root is built
	// instead of waiting for a round trip through the parent. Create
	// alone never starts the program.
	goEarly bool
	// deferred is set by Prepare only: the program, its environment, its
	// workspace and its streams come later, with Prepared.Start (Launch).
	deferred bool
}

// Egress decides and serves network connections the sandboxed program
// opens to its proxy (package egress implements it). ServeConn owns c and
// closes it; it must return once c is closed by its peer or ctx ends.
type Egress interface {
	ServeConn(ctx context.Context, c net.Conn)
}

// DecisionFunc receives the program's exec decision before the program
// starts (Spec.Decided); an error refuses the run.
type DecisionFunc func(grant.Decision) error

// Result is what a run did.
type Result struct {
	Tier     tier.Tier
	GrantsID canon.ID
	Program  Program // what ran
	// ExitCode is the program's exit status, 128+N if it was killed by
	// signal N, or ExitTimeout.
	ExitCode int
	Signal   int  // the signal that killed it, or 0
	TimedOut bool // the wall-clock limit was reached and the run killed
	OOMKills int64
	// Resources, read from the run's own cgroup.
	CPUNanos        int64
	PeakMemoryBytes int64
	Start, End      time.Time
	Inputs, Outputs []stage.File
	// OutputsErr is set when the program finished but copy-back was
	// refused; then Outputs is empty and the workspace is unchanged.
	OutputsErr error
	// LandlockABI is the Landlock ABI the run was restricted with.
	LandlockABI int
	// HostUID is the host uid the program ran as: in the tenant's range,
	// or rootless in the caller's subordinate range.
	HostUID int
}

// Program is the executable a run started, as decided before the start.
type Program struct {
	Path     string   // absolute path in the runtime (same inside and out)
	B3       canon.ID // BLAKE3 of its bytes
	Decision grant.Decision
}

// Wall is the duration of the run.
func (r *Result) Wall() time.Duration { return r.End.Sub(r.Start) }

// ExitError reports a run that could not start the program; Code is 125,
// 126 or 127.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string { return e.Err.Error() }
func (e *ExitError) Unwrap() error { return e.Err }

func refusedf(format string, args ...any) error {
	return &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: "+format, append([]any{ErrRefused}, args...)...)}
}
