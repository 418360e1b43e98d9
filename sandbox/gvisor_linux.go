package sandbox

// Tier S4 through gVisor (docs/sandbox.md, "S4: gVisor"). The program runs
// under runsc, gVisor's OCI runtime: its system calls are served by
// gVisor's user-space kernel (the Sentry), never by the host kernel. The
// OCI bundle mirrors the S2 root: the runtime bound read-only at the same
// paths, program directories noexec with the allowed executables bound
// back one by one, a staged /work (a tmpfs of its own on the host, sized
// as at S2) and a /tmp tmpfs, both noexec, and no network at all.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox/cgroup"
	"github.com/cordon-dev/cordon/sandbox/reaper"
	"github.com/cordon-dev/cordon/sandbox/stage"
	"github.com/cordon-dev/cordon/tier"
)

// gvisorPlatform is how the Sentry intercepts the program's system calls:
// ptrace works on every host (KVM needs /dev/kvm; the 2022 runsc has no
// systrap).
const gvisorPlatform = "ptrace"

// gvisorTasks is the number of tasks gVisor itself runs in the run's
// cgroup (the Sentry's threads and the ptrace platform's stubs), added to
// the pids limit: the cgroup holds the whole gVisor sandbox, not only the
// program.
const gvisorTasks = 128

// runscFlags are runsc's global flags for a run whose state lives in root.
func runscFlags(root string) []string {
	return []string{
		"--root=" + root,
		"--network=none",
		"--platform=" + gvisorPlatform,
		// cordon puts the sandbox into the run's own cgroup itself.
		"--ignore-cgroups",
		"--host-uds=none",
	}
}

// gvisorProbeOnce runs the S4 probe once per process. It runs a program
// under gVisor (about a tenth of a second), so it runs only when S4 is
// asked about: Probe(tier.S4). gvisorPassed records that it passed, for
// Offers, which never runs it.
var gvisorProbeOnce = sync.OnceValue(func() error {
	err := probeGVisor()
	if err == nil {
		gvisorPassed.Store(true)
	}
	return err
})

var gvisorPassed atomic.Bool

// probeGVisor finds runsc and runs a program under it, in a bundle built
// as a run's is; nil only when that program ran and said what it should.
func probeGVisor() error {
	if os.Geteuid() != 0 {
		return errors.New("root (runsc builds the gVisor sandbox's namespaces and chroot as root)")
	}
	runsc, err := exec.LookPath("runsc")
	if err != nil {
		return fmt.Errorf("runsc, gVisor's runtime, was not found in PATH (%v); install it (Debian: apt-get install runsc)", err)
	}
	echo, err := realRuntimePath("/bin/echo")
	if err != nil {
		return fmt.Errorf("the probe's program /bin/echo: %v", err)
	}
	execFiles := []string{echo}
	if interp, err := interpreter(echo); err != nil {
		return fmt.Errorf("the probe's program %s: %v", echo, err)
	} else if interp != "" {
		ireal, err := realRuntimePath(interp)
		if err != nil {
			return fmt.Errorf("the probe's program's interpreter %s: %v", interp, err)
		}
		execFiles = append(execFiles, ireal) // the runtime is noexec at S4: bound back like a run's
	}
	dir, err := os.MkdirTemp("", "cordon-gvisor-probe-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	work := filepath.Join(dir, "work")
	if err := os.Mkdir(work, 0o700); err != nil {
		return err
	}
	cfg := gvisorConfig{
		Argv: []string{"echo", "cordon-gvisor-probe"}, Path: echo, Env: []string{"PATH=/usr/bin:/bin"},
		UID: 65534, GID: 65534, ExecFiles: execFiles, Work: work,
		Limits: DefaultLimits(), Hostname: "cordon-probe",
	}
	if err := writeBundle(dir, &cfg); err != nil {
		return err
	}
	var out bytes.Buffer
	cmd := exec.Command(runsc, append(runscFlags(filepath.Join(dir, "state")), "run", "--bundle", dir, "cordon-probe-"+newRunID())...)
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("runsc (%s) did not start: %v", runsc, err)
	}
	// The probe has no caller to bound it: a runsc that hangs is killed.
	stop := time.AfterFunc(60*time.Second, func() { _ = cmd.Process.Kill() })
	err = cmd.Wait()
	stop.Stop()
	if err != nil || strings.TrimSpace(out.String()) != "cordon-gvisor-probe" {
		return fmt.Errorf("runsc (%s) did not run a program: %v: %s", runsc, err, lastLines(out.String(), 5))
	}
	return nil
}

