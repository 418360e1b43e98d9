package sandbox

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/cordon-dev/cordon/internal/cleanup"
	"github.com/cordon-dev/cordon/internal/phase"
	"github.com/cordon-dev/cordon/sandbox/cgroup"
	"github.com/cordon-dev/cordon/sandbox/reaper"
	"github.com/cordon-dev/cordon/sandbox/seccomp"
	"github.com/cordon-dev/cordon/sandbox/stage"
	"github.com/cordon-dev/cordon/tier"
)

// Sandbox is one run's sandbox through its life, as runc's container
// is: Create builds it up to the point where init waits for the word to
// start; Start stages the inputs and starts the program; Wait collects
// the result; Destroy undoes everything Create and Start did. Its
// methods must not be called concurrently. To end a sandbox early,
// cancel the context given to Create (Wait then returns its error), or,
// when no Wait is in progress, call Destroy.
type Sandbox struct {
	// ctx bounds the sandbox's whole life, as exec.CommandContext's
	// context bounds a command's (an exception to "no contexts in
	// structs"): the egress bridge serves connections under it, and
	// Create and Wait stop waiting for init when it ends.
	ctx      context.Context
	spec     *Spec
	runID    string
	hostBase int
	ids      *rootlessIDs  // a rootless run's ids (idmap_linux.go), or nil as root
	cg       *cgroup.Group // nil in a rootless run without cgroup limits (CgroupLimits)
	proc     initProc      // sandbox init (spawn_linux.go)
	img      *imageRoot    // the image runtime (image_linux.go); nil: the host's
	ctl      *os.File      // parent → init: 'g', then EOF (protocol.go)
	msgs     <-chan initMessage
	deadline *time.Timer   // the wall-clock limit
	wallEnds time.Time     // when deadline fires, unless a freeze paused it (control_linux.go)
	wallLeft time.Duration // while frozen: what was left of the wall-clock limit
	work     *os.File      // the sandbox's /work, through init's root
	ws       *os.File      // the host workspace, or nil
	stdin    *stdinRelay   // relays Spec.Stdin when it is a file, or nil
	fs       *fsPlan       // the fs grants' plan, or nil without fs rules
	res      *Result
	// A prepared sandbox's (Prepare): the fs plan its program is decided
	// in, init's standard streams (the parent's ends), the launch line
	// Start sends in place of 'g', the claim's context, and the relays
	// of the streams, done when both outputs are copied.
	launchFS    *fsPlan
	launchNames *preparedNames
	launchBound []boundExec // the executables bound at Prepare, as they were on the host
	launchIO    *launchPipes
	launchMsg   []byte
	claimCtx    context.Context
	relayed     chan struct{}

	state  lifeState
	waited bool // init has been waited for: the undo must not wait again
	goSent bool // Create told init to go already (Spec.goEarly)
	// cgRemoving is closed when the cgroup's removal, started by
	// removeCgroup, has ended; nil until it starts.
	cgRemoving chan struct{}
	// cu undoes what Create and Start did, the last step first.
	cu         cleanup.Cleanup
	destroyErr error
}

// lifeState is where a Sandbox is in its life.
type lifeState int

const (
	stateCreated   lifeState = iota // init is ready; the program has not started
	stateStarted                    // init was told to start the program
	stateDone                       // Wait returned, or Start failed
	stateDestroyed                  // Destroy was called
)

// testHookCreate, when set by a test, is called at the named steps of
// Create; an error it returns fails Create there, as a real failure
// would.
var testHookCreate func(sb *Sandbox, step string) error

func (sb *Sandbox) hook(step string) error {
	if testHookCreate == nil {
		return nil
	}
	return testHookCreate(sb, step)
}

