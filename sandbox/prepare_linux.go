package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/internal/cleanup"
	"github.com/cordon-dev/cordon/internal/phase"
	"github.com/cordon-dev/cordon/sandbox/stage"
	"github.com/cordon-dev/cordon/tier"
	"golang.org/x/sys/unix"
)

// Prepared is a sandbox built up to the seam before its program is known:
// namespaces, root, mounts, the fs grants' binds and masks, the cgroup
// and its limits, init configured and waiting; the seccomp filter is
// assembled and the Landlock ABI probed. Start gives it its program,
// environment, workspace and streams (a Launch), decides the program
// under the prepared spec's grant set exactly as a cold run does, and
// starts it; Wait and Destroy are the Sandbox's. A Prepared runs at most
// one program: after Start it can only be waited for and destroyed.
//
// Package sandbox/pool keeps Prepared sandboxes warm.
type Prepared struct {
	sb *Sandbox
}

// Prepare builds a sandbox for the spec as Create does, but without its
// program: s.Argv, Env, Workspace, Inputs, Outputs, the streams and the
// Decided and Mounted callbacks must be empty (they are the Launch's). A
// grant set with egress rules is refused: the egress proxy records to
// one run's journal and cannot be chosen before the run is known. S4
// has no prepared form. The wall-clock limit starts at Start. ctx bounds
// the prepared sandbox's whole life, as Create's does.
func Prepare(ctx context.Context, s *Spec) (*Prepared, error) {
	if f := s.preparedFields(); f != "" {
		return nil, refusedf("a prepared sandbox's spec must leave %s empty: they are given to Start", f)
	}
	if s.Grants != nil && len(s.Grants.Egress) > 0 {
		return nil, refusedf("a grant set with egress rules cannot be prepared ahead of its run (the egress proxy is the run's): run it cold")
	}
	if s.Tier == tier.S4 {
		return nil, refusedf("an S4 run cannot be prepared: use Run")
	}
	c := *s
	c.deferred, c.goEarly = true, false
	sb, err := Create(ctx, &c)
	if err != nil {
		return nil, err
	}
	return &Prepared{sb: sb}, nil
}

// prepareDeferred is prepare for a prepared sandbox: the fs plan is made
// and the denied executables hidden, and the configuration names no
// program (initConfig.Deferred).
func (sb *Sandbox) prepareDeferred(fsp *fsPlan) (*initConfig, error) {
	s := sb.spec
	if fsp == nil {
		var err error
		if fsp, err = planFS(s.Grants, s.Tier); err != nil {
			return nil, err
		}
	}
	if err := fsp.hideDeniedOnPath(s.Grants.ExecDeny); err != nil {
		return nil, err
	}
	sb.launchFS = fsp
	// The names the grant set allows are resolved now, when their
	// decisions cannot depend on bytes: Start then resolves and hashes
	// only the program.
	names, err := planNames(grant.New(s.Grants), fsp)
	if err != nil {
		return nil, err
	}
	sb.launchNames = names
	abi, err := landlockABI()
	if err != nil {
		return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: %v", ErrUnavailable, err)}
	}
	filter, err := seccompFilter()
	if err != nil {
		return nil, err
	}
	cfg := &initConfig{
		UID: insideUID, GID: insideGID,
		Runtime: runtimeBinds(), NoExecDirs: existingDirs(programDirs),
		TmpBytes: s.Limits.TmpBytes, WorkBytes: s.Limits.WorkBytes,
		NoFile: s.Limits.NoFile, FileSize: s.Limits.FileSizeBytes, NProc: s.Limits.PIDs,
		LandlockABI: abi, Seccomp: filter, Hostname: hostname(sb.runID), Phases: phase.Enabled(),
		Deferred: true,
	}
	sb.imageConfig(cfg)
	cfg.Binds, cfg.ScratchExec, cfg.Masks = fsp.binds, fsp.scratchExec, fsp.masks
	if names != nil {
		// The names' executables are bound executable while the root is
		// built: every one of them is in the set Start sends (the program
		// and its interpreter are added to it), so none is executable
		// that a cold run of any program would not make executable.
		pre, err := removeDenied(s.Grants, nil, slices.Clone(names.files))
		if err != nil {
			return nil, err
		}
		slices.Sort(pre)
		cfg.ExecFiles = slices.Compact(pre)
		sb.launchBound = statBound(cfg.ExecFiles)
	}
	sb.res.LandlockABI = abi
	return cfg, nil
}