// lastLines returns the last n lines of s, one line.
func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// gvisorConfig is what a gVisor bundle is built from.
type gvisorConfig struct {
	Argv      []string
	Path      string // the program's absolute path in the runtime
	Env       []string
	UID, GID  int
	ExecFiles []string // the files execve may run: the allowed executables and their interpreters
	Work      string   // the host directory bound at /work
	Limits    Limits
	Hostname  string
}

type ociMount struct {
	Destination string   `json:"destination"`
	Type        string   `json:"type"`
	Source      string   `json:"source"`
	Options     []string `json:"options,omitempty"`
}

type ociRlimit struct {
	Type string `json:"type"`
	Hard uint64 `json:"hard"`
	Soft uint64 `json:"soft"`
}

// ociSpec is the part of the OCI runtime specification cordon writes.
type ociSpec struct {
	Version string `json:"ociVersion"`
	Process struct {
		Terminal bool `json:"terminal"`
		User     struct {
			UID            int   `json:"uid"`
			GID            int   `json:"gid"`
			AdditionalGids []int `json:"additionalGids"`
		} `json:"user"`
		Args            []string            `json:"args"`
		Env             []string            `json:"env"`
		Cwd             string              `json:"cwd"`
		Capabilities    map[string][]string `json:"capabilities"`
		Rlimits         []ociRlimit         `json:"rlimits"`
		NoNewPrivileges bool                `json:"noNewPrivileges"`
	} `json:"process"`
	Root struct {
		Path     string `json:"path"`
		Readonly bool   `json:"readonly"`
	} `json:"root"`
	Hostname string     `json:"hostname"`
	Mounts   []ociMount `json:"mounts"`
	Linux    struct {
		Namespaces []struct {
			Type string `json:"type"`
		} `json:"namespaces"`
	} `json:"linux"`
}

// writeBundle writes the OCI bundle of cfg into dir: config.json and a
// read-only rootfs holding only /etc's few files and the mount points.
func writeBundle(dir string, cfg *gvisorConfig) error {
	rootfs := filepath.Join(dir, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return err
	}
	if err := writeGVisorEtc(filepath.Join(rootfs, "etc"), cfg); err != nil {
		return err
	}
	var s ociSpec
	s.Version = "1.0.2"
	p := &s.Process
	p.User.UID, p.User.GID, p.User.AdditionalGids = cfg.UID, cfg.GID, []int{}
	p.Args = append([]string{cfg.Path}, cfg.Argv[1:]...)
	// argv[0] as the caller wrote it; runsc runs Args[0] by path.
	p.Env, p.Cwd = cfg.Env, "/work"
	p.Capabilities = map[string][]string{"bounding": {}, "effective": {}, "inheritable": {}, "permitted": {}, "ambient": {}}
	l := cfg.Limits
	for _, r := range []struct {
		name string
		v    int64
	}{{"RLIMIT_NOFILE", l.NoFile}, {"RLIMIT_FSIZE", l.FileSizeBytes}, {"RLIMIT_NPROC", l.PIDs}, {"RLIMIT_CORE", 0}} {
		p.Rlimits = append(p.Rlimits, ociRlimit{Type: r.name, Hard: uint64(r.v), Soft: uint64(r.v)})
	}
	p.NoNewPrivileges = true
	s.Root.Path, s.Root.Readonly = rootfs, true
	s.Hostname = cfg.Hostname
	for _, ns := range []string{"pid", "network", "ipc", "uts", "mount"} {
		s.Linux.Namespaces = append(s.Linux.Namespaces, struct {
			Type string `json:"type"`
		}{ns})
	}
	s.Mounts = gvisorMounts(cfg)
	b, err := json.MarshalIndent(&s, "", "\t")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "config.json"), b, 0o600)
}