// Create checks the spec, probes the host, and builds the sandbox up to
// the point where init has built the root and waits to start the
// program: it allocates the tenant's ids, starts init in its new
// namespaces while it creates the run's cgroup and decides the program
// (calling Spec.Decided), hands init the cgroup and its configuration
// and waits until init reports ready. It never starts the program. On
// error nothing it did remains (the tenant's id range, recorded once,
// stays allocated); the errors are Run's.
//
// A Sandbox that Create returns must be destroyed with Destroy, whatever
// else happens. ctx bounds the sandbox's whole life (see Sandbox). The
// wall-clock limit, Spec.Limits.Wall, starts when Create hands init its
// configuration, so that time before Start counts against it.
func Create(ctx context.Context, s *Spec) (*Sandbox, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if s.Tier == tier.S4 {
		return nil, refusedf("an S4 run has no step-by-step lifecycle: use Run")
	}
	if err := Probe(s.Tier); err != nil {
		return nil, &ExitError{Code: ExitRefused, Err: err}
	}
	phase.Add("create: probed")
	tenant := s.Tenant
	if s.Tier == tier.S2 {
		tenant = singleTenant
	}
	// As root the tenant's range comes from the host-wide registry;
	// rootless, the caller's subordinate range is its own (idmap_linux.go).
	sb := &Sandbox{ctx: ctx, spec: s, runID: newRunID()}
	cgroupErr := CgroupLimits()
	if os.Geteuid() == 0 {
		ts, err := allocateTenant(s.StateDir, tenant)
		if err != nil {
			return nil, refusedf("tenant %q: %v", tenant, err)
		}
		sb.hostBase = ts.base
	} else {
		// The state directory holds only run records rootless; it is
		// checked as root's is.
		if err := checkStateDir(s.StateDir); err != nil {
			return nil, refusedf("%v", err)
		}
		var err error
		if sb.ids, err = callerIDs(); err != nil {
			return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: rootless: %v", ErrUnavailable, err)}
		}
		if cgroupErr != nil {
			if err := checkUncgrouped(s, cgroupErr); err != nil {
				return nil, err
			}
		}
	}
	// Remove what this installation's dead runs left behind, first, when
	// it has any run records (one directory read when it has none): a
	// sweep costs a few directory reads, and is skipped while another
	// sweep or a starting run holds the lock. What it cannot remove
	// stays for the next one, or for 'cordon reap'.
	phase.Add("create: tenant")
	if reaper.Pending(s.StateDir) {
		_, _ = reaper.Sweep(s.StateDir, reaper.Options{})
	}
	sb.res = &Result{Tier: s.Tier, GrantsID: s.Grants.ID(), HostUID: sb.hostBase + insideUID}
	if sb.ids != nil {
		sb.res.HostUID = sb.ids.programUID()
	}

	phase.Add("create: swept")
	var cu cleanup.Cleanup
	defer cu.Clean() // undoes every step below unless Create succeeds

	// The run's cgroup is labelled with this installation, the run and
	// this process (package reaper), and recorded in the state directory
	// before it is made, so that a sweep finds it if this process dies.
	label, err := reaper.NewRun(s.StateDir, tenant, sb.runID)
	if err != nil {
		return nil, refusedf("labelling the run: %v", err)
	}
	if cgroupErr == nil {
		if label.Cgroups, err = cgroup.Dirs(label.Group()); err != nil {
			return nil, refusedf("cgroup: %v", err)
		}
	}
	phase.Add("create: labelled")
	release, err := reaper.Begin(s.StateDir, label)
	if err != nil {
		return nil, refusedf("%v", err)
	}
	cu.Add(func() {
		if sb.destroyErr == nil { // the cgroup is gone; else a sweep retries
			_ = reaper.End(s.StateDir, label)
		}
	})
	// The cgroup is made while init's Go runtime starts (startInit starts
	// the making once the kernel has started init, and waits for it
	// before init may run anything of the program's): its five v1
	// hierarchies cost about 0.5 ms, while the parent would otherwise
	// only wait.
	made := &cgroupMaking{done: make(chan struct{})}
	made.start = func() {
		go func() {
			defer close(made.done)
			defer release()
			if cgroupErr != nil {
				return // rootless without a cgroup: Limits.CgroupOptional was checked
			}
			cg, err := cgroup.New(label.Group(), cgroup.Limits{
				MemoryBytes: s.Limits.MemoryBytes, PIDs: s.Limits.PIDs, CPUMillis: s.Limits.CPUMillis,
			})
			if err != nil {
				made.err = refusedf("cgroup: %v", err)
				return
			}
			phase.Add("create: cgroup (in parallel)")
			sb.cg = cg
		}()
	}
	cu.Add(func() {
		made.once.Do(func() { // never started: there is no cgroup
			release()
			close(made.done)
		})
		<-made.done
		if sb.cg == nil {
			return
		}
		if sb.cgRemoving == nil {
			sb.removeCgroup()
		}
		<-sb.cgRemoving
	})
	if err := sb.startInit(&cu, made); err != nil {
		return nil, err
	}
	sb.cu = cleanup.Make(cu.Release())
	sb.state = stateCreated
	return sb, nil
}