// Check reports whether the prepared sandbox can still be started: it
// has not been started or destroyed, its context has not ended, init is
// alive and has reported nothing since it was ready, and its cgroup (if
// it has one) is still there. Init must be in state S, R or D
// (/proc/PID/stat): a stopped (T) or traced (t) init would never answer
// the launch, and the run would wait out its wall clock for a program
// that never ran. A sandbox that fails the check can only be destroyed.
func (p *Prepared) Check() error {
	sb := p.sb
	if sb.state != stateCreated {
		return fmt.Errorf("%w: the prepared sandbox was started or destroyed", ErrLifecycle)
	}
	if err := sb.ctx.Err(); err != nil {
		return fmt.Errorf("sandbox: the prepared sandbox's context ended: %w", err)
	}
	select {
	case m, ok := <-sb.msgs:
		if !ok {
			return errors.New("sandbox: the prepared sandbox's init has exited")
		}
		return fmt.Errorf("sandbox: the prepared sandbox's init reported before it was started: %+v", m)
	default:
	}
	st, err := os.ReadFile("/proc/" + strconv.Itoa(sb.proc.pid()) + "/stat")
	if err != nil {
		return fmt.Errorf("sandbox: the prepared sandbox's init: %w", err)
	}
	i := lastIndexByte(st, ')')
	if i < 0 || i+2 >= len(st) {
		return errors.New("sandbox: the prepared sandbox's init: unreadable /proc stat")
	}
	switch st[i+2] {
	case 'S', 'R', 'D': // waiting for its launch, running, or in the kernel
	case 'Z', 'X':
		return errors.New("sandbox: the prepared sandbox's init is dead")
	default: // T (stopped), t (traced), or anything else: it would not answer its launch
		return fmt.Errorf("sandbox: the prepared sandbox's init is in state %q (stopped or traced), not S, R or D", st[i+2])
	}
	if sb.cg != nil {
		if err := sb.cg.Exists(); err != nil {
			return fmt.Errorf("sandbox: the prepared sandbox's cgroup: %w", err)
		}
	}
	return nil
}

// boundExec is an executable bound at Prepare and its host identity
// then.
type boundExec struct {
	path     string
	dev, ino uint64
	ok       bool // it could be stat'ed
}

// statBound records the host identity of each of files.
func statBound(files []string) []boundExec {
	out := make([]boundExec, len(files))
	for i, f := range files {
		out[i].path = f
		var st unix.Stat_t
		if unix.Stat(f, &st) == nil {
			out[i].dev, out[i].ino, out[i].ok = st.Dev, st.Ino, true
		}
	}
	return out
}

// replacedBound is the bound executables that are now another file on
// the host (a package upgrade or reinstall renames a new file over the
// old one): the kernel drops a bind whose host dentry is renamed over,
// so the name would show the new file in a noexec program directory and
// the warm run would fail with 126 where a cold run runs it. They are
// bound again at the launch, and Landlock allows the new inode: the run
// then executes what a cold run started now would (the program's bytes
// are hashed and decided at Start, as a cold run's are). A file that is
// gone is left out: its name shows nothing, as in a cold run.
func replacedBound(bound []boundExec) []string {
	var out []string
	for _, b := range bound {
		var st unix.Stat_t
		if unix.Stat(b.path, &st) != nil {
			continue
		}
		if !b.ok || st.Dev != b.dev || st.Ino != b.ino {
			out = append(out, b.path)
		}
	}
	return out
}

