package sandbox

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox/cgroup"
	"github.com/cordon-dev/cordon/sandbox/stage"
	"github.com/cordon-dev/cordon/tier"
)

// Inside the sandbox the program runs as uid and gid 1000; sandbox init
// runs as 0. Both map into the run's host range.
const (
	insideUID = 1000
	insideGID = 1000
)

// Run runs the spec's program in a new sandbox and returns what it did.
// An error means the program did not run to completion inside the
// sandbox (Result is nil) or its outputs could not be copied back
// (Result.OutputsErr). A refusal is an *ExitError with Code 125, 126 or
// 127.
func Run(ctx context.Context, s *Spec) (*Result, error) {
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := Probe(s.Tier); err != nil {
		return nil, &ExitError{Code: ExitRefused, Err: err}
	}
	tenant := s.Tenant
	if s.Tier == tier.S2 {
		tenant = singleTenant
	}
	// Probe has required root: only root can map a range of host ids.
	ts, err := allocateTenant(s.StateDir, tenant)
	if err != nil {
		return nil, refusedf("tenant %q: %v", tenant, err)
	}
	hostBase := ts.base

	runID := newRunID()
	cg, err := cgroup.New("cordon/"+tenant+"/"+runID, cgroup.Limits{
		MemoryBytes: s.Limits.MemoryBytes, PIDs: s.Limits.PIDs, CPUMillis: s.Limits.CPUMillis,
	})
	if err != nil {
		return nil, refusedf("cgroup: %v", err)
	}
	defer func() {
		_ = cg.Kill()
		_ = cg.Close()
	}()

	res := &Result{Tier: s.Tier, GrantsID: s.Grants.ID(), HostUID: hostBase + insideUID}
	// prepare decides the program and builds init's configuration; run
	// calls it once init is starting, so that the two overlap.
	prepare := func() (*initConfig, error) {
		enf := grant.New(s.Grants)
		plan, err := planExec(enf, s.Argv)
		if err != nil {
			return nil, err
		}
		if s.Decided != nil {
			if err := s.Decided(plan.program.Decision); err != nil {
				return nil, refusedf("recording the exec decision: %v", err)
			}
		}
		env, err := buildEnv(enf, s.Env)
		if err != nil {
			return nil, err
		}
		abi, err := landlockABI()
		if err != nil {
			return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: %v", ErrUnavailable, err)}
		}
		cfg := &initConfig{
			Argv: append([]string{filepath.Base(plan.program.Path)}, s.Argv[1:]...),
			Path: plan.program.Path, Env: env,
			UID: insideUID, GID: insideGID,
			Runtime: runtimeBinds(), ExecFiles: plan.execFiles, NoExecDirs: existingDirs(programDirs),
			TmpBytes: s.Limits.TmpBytes, WorkBytes: s.Limits.WorkBytes,
			NoFile: s.Limits.NoFile, FileSize: s.Limits.FileSizeBytes, NProc: s.Limits.PIDs,
			LandlockABI: abi, Hostname: hostname(runID),
		}
		if !filepath.IsAbs(s.Argv[0]) {
			cfg.Argv[0] = s.Argv[0]
		}
		res.Program, res.LandlockABI = plan.program, abi
		return cfg, nil
	}
	if err := run(ctx, s, prepare, cg, hostBase, res); err != nil {
		return nil, err
	}
	return res, nil
}