// cgroupMaking is the run's cgroup being made: done is closed when
// Sandbox.cg is set, or err is.
type cgroupMaking struct {
	once  sync.Once // runs start, or, if it never ran, closes done
	start func()
	done  chan struct{}
	err   error
}

// startInit starts init, configures it and waits for it to report ready,
// adding the undo of each step to cu. The cgroup is being made meanwhile
// (made); startInit hands it to init before the configuration.
func (sb *Sandbox) startInit(cu *cleanup.Cleanup, made *cgroupMaking) error {
	s := sb.spec
	pipe := func() (r, w *os.File, err error) {
		if r, w, err = os.Pipe(); err == nil {
			cu.Add(func() {
				r.Close()
				w.Close()
			})
		}
		return r, w, err
	}
	cfgR, cfgW, err := pipe()
	if err != nil {
		return err
	}
	ctlR, ctlW, err := pipe()
	if err != nil {
		return err
	}
	stR, stW, err := pipe()
	if err != nil {
		return err
	}
	sb.ctl = ctlW

	attr := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
			syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS, // the cgroup namespace: see startProgram
		Setsid:    true,
		Pdeathsig: syscall.SIGKILL,
	}
	// Map the tenant's whole range; init becomes inside-root (host uid
	// hostBase) with no supplementary groups, the program uid 1000.
	// Rootless, the helpers map the ids once init has started
	// (rootlessInit).
	if sb.ids == nil {
		attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: sb.hostBase, Size: rangeSize}}
		attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: sb.hostBase, Size: rangeSize}}
		attr.GidMappingsEnableSetgroups = true
		attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	}
	// On cgroup v1, init's thread joins the run's cgroup itself through
	// files opened here, just before it forks the program: a thread that
	// moves itself does not wait for the kernel's global thread-group
	// lock. The cgroup is made while init starts, so the files go to init
	// afterwards, over a socket (fd 7). Elsewhere the parent moves init
	// (Add, below).
	joinParent, joinChild, err := joinPair()
	if err != nil {
		return refusedf("cgroup: %v", err)
	}
	cu.Add(func() {
		joinParent.Close()
		joinChild.Close()
	})
	// Execute cordon through a descriptor: the sandbox's host uid may not
	// traverse the directory the binary lives in. The descriptor is the
	// last of init's (fd 8+b+i, protocol.go); it must be one of the files the child is
	// given, or the child's dup2 of those could land on it.
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return refusedf("opening cordon's own executable: %v", err)
	}
	cu.Add(func() { self.Close() })
	egress := len(s.Grants.Egress) > 0
	var bridgeParent, bridgeChild *os.File
	if egress {
		if bridgeParent, bridgeChild, err = bridgePair(); err != nil {
			return refusedf("%v", err)
		}
		cu.Add(func() {
			bridgeParent.Close()
			bridgeChild.Close()
		})
	}
	// The program never gets one of cordon's files as a stream
	// (stdio_linux.go): files are relayed through pipes.
	stdin, relay, err := relayStdin(s.Stdin)
	if err != nil {
		return refusedf("relaying stdin: %v", err)
	}
	if relay != nil {
		sb.stdin = relay
		cu.Add(func() {
			relay.stop()
			relay.r.Close()
		})
	}
	// The fs grants' host paths are opened here, before init starts,
	// and passed to it after the cgroup socket (fsgrant_linux.go). A grant
	// set without fs rules skips this.
	trees, err := sb.openFS()
	if err != nil {
		return err
	}
	cu.Add(func() {
		for _, t := range trees {
			t.Close()
		}
	})
	files := append([]*os.File{cfgR, ctlR, stW, bridgeChild, joinChild}, trees...)
	img, closeImg, err := sb.openImage() // image_linux.go: the image runtime's root, if any
	if err != nil {
		return err
	}
	cu.Add(closeImg)
	files = append(files, img...)
	files = append(files, self)
	cmd := &exec.Cmd{
		Path: "/proc/self/fd/" + strconv.Itoa(2+len(files)),
		Args: []string{InitArg0},
		// Init gets no environment of cordon's (initEnv).
		Env:         initEnv,
		Stdin:       stdin,
		Stdout:      hideFile(s.Stdout),
		Stderr:      hideFile(s.Stderr),
		ExtraFiles:  files,
		SysProcAttr: attr,
	}
	if sb.ids != nil {
		cmd.Args = []string{InitArg0, rootlessWait, strconv.Itoa(2 + len(files))}
	}

	// Decide the program while the kernel creates init's namespaces.
	var (
		cfg     *initConfig
		prepErr error
	)
	prepared := make(chan struct{})
	go func() {
		defer close(prepared)
		phase.Add("create: deciding (in parallel)")
		cfg, prepErr = sb.prepare()
		phase.Add("create: decided (in parallel)")
	}()
	cu.Add(func() { <-prepared }) // never return while prepare still writes res
	if s.deferred {
		// A prepared sandbox's streams are pipes made now, whose other
		// ends Start relays to the Launch's (never one of cordon's files).
		lp, err := sb.launchPipes(cu)
		if err != nil {
			return refusedf("making the sandbox's standard streams: %v", err)
		}
		cmd.Stdin, cmd.Stdout, cmd.Stderr = lp.child[0], lp.child[1], lp.child[2]
	}

	// Pdeathsig fires when the thread that started init exits. Init is
	// started from a goroutine that keeps its thread locked until the
	// sandbox is undone: no other goroutine can end that thread. The
	// goroutine never unlocks it, so it ends with the goroutine: it
	// starts init as the run's owner (asNamespaceOwner). A spawner does
	// the same in its own process (spawnInit), until release.
	started := make(chan error, 1)
	release := make(chan struct{})
	var spawned *spawnedInit
	if s.Spawner != nil {
		sb.res.Start = time.Now()
		phase.Add("create: starting init (spawner)")
		owner := -1
		if sb.ids == nil {
			owner = sb.hostBase
		}
		var err error
		spawned, err = s.Spawner.start(sb.ctx, cmd, owner)
		started <- err
	} else {
		go func() {
			runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
			sb.res.Start = time.Now()
			phase.Add("create: starting init")
			var err error
			if sb.ids == nil {
				err = asNamespaceOwner(sb.hostBase)
			}
			if err == nil {
				err = cmd.Start()
			}
			started <- err
			if err == nil {
				<-release
			}
		}()
	}
	err = <-started
	phase.Add("create: init started")
	if err == nil {
		made.once.Do(made.start)
	}
	cfgR.Close()
	ctlR.Close()
	stW.Close()
	joinChild.Close()
	if relay != nil {
		relay.r.Close() // init has its copy
	}
	if sb.launchIO != nil {
		sb.launchIO.closeChild() // init has its copies
	}
	if err != nil {
		return refusedf("starting sandbox init: %v", err)
	}
	if spawned != nil {
		sb.proc = spawned
		cu.Add(spawned.release)
	} else {
		sb.proc = execInit{cmd}
		cu.Add(func() { close(release) })
	}
	if egress {
		bridgeChild.Close()
		wait := serveBridge(sb.ctx, bridgeParent, s.Egress)
		// Added before the kill of init below, so it runs after it:
		// init's exit closes the bridge, and with it the accept loop.
		cu.Add(func() { waitBounded(wait, 5*time.Second) })
	}
	cu.Add(func() {
		if !sb.waited {
			_ = sb.proc.kill()
			_, _ = sb.proc.wait()
		}
	})

	if sb.ids != nil {
		if err := sb.ids.mapIDs(sb.ctx, sb.proc.pid()); err != nil {
			return &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: rootless: mapping the sandbox's ids: %v", ErrUnavailable, err)}
		}
		if err := sb.proc.alive(); err != nil {
			return refusedf("rootless: mapping the sandbox's ids: %v", err)
		}
	}

	msgs := make(chan initMessage, 4)
	sb.msgs = msgs
	go func() {
		defer close(msgs)
		sc := bufio.NewScanner(stR)
		sc.Buffer(make([]byte, 64<<10), 64<<10)
		for sc.Scan() {
			var m initMessage
			if json.Unmarshal(sc.Bytes(), &m) != nil {
				m = initMessage{Error: "sandbox init sent a malformed message", Code: ExitRefused}
			}
			msgs <- m
		}
	}()
	if err := sb.hook("init started"); err != nil {
		return err
	}

	<-made.done
	if made.err != nil {
		return made.err
	}
	cg := sb.cg
	if err := sb.hook("cgroup"); err != nil {
		return err
	}
	var joins []*os.File
	if cg != nil { // nil: a rootless run without a cgroup (Limits.CgroupOptional)
		joins, err = cg.JoinFiles()
		if err != nil && !errors.Is(err, errors.ErrUnsupported) {
			return refusedf("cgroup: %v", err)
		}
	}
	// With each join file goes the file that leaves the cgroup again:
	// init's thread leaves once the program is born, so that the cgroup
	// empties when the program's processes end, not when init does.
	var leaves []*os.File
	if len(joins) > 0 {
		if leaves, err = cg.LeaveFiles(); err != nil {
			for _, f := range joins {
				f.Close()
			}
			return refusedf("cgroup: %v", err)
		}
	}
	// Init gets its own copies of the files. Without them (cgroup v2),
	// move init here, in the background: a move can wait for an RCU grace
	// period. Init runs nothing of the program's before 'g'.
	err = sendFiles(joinParent, slices.Concat(joins, leaves))
	for _, f := range slices.Concat(joins, leaves) {
		f.Close()
	}
	joinParent.Close()
	if err != nil {
		return refusedf("handing init the run's cgroup: %v", err)
	}
	var addErr error
	added := make(chan struct{})
	if len(joins) > 0 || cg == nil {
		close(added)
	} else {
		go func() {
			defer close(added)
			addErr = cg.Add(sb.proc.pid())
			if addErr == nil {
				addErr = sb.proc.alive()
			}
		}()
	}
	cu.Add(func() { <-added })
	<-prepared
	if prepErr != nil {
		return prepErr
	}
	if err := sb.hook("prepared"); err != nil { // the program and the fs grants are decided
		return err
	}
	cfg.CgroupFiles = len(joins)
	cfg.Rootless = sb.ids != nil
	if egress {
		cfg.Egress = true
		cfg.Env = append(cfg.Env, proxyEnv()...)
	}
	if err := json.NewEncoder(cfgW).Encode(cfg); err != nil {
		return refusedf("configuring sandbox init: %v", err)
	}
	cfgW.Close()
	phase.Add("create: configured")
	if s.goEarly && len(joins) > 0 {
		// Run, with nothing to stage: init reads 'g' once its root is
		// built. On v1 it joins the cgroup itself before it forks the
		// program (without join files the parent moves it, and 'g' waits
		// for that in Start).
		if _, err := sb.ctl.Write([]byte{'g'}); err != nil {
			return refusedf("starting the run: %v", err)
		}
		sb.goSent = true
	}

	sb.deadline, sb.wallEnds = time.NewTimer(s.Limits.Wall), time.Now().Add(s.Limits.Wall)
	cu.Add(func() { sb.deadline.Stop() })
	if _, err := sb.next(); err != nil { // ready
		return err
	}
	if s.deferred {
		sb.deadline.Stop() // a prepared sandbox's limit runs from Start
	}
	phase.Add("create: init ready")
	<-added
	if addErr != nil {
		return refusedf("cgroup: %v", addErr)
	}
	if err := sb.hook("ready"); err != nil {
		return err
	}
	work, err := os.Open("/proc/" + strconv.Itoa(sb.proc.pid()) + "/root/work")
	if err != nil {
		return refusedf("opening the sandbox's /work: %v", err)
	}
	if err := sb.proc.alive(); err != nil { // the pid named init while it was opened
		work.Close()
		return refusedf("opening the sandbox's /work: %v", err)
	}
	sb.work = work
	phase.Add("create: /work opened")
	cu.Add(func() { work.Close() })
	return sb.hook("work")
}