// gvisorMounts is the run's file system, as at S2: the runtime read-only,
// program directories noexec with each allowed executable bound back
// executable, /work and /tmp writable and noexec.
//
// S4 has no Landlock to limit execve to the allowed files, so the mounts
// do it: the whole runtime is bound noexec — not only the program
// directories, or any ELF under /usr/lib or /lib*, and the dynamic loader
// itself, could be executed — and each allowed executable and its
// interpreter (cfg.ExecFiles) is bound back over itself, executable.
func gvisorMounts(cfg *gvisorConfig) []ociMount {
	ms := []ociMount{
		{"/proc", "proc", "proc", nil},
		{"/tmp", "tmpfs", "tmpfs", []string{"nosuid", "nodev", "noexec", "mode=1777", "size=" + strconv.FormatInt(cfg.Limits.TmpBytes, 10)}},
	}
	for _, p := range runtimeBinds() {
		ms = append(ms, ociMount{p, "bind", p, []string{"rbind", "ro", "nosuid", "nodev"}})
	}
	// This gVisor honours a bound-back file only on a noexec mount of its
	// own directory (not under a noexec mount of the whole root), so each
	// directory one level into the runtime gets its own noexec mount.
	for _, d := range noexecDirs() {
		ms = append(ms, ociMount{d, "bind", d, []string{"rbind", "ro", "nosuid", "nodev", "noexec"}})
	}
	for _, f := range cfg.ExecFiles {
		ms = append(ms, ociMount{f, "bind", f, []string{"bind", "ro", "nosuid", "nodev"}})
	}
	return append(ms, ociMount{"/work", "bind", cfg.Work, []string{"rbind", "rw", "nosuid", "nodev", "noexec"}})
}

// noexecDirs are the directories one level into each runtime root, which
// S4 binds noexec. With them every file of the runtime is on a noexec
// mount, except a file directly in a root: rootExecutables finds those,
// and an S4 run is refused while one exists.
func noexecDirs() []string {
	var out []string
	for _, root := range existingDirs(runtimeRoots) {
		es, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range es {
			if e.IsDir() { // not a link: a link resolves into a root bound here too
				out = append(out, filepath.Join(root, e.Name()))
			}
		}
	}
	return out
}

// rootExecutables are the regular files with an execute bit directly in
// a runtime root (not in a directory under it), which noexecDirs does not
// cover.
func rootExecutables() []string {
	var out []string
	for _, root := range existingDirs(runtimeRoots) {
		es, err := os.ReadDir(root)
		if err != nil {
			continue
		}
		for _, e := range es {
			if fi, err := e.Info(); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
				out = append(out, filepath.Join(root, e.Name()))
			}
		}
	}
	return out
}