// runtimeBinds lists the runtime directories and links that exist here.
func runtimeBinds() []string {
	var out []string
	for _, p := range slices.Concat(runtimeRoots, []string{alternatives}) {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// existingDirs returns the directories of dirs that exist here (resolved
// the same way inside, since the runtime is bound at the same paths).
func existingDirs(dirs []string) []string {
	var out []string
	for _, d := range dirs {
		if fi, err := os.Lstat(d); err == nil && fi.IsDir() {
			out = append(out, d)
		}
	}
	return out
}

func newRunID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// run starts init, stages, runs and collects.
func run(ctx context.Context, s *Spec, prepare func() (*initConfig, error), cg *cgroup.Group, hostBase int, res *Result) error {
	cfgR, cfgW, err := os.Pipe()
	if err != nil {
		return err
	}
	ctlR, ctlW, err := os.Pipe()
	if err != nil {
		return err
	}
	stR, stW, err := os.Pipe()
	if err != nil {
		return err
	}
	defer cfgW.Close()
	defer ctlW.Close()
	defer stR.Close()

	attr := &syscall.SysProcAttr{
		Cloneflags: syscall.CLONE_NEWUSER | syscall.CLONE_NEWNS | syscall.CLONE_NEWPID | syscall.CLONE_NEWNET |
			syscall.CLONE_NEWIPC | syscall.CLONE_NEWUTS, // the cgroup namespace: see startProgram
		Setsid:    true,
		Pdeathsig: syscall.SIGKILL,
	}
	// Map the tenant's whole range; init becomes inside-root (host uid
	// hostBase) with no supplementary groups, the program uid 1000.
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: hostBase, Size: rangeSize}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: hostBase, Size: rangeSize}}
	attr.GidMappingsEnableSetgroups = true
	attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
	// On cgroup v1, init's thread joins the run's cgroup itself through
	// files opened here (fds 7…), just before it forks the program: a
	// thread that moves itself does not wait for the kernel's global
	// thread-group lock. Elsewhere the parent moves init (Add, below).
	joins, err := cg.JoinFiles()
	if err != nil && !errors.Is(err, errors.ErrUnsupported) {
		return refusedf("cgroup: %v", err)
	}
	defer func() {
		for _, f := range joins {
			f.Close()
		}
	}()
	// Execute cordon through a descriptor: the sandbox's host uid may not
	// traverse the directory the binary lives in. The descriptor is the
	// last of init's (fd 7+len(joins)); it must be one of the files the
	// child is given, or the child's dup2 of those could land on it.
	self, err := os.Open("/proc/self/exe")
	if err != nil {
		return refusedf("opening cordon's own executable: %v", err)
	}
	defer self.Close()
	egress := len(s.Grants.Egress) > 0
	var bridgeParent, bridgeChild *os.File
	if egress {
		if bridgeParent, bridgeChild, err = bridgePair(); err != nil {
			return refusedf("%v", err)
		}
		defer bridgeParent.Close()
		defer bridgeChild.Close()
	}
	files := append([]*os.File{cfgR, ctlR, stW, bridgeChild}, joins...)
	files = append(files, self)
	cmd := &exec.Cmd{
		Path: "/proc/self/fd/" + strconv.Itoa(2+len(files)),
		Args: []string{InitArg0},
		// Init gets no environment of cordon's; in a race-detector build
		// it would otherwise sleep a second at exit.
		Env:         []string{"GORACE=atexit_sleep_ms=0"},
		Stdin:       s.Stdin,
		Stdout:      s.Stdout,
		Stderr:      s.Stderr,
		ExtraFiles:  files,
		SysProcAttr: attr,
	}
	// Decide the program while the kernel creates init's namespaces.
	type prepared struct {
		cfg *initConfig
		err error
	}
	prep := make(chan prepared, 1)
	go func() {
		cfg, err := prepare()
		prep <- prepared{cfg, err}
	}()
	defer func() { <-prep }() // never return while prepare still writes res

	// Pdeathsig fires when the creating thread exits: keep it.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	res.Start = time.Now()
	err = cmd.Start()
	cfgR.Close()
	ctlR.Close()
	stW.Close()
	if err != nil {
		return refusedf("starting sandbox init: %v", err)
	}
	if egress {
		bridgeChild.Close()
		wait := serveBridge(ctx, bridgeParent, s.Egress)
		// Deferred before the kill of init below, so it runs after it:
		// init's exit closes the bridge, and with it the accept loop.
		defer waitBounded(wait, 5*time.Second)
	}
	waited := false
	defer func() {
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()

	msgs := make(chan initMessage, 4)
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

	// Init holds its own copies of the join files now. Without them
	// (cgroup v2), move init here, in the background: a move can wait for
	// an RCU grace period. Init runs nothing of the program's before 'g'.
	for _, f := range joins {
		f.Close()
	}
	added := make(chan error, 1)
	if len(joins) > 0 {
		added <- nil
	} else {
		go func() { added <- cg.Add(cmd.Process.Pid) }()
	}
	p := <-prep
	prep <- p // for the deferred receive
	cfg, err := p.cfg, p.err
	if err != nil {
		<-added
		return err
	}
	cfg.CgroupFiles = len(joins)
	if egress {
		cfg.Egress = true
		cfg.Env = append(cfg.Env, proxyEnv()...)
	}
	if err := json.NewEncoder(cfgW).Encode(cfg); err != nil {
		return refusedf("configuring sandbox init: %v", err)
	}
	cfgW.Close()

	deadline := time.NewTimer(s.Limits.Wall)
	defer deadline.Stop()
	next := func() (initMessage, error) {
		select {
		case m, ok := <-msgs:
			if !ok {
				return m, refusedf("sandbox init exited without reporting")
			}
			if m.Error != "" {
				return m, &ExitError{Code: m.Code, Err: fmt.Errorf("%w: %s", ErrRefused, m.Error)}
			}
			return m, nil
		case <-deadline.C:
			return initMessage{}, errTimeout
		case <-ctx.Done():
			return initMessage{}, ctx.Err()
		}
	}

	if _, err := next(); err != nil { // ready
		return err
	}
	if err := <-added; err != nil {
		return refusedf("cgroup: %v", err)
	}
	work, err := os.Open("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/root/work")
	if err != nil {
		return refusedf("opening the sandbox's /work: %v", err)
	}
	defer work.Close()
	ws, err := openWorkspace(s.Workspace)
	if err != nil {
		return err
	}
	if ws != nil {
		defer ws.Close()
		var in []stage.File
		stageIn := func() error {
			var err error
			in, err = stage.In(ws, work, s.Inputs, stage.Owner{UID: -1, GID: -1}, s.Limits.Stage)
			if err != nil {
				return err
			}
			for _, o := range s.Outputs {
				if err := mkdirParents(work, o); err != nil {
					return fmt.Errorf("making the parent directories of output %q: %w", o, err)
				}
			}
			return nil
		}
		err = asOwner(hostBase+insideUID, hostBase+insideGID, stageIn)
		if err != nil {
			return &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: staging inputs: %w", ErrRefused, err)}
		}
		res.Inputs = in
	}
	if _, err := ctlW.Write([]byte{'g'}); err != nil {
		return refusedf("starting the run: %v", err)
	}

	m, err := next()
	res.End = time.Now()
	if errors.Is(err, errTimeout) {
		res.TimedOut = true
		res.ExitCode = ExitTimeout
		_ = cg.Kill()
		readStats(cg, res)
		return nil
	}
	if err != nil {
		return err
	}
	switch {
	case m.Exit != nil:
		res.ExitCode = *m.Exit
	case m.Signal != 0:
		res.Signal = m.Signal
		res.ExitCode = exitSignalShift + m.Signal
	default:
		return refusedf("sandbox init reported neither an exit status nor a signal")
	}
	readStats(cg, res)
	if ws != nil && len(s.Outputs) > 0 {
		// Out returns files with an error only when every output is in
		// place but an old copy could not be removed: record both.
		out := stage.Out
		if s.OutputsOptional {
			out = stage.OutPresent
		}
		res.Outputs, res.OutputsErr = out(work, ws, s.Outputs, s.Limits.Stage)
	}
	ctlW.Close()
	waited = true
	if err := cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return refusedf("sandbox init: %v", err)
		}
	}
	return nil
}