// prepare decides the program and builds init's configuration. Create
// calls it once init is starting, so that the two overlap.
func (sb *Sandbox) prepare() (*initConfig, error) {
	s, res := sb.spec, sb.res
	fsp, err := sb.runtimePlan() // image_linux.go: sb.fs without an image
	if err != nil {
		return nil, err
	}
	if s.deferred {
		return sb.prepareDeferred(fsp)
	}
	plan, env, err := decideFS(s, fsp)
	if err != nil {
		return nil, err
	}
	abi, err := landlockABI()
	if err != nil {
		return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: %v", ErrUnavailable, err)}
	}
	filter, err := seccompFilter()
	if err != nil {
		return nil, err
	}
	cfg := &initConfig{
		Argv: append([]string{filepath.Base(plan.program.Path)}, s.Argv[1:]...),
		Path: plan.program.Path, Env: env,
		UID: insideUID, GID: insideGID,
		Runtime: runtimeBinds(), ExecFiles: plan.execFiles, NoExecDirs: existingDirs(programDirs),
		TmpBytes: s.Limits.TmpBytes, WorkBytes: s.Limits.WorkBytes,
		NoFile: s.Limits.NoFile, FileSize: s.Limits.FileSizeBytes, NProc: s.Limits.PIDs,
		LandlockABI: abi, Seccomp: filter, Hostname: hostname(sb.runID), Phases: phase.Enabled(),
	}
	sb.imageConfig(cfg)             // image_linux.go: nothing without an image
	if fsp := plan.fs; fsp != nil { // fsgrant_linux.go
		cfg.Binds, cfg.ScratchExec, cfg.Masks = fsp.binds, fsp.scratchExec, fsp.masks
	}
	if !filepath.IsAbs(s.Argv[0]) {
		cfg.Argv[0] = s.Argv[0]
	}
	res.Program, res.LandlockABI = plan.program, abi
	return cfg, nil
}