func writeGVisorEtc(etc string, cfg *gvisorConfig) error {
	if err := os.Mkdir(etc, 0o755); err != nil {
		return err
	}
	files := etcFiles(cfg.UID, cfg.GID, cfg.Hostname)
	if b, err := os.ReadFile("/etc/ld.so.cache"); err == nil {
		files["ld.so.cache"] = string(b)
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(etc, name), []byte(body), 0o644); err != nil {
			return err
		}
	}
	if _, err := os.Lstat(alternatives); err == nil {
		// The mount point of /etc/alternatives, bound by runtimeBinds.
		if err := os.Mkdir(filepath.Join(etc, "alternatives"), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// checkGVisor refuses what S4 does not provide in this build, before
// anything is set up: an S4 run never runs with less than it promises.
func checkGVisor(gs *grant.Set) error {
	switch {
	case len(gs.Egress) > 0:
		return refusedf("S4 runs have no network in this build: a grant set with egress rules is refused at S4 rather than run without its proxy or with a route out")
	case len(gs.ExecDeny) > 0:
		return refusedf("S4 cannot keep bytes denied by content hash from running (gVisor's loader maps files from noexec mounts, so a program can run any ELF it can write through ld.so): a grant set with exec.deny is refused at S4")
	case gs.MultiTenant:
		return refusedf("S4 runs are single-tenant in this build: a multi-tenant grant set is refused at S4")
	}
	return nil
}

// runGVisor is Run at S4.
func runGVisor(ctx context.Context, s *Spec) (res *Result, err error) {
	if s.Control != nil {
		return nil, refusedf("an S4 run cannot be frozen (gVisor has no cgroup of the run's here): run it at S2 or S3, or without a Control")
	}
	if err := s.check(); err != nil {
		return nil, err
	}
	if err := Probe(tier.S4); err != nil {
		return nil, &ExitError{Code: ExitRefused, Err: err}
	}
	if err := checkGVisor(s.Grants); err != nil {
		return nil, err
	}
	if fs := rootExecutables(); len(fs) > 0 {
		return nil, refusedf("S4 keeps execve to the allowed files with noexec mounts one level into the runtime, and %s lie directly in a runtime root, outside them: S4 is refused on this host", strings.Join(fs, ", "))
	}
	runsc, err := exec.LookPath("runsc")
	if err != nil {
		return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: runsc: %v", ErrUnavailable, err)}
	}
	ts, err := allocateTenant(s.StateDir, singleTenant)
	if err != nil {
		return nil, refusedf("tenant %q: %v", singleTenant, err)
	}
	uid, gid := ts.base+insideUID, ts.base+insideGID
	runID := newRunID()
	res = &Result{Tier: tier.S4, GrantsID: s.Grants.ID(), HostUID: uid}

	plan, env, err := decide(s)
	if err != nil {
		return nil, err
	}
	res.Program = plan.program

	// The run's directory: the bundle, and /work, a tmpfs of the run's
	// own mounted here, owned by the program's host uid.
	base := filepath.Join(s.StateDir, "gvisor")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, refusedf("%v", err)
	}
	dir := filepath.Join(base, runID)
	if err := os.Mkdir(dir, 0o700); err != nil {
		return nil, refusedf("%v", err)
	}
	defer os.RemoveAll(dir)
	workDir := filepath.Join(dir, "work")
	if err := os.Mkdir(workDir, 0o700); err != nil {
		return nil, refusedf("%v", err)
	}
	opts := fmt.Sprintf("size=%d,mode=0700,uid=%d,gid=%d", s.Limits.WorkBytes, uid, gid)
	if err := unix.Mount("tmpfs", workDir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, opts); err != nil {
		return nil, refusedf("mounting the run's /work: %v", err)
	}
	defer func() { _ = unix.Unmount(workDir, unix.MNT_DETACH) }()
	cfg := gvisorConfig{
		Argv: s.Argv, Path: plan.program.Path, Env: env, UID: uid, GID: gid,
		ExecFiles: plan.execFiles, Work: workDir, Limits: s.Limits, Hostname: hostname(runID),
	}
	if err := writeBundle(dir, &cfg); err != nil {
		return nil, refusedf("writing the gVisor bundle: %v", err)
	}
	work, err := os.Open(workDir)
	if err != nil {
		return nil, refusedf("%v", err)
	}
	defer work.Close()
	ws, err := openWorkspace(s.Workspace)
	if err != nil {
		return nil, err
	}
	if ws != nil {
		defer ws.Close()
		stageIn := func() error {
			in, err := stage.In(ws, work, s.Inputs, stage.Owner{UID: -1, GID: -1}, s.Limits.Stage)
			if err != nil {
				return err
			}
			res.Inputs = in
			for _, o := range s.Outputs {
				if err := mkdirParents(work, o); err != nil {
					return fmt.Errorf("making the parent directories of output %q: %w", o, err)
				}
			}
			return nil
		}
		if err := asOwner(uid, gid, stageIn); err != nil {
			return nil, &ExitError{Code: ExitRefused, Err: fmt.Errorf("%w: staging inputs: %w", ErrRefused, err)}
		}
	}

	// The run's cgroup, labelled for the reaper as an S2 run's is.
	label, err := reaper.NewRun(s.StateDir, singleTenant, runID)
	if err != nil {
		return nil, refusedf("labelling the run: %v", err)
	}
	if label.Cgroups, err = cgroup.Dirs(label.Group()); err != nil {
		return nil, refusedf("cgroup: %v", err)
	}
	release, err := reaper.Begin(s.StateDir, label)
	if err != nil {
		return nil, refusedf("%v", err)
	}
	cg, err := cgroup.New(label.Group(), cgroup.Limits{
		MemoryBytes: s.Limits.MemoryBytes, PIDs: s.Limits.PIDs + gvisorTasks, CPUMillis: s.Limits.CPUMillis,
	})
	release()
	if err != nil {
		_ = reaper.End(s.StateDir, label)
		return nil, refusedf("cgroup: %v", err)
	}
	defer func() {
		_ = cg.Kill()
		if cerr := cg.Close(); cerr == nil {
			_ = reaper.End(s.StateDir, label)
		}
	}()

	g := &gvisorRun{runsc: runsc, flags: runscFlags(filepath.Join(dir, "state")), id: "cordon-" + runID, dir: dir}
	defer g.delete()
	res.Start = time.Now()
	done, err := g.run(s, cg)
	if err != nil {
		return nil, err
	}
	code, werr := g.wait(ctx, done, s.Limits.Wall)
	res.End = time.Now()
	switch {
	case errors.Is(werr, errTimeout):
		res.TimedOut, res.ExitCode = true, ExitTimeout
		g.kill()
		_ = cg.Kill()
		waitBounded(func() { <-done }, 10*time.Second)
		readStats(cg, res)
		return res, nil
	case ctx.Err() != nil && errors.Is(werr, ctx.Err()):
		g.kill()
		_ = cg.Kill()
		waitBounded(func() { <-done }, 10*time.Second)
		return nil, werr
	case werr != nil:
		return nil, werr
	}
	res.ExitCode = code
	readStats(cg, res)
	g.delete()
	g.finishStdio()
	if ws != nil && len(s.Outputs) > 0 {
		out := stage.Out
		if s.OutputsOptional {
			out = stage.OutPresent
		}
		res.Outputs, res.OutputsErr = out(work, ws, s.Outputs, s.Limits.Stage)
	}
	return res, nil
}

// gvisorRun drives runsc for one container.
type gvisorRun struct {
	runsc string
	flags []string
	id    string
	dir   string

	copies  sync.WaitGroup // the copies of the program's stdout and stderr
	closers []io.Closer    // the pipes' ends cordon keeps
	relay   *stdinRelay
	proc    *os.Process // the gate, then runsc run
	deleted bool
}

func (g *gvisorRun) cmd(args ...string) *exec.Cmd {
	if len(args) == 1 {
		args = append(args, g.id)
	}
	return exec.Command(g.runsc, append(slicesClone(g.flags), args...)...)
}

func slicesClone(s []string) []string { return append([]string(nil), s...) }

// run starts 'runsc run' with the program's streams (pipes cordon
// copies, never one of cordon's files: stdio_linux.go) in the run's
// cgroup: runsc is started behind a gate, a shell that waits on a pipe
// until cordon has moved it into the cgroup and then executes runsc, so
// that the gofer and the sandbox are born there. runsc run is their
// parent and so the one process that always learns the program's exit
// status. The channel receives that status once runsc has exited.
func (g *gvisorRun) run(s *Spec, cg *cgroup.Group) (<-chan waitResult, error) {
	args := append(slicesClone(g.flags), "--log="+filepath.Join(g.dir, "runsc.log"), "run", "--bundle", g.dir, g.id)
	gateR, gateW, err := os.Pipe()
	if err != nil {
		return nil, refusedf("%v", err)
	}
	defer gateR.Close()
	defer gateW.Close()
	cmd := exec.Command("/bin/sh", append([]string{"-c", `read _ <&3 && exec 3<&- && exec "$0" "$@"`, g.runsc}, args...)...)
	cmd.ExtraFiles = []*os.File{gateR}
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	outW, err := g.output(s.Stdout)
	if err != nil {
		return nil, refusedf("%v", err)
	}
	errW, err := g.output(s.Stderr)
	if err != nil {
		outW.Close()
		return nil, refusedf("%v", err)
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var pr *os.File
	if s.Stdin == nil {
		if pr, err = os.Open(os.DevNull); err != nil {
			return nil, refusedf("%v", err)
		}
	} else {
		in, relay, err := relayStdin(s.Stdin)
		if err != nil {
			return nil, refusedf("relaying stdin: %v", err)
		}
		if relay != nil {
			g.relay, pr = relay, relay.r
		} else {
			var pw *os.File
			if pr, pw, err = os.Pipe(); err != nil {
				return nil, refusedf("%v", err)
			}
			go func() {
				_, _ = io.Copy(pw, in)
				pw.Close()
			}()
			g.closers = append(g.closers, pw)
		}
	}
	cmd.Stdin = pr
	err = cmd.Start()
	pr.Close()
	outW.Close()
	errW.Close()
	if err != nil {
		return nil, refusedf("starting runsc: %v", err)
	}
	g.proc = cmd.Process
	done := make(chan waitResult, 1)
	go func() {
		err := cmd.Wait()
		done <- g.status(cmd.ProcessState, err)
	}()
	if err := cg.Add(cmd.Process.Pid); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return nil, refusedf("cgroup: %v", err)
	}
	if _, err := gateW.Write([]byte("\n")); err != nil {
		_ = cmd.Process.Kill()
		<-done
		return nil, refusedf("starting runsc: %v", err)
	}
	return done, nil
}

type waitResult struct {
	code int
	err  error
}

// status reads the program's exit status from runsc's: runsc exits with
// the program's status (128+N when a signal N killed it), or with 128
// after logging a fatal error of its own, which refuses the run.
func (g *gvisorRun) status(ps *os.ProcessState, err error) waitResult {
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return waitResult{err: refusedf("runsc: %v", err)}
	}
	code := ps.ExitCode()
	if code < 0 {
		return waitResult{err: refusedf("runsc was killed: %v", ps)}
	}
	if code == 128 {
		if b, _ := os.ReadFile(filepath.Join(g.dir, "runsc.log")); bytes.Contains(b, []byte("FATAL ERROR")) {
			return waitResult{err: refusedf("runsc failed: %s", lastLines(string(b), 3))}
		}
	}
	return waitResult{code: code}
}