// mkdirParents creates the missing parent directories of the
// workspace-relative path p beneath dir, following no symbolic link.
func mkdirParents(dir *os.File, p string) error {
	parts := strings.Split(p, "/")
	fd, err := unix.Dup(int(dir.Fd()))
	if err != nil {
		return err
	}
	for _, name := range parts[:len(parts)-1] {
		if err := unix.Mkdirat(fd, name, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
			unix.Close(fd)
			return err
		}
		next, err := unix.Openat(fd, name, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
		unix.Close(fd)
		if err != nil {
			return err
		}
		fd = next
	}
	return unix.Close(fd)
}

// asOwner runs f with its file system ids set to uid and gid, so that
// what f creates in the sandbox's /work belongs to the program: a tmpfs
// mounted in the run's user namespace refuses creation by an id it does
// not map, such as host root. The file capabilities that changing fsuid
// drops from the effective set are raised again, so that f still reads
// the workspace as root does. f runs on a thread of its own that is
// locked and never unlocked: Go ends it when f returns, so no other
// goroutine ever runs with these ids.
func asOwner(uid, gid int, f func() error) error {
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread dies with this goroutine
		done <- asOwnerLocked(uid, gid, f)
	}()
	return <-done
}

func asOwnerLocked(uid, gid int, f func() error) error {
	if err := setfsid(unix.SYS_SETFSGID, gid); err != nil {
		return refusedf("setfsgid(%d): %v", gid, err)
	}
	if err := setfsid(unix.SYS_SETFSUID, uid); err != nil {
		return refusedf("setfsuid(%d): %v", uid, err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return refusedf("capget: %v", err)
	}
	for i := range data {
		data[i].Effective = data[i].Permitted
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return refusedf("capset: %v", err)
	}
	return f()
}

// waitBounded calls wait and returns when it does or after d, whichever
// is first.
func waitBounded(wait func(), d time.Duration) {
	done := make(chan struct{})
	go func() {
		wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(d):
	}
}

var errTimeout = errors.New("sandbox: wall-clock limit reached")

func readStats(cg *cgroup.Group, res *Result) {
	st, err := cg.Stats()
	if err != nil {
		return
	}
	res.CPUNanos = st.CPUNanos
	res.PeakMemoryBytes = st.PeakMemoryBytes
	res.OOMKills = st.OOMKills
}

// openWorkspace opens the host workspace directory without following a
// symbolic link at its last component; "" means no workspace.
func openWorkspace(dir string) (*os.File, error) {
	if dir == "" {
		return nil, nil
	}
	fd, err := unix.Open(dir, unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: workspace %s: %w", ErrRefused, dir, err)}
	}
	return os.NewFile(uintptr(fd), dir), nil
}

// buildEnv is the program's environment: PATH, HOME, LANG and TERM, then
// the granted variables the caller gave values for.
func buildEnv(e *grant.Enforcer, vars map[string]string) ([]string, error) {
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin",
		"HOME=/work",
		"LANG=C.UTF-8",
		"TERM=dumb",
	}
	names := make([]string, 0, len(vars))
	for name := range vars {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		switch name {
		case "PATH", "HOME", "LANG", "TERM", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "NO_PROXY",
			"http_proxy", "https_proxy", "all_proxy", "no_proxy":
			return nil, refusedf("environment variable %s is fixed by the sandbox", name)
		}
		d := e.Decide(grant.Query{Kind: grant.KindEnv, Name: name})
		if !d.Allow {
			return nil, refusedf("environment variable %s: %s", name, d.Reason)
		}
		env = append(env, name+"="+vars[name])
	}
	return env, nil
}