// next returns init's next message, or an error when init failed, went
// away, the wall-clock limit passed (errTimeout) or ctx ended.
func (sb *Sandbox) next() (initMessage, error) {
	select {
	case m, ok := <-sb.msgs:
		if !ok {
			return m, refusedf("sandbox init exited without reporting")
		}
		if m.Error != "" {
			return m, &ExitError{Code: m.Code, Err: fmt.Errorf("%w: %s", ErrRefused, m.Error)}
		}
		return m, nil
	case <-sb.deadline.C:
		return initMessage{}, errTimeout
	case <-sb.ctx.Done():
		return initMessage{}, sb.ctx.Err()
	case <-claimDone(sb.claimCtx):
		return initMessage{}, sb.claimCtx.Err()
	}
}

// Start stages the declared inputs into the sandbox's /work, as the
// program's uid, and tells init to start the program. It returns an
// error wrapping ErrLifecycle unless the sandbox is freshly created, and
// the context's error if Create's context has ended. On any error the
// program has not started, and the sandbox can only be destroyed.
func (sb *Sandbox) Start() error {
	switch sb.state {
	case stateCreated:
	case stateDestroyed:
		return fmt.Errorf("%w: Start after Destroy", ErrLifecycle)
	default:
		return fmt.Errorf("%w: Start called twice", ErrLifecycle)
	}
	sb.state = stateDone // until the program starts
	if err := sb.ctx.Err(); err != nil {
		return err // never start a program nobody waits for
	}
	s := sb.spec
	ws, err := openWorkspace(s.Workspace)
	if err != nil {
		return err
	}
	if ws != nil {
		sb.ws = ws
		sb.cu.Add(func() { ws.Close() })
		var in []stage.File
		stageIn := func() error {
			var err error
			in, err = stage.In(ws, sb.work, s.Inputs, stage.Owner{UID: -1, GID: -1}, s.Limits.Stage)
			if err != nil {
				return err
			}
			for _, o := range s.Outputs {
				if err := mkdirParents(sb.work, o); err != nil {
					return fmt.Errorf("making the parent directories of output %q: %w", o, err)
				}
			}
			return nil
		}
		if sb.ids != nil {
			err = stageIn() // as init's uid; init gives /work to the program (chownWork)
		} else {
			err = asOwner(sb.hostBase+insideUID, sb.hostBase+insideGID, stageIn)
		}
		if err != nil {
			return &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: staging inputs: %w", ErrRefused, err)}
		}
		sb.res.Inputs = in
	}
	phase.Add("start: staged")
	if !sb.goSent {
		word := []byte{'g'}
		if sb.launchMsg != nil {
			word = sb.launchMsg // a prepared sandbox's launchConfig
		}
		if _, err := sb.ctl.Write(word); err != nil {
			return refusedf("starting the run: %v", err)
		}
	}
	sb.state = stateStarted
	if s.Control != nil {
		s.Control.attach(sb) // control_linux.go
		sb.cu.Add(func() {
			// Destroyed while frozen: the frozen processes die of
			// SIGKILL only once thawed, and killing init waits for them
			// (the end of its PID namespace), so the cgroup is killed
			// first (Kill thaws what it has signalled).
			if s.Control.detach() && sb.cg != nil {
				_ = sb.cg.Kill()
			}
		})
	}
	return nil
}