func lastIndexByte(b []byte, c byte) int {
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// Start checks the launch, decides its program under the prepared spec's
// grant set (calling l.Decided and l.Mounted as a cold run calls the
// spec's), stages the inputs and starts the program with the launch's
// environment and streams. ctx bounds the run from here on, with the
// context Prepare was given. The wall-clock limit starts now. On error
// the program has not started and the sandbox can only be destroyed.
func (p *Prepared) Start(ctx context.Context, l *Launch) error {
	sb := p.sb
	if err := p.Check(); err != nil {
		sb.state = stateDone
		return err
	}
	sb.state = stateDone // until Sandbox.Start says otherwise
	s := sb.spec
	switch {
	case len(l.Argv) == 0 || l.Argv[0] == "":
		return refusedf("no program to run")
	case (len(l.Inputs) > 0 || len(l.Outputs) > 0) && l.Workspace == "":
		return refusedf("inputs or outputs were declared without a workspace")
	case l.Wall < 0 || l.Wall > s.Limits.Wall:
		return refusedf("a launch's wall-clock limit of %s is outside the prepared limit of %s", l.Wall, s.Limits.Wall)
	}
	for _, in := range l.Inputs {
		if err := stage.CheckPath(in); err != nil {
			return refusedf("input %q: %v", in, err)
		}
	}
	for _, o := range l.Outputs {
		if err := stage.CheckPath(o); err != nil {
			return refusedf("output %q: %v", o, err)
		}
	}
	s.Argv, s.Env, s.Workspace, s.Inputs, s.Outputs, s.OutputsOptional = l.Argv, l.Env, l.Workspace, l.Inputs, l.Outputs, l.OutputsOptional
	s.Decided, s.Mounted = l.Decided, l.Mounted
	s.Stdin, s.Stdout, s.Stderr = l.Stdin, l.Stdout, l.Stderr
	sb.res.Start = time.Now()
	phase.Add("prepared: start")
	plan, env, err := decideIn(s, sb.launchFS, false, sb.launchNames)
	if err != nil {
		return err
	}
	lc := launchConfig{Argv: append([]string{filepath.Base(plan.program.Path)}, s.Argv[1:]...), Path: plan.program.Path, Env: env, ExecFiles: plan.execFiles,
		Rebind: replacedBound(sb.launchBound)}
	if len(lc.Rebind) > 0 {
		phase.Add("prepared: rebinding " + strconv.Itoa(len(lc.Rebind)) + " executable(s) replaced on the host while parked")
	}
	if !filepath.IsAbs(s.Argv[0]) {
		lc.Argv[0] = s.Argv[0]
	}
	b, err := json.Marshal(lc)
	if err != nil {
		return refusedf("configuring the launch: %v", err)
	}
	sb.launchMsg = append(b, '\n')
	sb.res.Program = plan.program
	phase.Add("prepared: decided")
	if err := sb.relayLaunch(l); err != nil {
		return refusedf("relaying the standard streams: %v", err)
	}
	sb.claimCtx = ctx
	wall := s.Limits.Wall
	if l.Wall > 0 {
		wall = l.Wall
	}
	sb.deadline.Reset(wall)
	sb.wallEnds = time.Now().Add(wall)
	sb.state = stateCreated
	return sb.Start()
}

// Wait is Sandbox.Wait.
func (p *Prepared) Wait() (*Result, error) { return p.sb.Wait() }

// Destroy is Sandbox.Destroy: it may be called at any point, and again.
func (p *Prepared) Destroy() error {
	if p == nil {
		return nil
	}
	return p.sb.Destroy()
}

// InitPID is the host pid of the prepared sandbox's init (for tests and
// the pool's health check).
func (p *Prepared) InitPID() int { return p.sb.proc.pid() }

// claimDone is ctx.Done(), or nil (never ready) for a nil ctx.
func claimDone(ctx context.Context) <-chan struct{} {
	if ctx == nil {
		return nil
	}
	return ctx.Done()
}

// launchPipes are a prepared sandbox's standard streams: child are
// init's ends (0, 1, 2), parent the ends Start relays through.
type launchPipes struct {
	child  [3]*os.File
	parent [3]*os.File // stdin's write end, stdout's and stderr's read ends
}

func (lp *launchPipes) closeChild() {
	for _, f := range lp.child {
		f.Close()
	}
}

// launchPipes makes the pipes, adding their closing to cu.
func (sb *Sandbox) launchPipes(cu *cleanup.Cleanup) (*launchPipes, error) {
	lp := &launchPipes{}
	for i := range 3 {
		r, w, err := os.Pipe()
		if err != nil {
			return nil, err
		}
		cu.Add(func() {
			r.Close()
			w.Close()
		})
		if i == 0 {
			lp.child[i], lp.parent[i] = r, w
		} else {
			lp.child[i], lp.parent[i] = w, r
		}
	}
	sb.launchIO = lp
	return lp, nil
}

// relayLaunch copies the launch's stdin into the sandbox's and the
// sandbox's stdout and stderr out to the launch's; sb.relayed closes when
// both outputs have ended. A file given as stdin is read through a relay
// that Wait stops (stdio_linux.go), never handed on.
func (sb *Sandbox) relayLaunch(l *Launch) error {
	lp := sb.launchIO
	in := l.Stdin
	if in != nil {
		r, relay, err := relayStdin(in)
		if err != nil {
			return err
		}
		if relay != nil {
			sb.stdin = relay
			sb.cu.Add(func() {
				relay.stop()
				relay.r.Close()
			})
		}
		in = r
	}
	if in == nil {
		lp.parent[0].Close() // /dev/null's EOF
	} else {
		go func() {
			_, _ = io.Copy(lp.parent[0], in)
			lp.parent[0].Close()
		}()
	}
	sb.relayed = make(chan struct{})
	done := make(chan struct{}, 2)
	for i, w := range []io.Writer{l.Stdout, l.Stderr} {
		if w == nil {
			w = io.Discard
		}
		src := lp.parent[i+1]
		go func() {
			_, _ = io.Copy(w, src)
			done <- struct{}{}
		}()
	}
	go func() {
		<-done
		<-done
		close(sb.relayed)
	}()
	return nil
}

// PrepareCodecs fills encoding/json's per-type caches for a prepared
// slot's launch configuration and its init's exit message, so that a
// claim does not wait while they are built; a resident exec server's warm
// process calls it before its caller comes. It depends on no input.
func PrepareCodecs() {
	_, _ = json.Marshal(launchConfig{})
	var m initMessage
	_ = json.Unmarshal([]byte(`{}`), &m)
}