// output returns the write end of a pipe whose read end is copied to w
// (discarded when w is nil).
func (g *gvisorRun) output(w io.Writer) (*os.File, error) {
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	if w == nil {
		w = io.Discard
	}
	g.copies.Add(1)
	go func() {
		defer g.copies.Done()
		_, _ = io.Copy(w, pr)
		pr.Close()
	}()
	return pw, nil
}

// finishStdio waits, boundedly, for the streams to be copied: the
// sandbox is gone, so the pipes end.
func (g *gvisorRun) finishStdio() {
	if g.relay != nil {
		g.relay.stop()
	}
	for _, c := range g.closers {
		c.Close()
	}
	waitBounded(g.copies.Wait, 5*time.Second)
}

// wait waits for the program's exit status from done, the wall-clock
// limit (errTimeout) or the end of ctx.
func (g *gvisorRun) wait(ctx context.Context, done <-chan waitResult, wall time.Duration) (int, error) {
	timer := time.NewTimer(wall)
	defer timer.Stop()
	select {
	case r := <-done:
		return r.code, r.err
	case <-timer.C:
		return 0, errTimeout
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// kill kills the container's processes and runsc.
func (g *gvisorRun) kill() {
	_ = g.cmd("kill", "--all", g.id, "KILL").Run()
	if g.proc != nil {
		_ = g.proc.Kill()
	}
}

// delete removes the container and its sandbox, killing what is left.
func (g *gvisorRun) delete() {
	if g.deleted {
		return
	}
	g.deleted = true
	_ = g.cmd("delete", "--force", g.id).Run()
	g.finishStdio()
}