// Wait waits for the program to finish, or for the wall-clock limit,
// then reads the run's resources from its cgroup, copies the declared
// outputs back and releases init. It returns what Run returns: the
// result, or nil and an error when the program did not run to
// completion. When it returns a result that did not time out, every
// process the program started is dead and reaped, and what they wrote to
// stdout and stderr has been copied out; Wait waits for init's own exit
// too, except in a prepared sandbox (Prepare) with a cgroup and no
// egress, where Destroy waits for it. It returns an error wrapping ErrLifecycle unless Start
// succeeded and Wait has not been called. The sandbox must still be
// destroyed.
func (sb *Sandbox) Wait() (*Result, error) {
	switch sb.state {
	case stateStarted:
	case stateCreated:
		return nil, fmt.Errorf("%w: Wait before Start", ErrLifecycle)
	case stateDestroyed:
		return nil, fmt.Errorf("%w: Wait after Destroy", ErrLifecycle)
	default:
		return nil, fmt.Errorf("%w: Wait called twice or after a failed Start", ErrLifecycle)
	}
	sb.state = stateDone
	s, res := sb.spec, sb.res
	m, err := sb.next()
	if s.Control != nil {
		s.Control.detach() // the program has ended, or is about to be killed
		if err != nil && !errors.Is(err, errTimeout) && sb.cg != nil {
			// A frozen run's processes die of SIGKILL only once thawed,
			// and init's PID namespace ends only when they have: kill
			// the cgroup first (Kill thaws what it has signalled).
			_ = sb.cg.Kill()
		}
	}
	res.End = time.Now()
	phase.Add("wait: exit status")
	for _, pm := range m.Phases {
		phase.AddAt("init: "+pm.Name, pm.T)
	}
	if errors.Is(err, errTimeout) {
		res.TimedOut = true
		res.ExitCode = ExitTimeout
		if sb.cg != nil {
			_ = sb.cg.Kill()
		} else {
			_ = sb.proc.kill() // init is the PID namespace's init: all of it dies
		}
		readStats(sb.cg, res)
		return res, nil
	}
	if err != nil {
		return nil, err
	}
	switch {
	case m.Exit != nil:
		res.ExitCode = *m.Exit
	case m.Signal != 0:
		res.Signal = m.Signal
		res.ExitCode = exitSignalShift + m.Signal
	default:
		return nil, refusedf("sandbox init reported neither an exit status nor a signal")
	}
	copyOut := sb.ws != nil && len(s.Outputs) > 0
	if !copyOut {
		sb.ctl.Close() // nothing to copy out of /work: init may exit while the stats are read
	}
	readStats(sb.cg, res)
	phase.Add("wait: cgroup stats")
	if m.Left {
		// Init's thread has left the cgroup and the program's processes
		// are all reaped: the cgroup can go while init exits.
		sb.removeCgroup()
	}
	if sb.stdin != nil {
		sb.stdin.stop() // the program is gone: read no more of cordon's input
	}
	if copyOut {
		// Out returns files with an error only when every output is in
		// place but an old copy could not be removed: record both.
		out := stage.Out
		if s.OutputsOptional {
			out = stage.OutPresent
		}
		res.Outputs, res.OutputsErr = out(sb.work, sb.ws, s.Outputs, s.Limits.Stage)
	}
	phase.Add("wait: outputs")
	sb.ctl.Close() // init exits on EOF (a second Close does nothing)
	if sb.relayed != nil && sb.cg != nil && len(s.Grants.Egress) == 0 {
		// A prepared sandbox: init has reaped everything else in its PID
		// namespace and let go of the sandbox's streams before it
		// reported (initMain), so the relays end now, with all the
		// program wrote. Its own exit (the teardown of its namespaces,
		// about 1 ms) is Destroy's: nothing of the run needs it, since
		// the cgroup gave the figures. With egress (which Prepare
		// refuses), the bridge's last records would come as init exits:
		// Wait would wait for it (below).
		waitBounded(func() { <-sb.relayed }, 5*time.Second)
		phase.Add("wait: streams relayed")
		return res, nil
	}
	sb.waited = true
	ru, err := sb.proc.wait()
	if err != nil {
		return nil, refusedf("sandbox init: %v", err)
	}
	phase.Add("wait: init exited")
	if sb.relayed != nil {
		// Init and everything in its PID namespace are gone: the
		// output pipes end once what they hold is copied.
		waitBounded(func() { <-sb.relayed }, 5*time.Second)
	}
	if sb.cg == nil {
		rusageStats(ru, res)
	}
	return res, nil
}

// Destroy undoes what Create and Start did, the last step first: it
// closes the workspace and /work, kills and reaps init (and with it
// anything left in its PID namespace), waits a bounded time for the
// egress connections to be served, closes the pipes, and kills every
// process in the run's cgroup and removes the cgroup. There is no run
// directory on the host to remove: the sandbox's root is a tmpfs that
// ends with init's mount namespace.
//
// Destroy may be called at any point after Create, and again: later
// calls do nothing and return what the first returned. A nil *Sandbox
// (from a failed Create) is fine too. The error, if any, is that the
// run's cgroup could not be removed.
func (sb *Sandbox) Destroy() error {
	if sb == nil {
		return nil
	}
	if sb.state != stateDestroyed {
		sb.state = stateDestroyed
		sb.cu.Clean()
	}
	return sb.destroyErr
}

// seccompFilter is the program's seccomp filter in the form init loads
// (initConfig.Seccomp). It is assembled once per process, here rather
// than in init, so that the 0.6 ms it takes overlaps init's start
// instead of adding to every run.
func seccompFilter() ([]byte, error) {
	f, err := seccomp.Compile()
	if err == nil {
		var b []byte
		if b, err = f.MarshalBinary(); err == nil {
			return b, nil
		}
	}
	return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: seccomp: %v", ErrUnavailable, err)}
}

// removeCgroup kills what is left in the run's cgroup and removes it, in
// the background; cgRemoving closes when it is done. A failure is
// Destroy's error.
func (sb *Sandbox) removeCgroup() {
	sb.cgRemoving = make(chan struct{})
	go func() {
		defer close(sb.cgRemoving)
		_ = sb.cg.Kill()
		if err := sb.cg.Close(); err != nil {
			sb.destroyErr = fmt.Errorf("sandbox: removing the run's cgroup: %w", err)
		}
	}()
}
