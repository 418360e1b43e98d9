package sandbox

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/internal/phase"

	"github.com/cordon-dev/cordon/sandbox/seccomp"
)

// init turns this process into the sandbox's init when it was started as
// one. It runs before main and never returns in that case.
func init() {
	if len(os.Args) == 1 && os.Args[0] == SpawnerArg0 {
		os.Exit(spawnerMain()) // spawn_linux.go
	}
	if len(os.Args) == 0 || os.Args[0] != InitArg0 {
		return
	}
	// Every restriction below is per thread (no_new_privs, the
	// capability bounding set, Landlock, seccomp) and the program is
	// forked from this same thread, so it inherits all of them.
	runtime.LockOSThread()
	phase.Enable() // a few marks; sent only when the configuration asks
	phase.Add("entered")
	if len(os.Args) > 1 { // rootless (idmap_linux.go)
		if code, done := rootlessInit(os.Args[1:]); done {
			os.Exit(code)
		}
	}
	os.Exit(initMain())
}

// initErr is a setup failure with the exit status it maps to.
type initErr struct {
	code int
	err  error
}

func setupErr(format string, args ...any) *initErr {
	return &initErr{code: ExitRefused, err: fmt.Errorf(format, args...)}
}

func initMain() int {
	cfgFile := os.NewFile(3, "config")
	control := os.NewFile(4, "control")
	status := os.NewFile(5, "status")
	if cfgFile == nil || control == nil || status == nil {
		fmt.Fprintln(os.Stderr, "cordon: error: sandbox init started without its pipes")
		return ExitRefused
	}
	enc := json.NewEncoder(status)
	fail := func(e *initErr) int {
		_ = enc.Encode(initMessage{Error: e.err.Error(), Code: e.code})
		return e.code
	}

	var cfg initConfig
	dec := json.NewDecoder(bufio.NewReader(io.LimitReader(cfgFile, 4<<20)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cfg); err != nil {
		return fail(setupErr("sandbox init: reading the configuration: %v", err))
	}
	cfgFile.Close()
	phase.Add("configured")
	if cfg.Rootless {
		if e := rootlessMapped(); e != nil {
			return fail(e)
		}
	}
	// The descriptor cordon was executed through comes after the cgroup
	// socket (fd 7), the fs grants' trees and the image's root; init does
	// not need it. Only it is closed here: descriptors above it are the Go
	// runtime's own (a package's init can start the network poller before
	// this runs) and closing them would crash init; every descriptor is
	// close-on-exec before the program starts (startProgram).
	if err := unix.Close(8 + len(cfg.Binds) + cfg.imageFiles()); err != nil {
		return fail(setupErr("sandbox init: closing cordon's executable: %v", err))
	}
	// The run's cgroup files, sent over fd 7 once the parent made the
	// cgroup (cgjoin_linux.go).
	joinSock := os.NewFile(7, "cgroup join")
	var joins, leaves []*os.File
	if cfg.CgroupFiles > 0 {
		files, err := receiveFiles(joinSock, 2*cfg.CgroupFiles)
		if err != nil {
			return fail(setupErr("sandbox init: %v", err))
		}
		joins, leaves = files[:cfg.CgroupFiles], files[cfg.CgroupFiles:]
	}
	joinSock.Close()

	if e := openImageRoot(&cfg); e != nil { // image_linux.go: before the root tmpfs covers /tmp
		return fail(e)
	}
	if e := buildRoot(&cfg); e != nil {
		return fail(e)
	}
	if cfg.Egress {
		if err := startForwarder(os.NewFile(6, "egress bridge")); err != nil {
			return fail(setupErr("sandbox init: %v", err))
		}
	}
	phase.Add("root built")
	if cfg.Deferred {
		// The ruleset is built now and applied when the program starts
		// (startProgram), with the launch's other executables added.
		ls, e := buildLandlock(&cfg)
		if e != nil {
			return fail(e)
		}
		cfg.landlock = ls
	}
	if err := enc.Encode(initMessage{Ready: true}); err != nil {
		return ExitRefused
	}
	ctl := bufio.NewReaderSize(control, 1<<20)
	if cfg.Deferred {
		if e := readLaunch(ctl, &cfg); e != nil {
			if e.err == nil {
				return ExitRefused // the parent gave up
			}
			return fail(e)
		}
	} else if b, err := ctl.ReadByte(); err != nil || b != 'g' {
		return ExitRefused // the parent gave up
	}
	phase.Add("go")
	// /dev/null, opened before the restrictions (close-on-exec: the
	// program never gets it), takes the place of init's own standard
	// streams once the program's processes are reaped (below).
	null, err := unix.Open("/dev/null", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fail(setupErr("sandbox init: opening /dev/null: %v", err))
	}
	if cfg.Rootless {
		if err := chownWork(cfg.UID, cfg.GID); err != nil {
			return fail(setupErr("sandbox init: giving /work to the program: %v", err))
		}
	}
	pid, e := startProgram(&cfg, joins)
	if e != nil {
		return fail(e)
	}
	phase.Add("program started")
	// The program is born in the run's cgroup; this thread need not stay
	// there (its own CPU and memory were never the program's). Once it
	// has left, the cgroup empties when the program's processes end, and
	// the parent removes it while init exits.
	left := len(leaves) > 0
	for _, f := range leaves {
		if _, err := f.Write([]byte("0")); err != nil {
			left = false // the parent then waits for init's exit, as without leave files
		}
		f.Close()
	}
	msg := reap(pid)
	msg.Left = left
	// Nothing of the program's is left (reap): init lets go of the
	// sandbox's standard streams before it reports, so that they end as
	// the exit status is known, and a prepared sandbox's relays (which
	// copy them out) end without waiting for init's own exit, the
	// namespaces' teardown (Sandbox.Wait).
	// (Should a dup3 fail, that stream ends at init's exit, which the
	// parent then waits for.)
	for fd := 0; fd < 3; fd++ {
		_ = unix.Dup3(null, fd, 0)
	}
	unix.Close(null)
	phase.Add("program reaped")
	if cfg.Phases {
		msg.Phases = phase.Marks()
	}
	if err := enc.Encode(msg); err != nil {
		return ExitRefused
	}
	// Hold /work until the parent has copied the outputs out.
	_, _ = io.Copy(io.Discard, ctl)
	return 0
}

// readLaunch reads a prepared sandbox's launchConfig from fd 4 into cfg
// and binds its executables executable. An initErr with no error means
// the parent gave up (EOF).
func readLaunch(ctl *bufio.Reader, cfg *initConfig) *initErr {
	line, err := ctl.ReadSlice('\n')
	if err != nil {
		if errors.Is(err, bufio.ErrBufferFull) {
			return setupErr("sandbox init: the launch configuration exceeds 1 MiB")
		}
		return &initErr{code: ExitRefused}
	}
	var l launchConfig
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&l); err != nil {
		return setupErr("sandbox init: reading the launch configuration: %v", err)
	}
	if len(l.Argv) == 0 || l.Path == "" || len(l.ExecFiles) == 0 {
		return setupErr("sandbox init: the launch configuration names no program")
	}
	// The executables bound while the root was built (the grant set's
	// names, when prepared) stay; the others (the program and its
	// interpreter) are bound now, the root being entered.
	for _, f := range cfg.ExecFiles {
		if !slices.Contains(l.ExecFiles, f) { // never: the launch's set includes the prepared names
			return setupErr("sandbox init: the launch's executables lack the prepared %s", f)
		}
	}
	var more []string
	for _, f := range l.ExecFiles {
		if !slices.Contains(cfg.ExecFiles, f) {
			more = append(more, f)
		}
	}
	// A prepared executable the host replaced while the slot was parked
	// lost its bind (and its Landlock rule is on the old inode): it is
	// bound and allowed again, as the new file, like a launch's own.
	for _, f := range l.Rebind {
		if !slices.Contains(cfg.ExecFiles, f) || slices.Contains(more, f) {
			return setupErr("sandbox init: the launch rebinds %s, which was not prepared", f)
		}
		more = append(more, f)
	}
	cfg.moreExec = more
	bound := &initConfig{ExecFiles: more, NoExecDirs: cfg.NoExecDirs}
	if err := execFilesExecutable(bound, ""); err != nil { // mount_linux.go
		return setupErr("sandbox init: closing the runtime's program directories: %v", err)
	}
	cfg.Argv, cfg.Path, cfg.Env, cfg.ExecFiles = l.Argv, l.Path, l.Env, l.ExecFiles
	phase.Add("launch configured")
	return nil
}

// startProgram applies the last restrictions to this thread and starts
// the program from it.
func startProgram(cfg *initConfig, joins []*os.File) (int, *initErr) {
	// Everything but stdio is closed at exec (CVE-2024-21626: a leaked
	// fd to a host directory is a way out).
	if err := unix.CloseRange(3, ^uint(0), unix.CLOSE_RANGE_CLOEXEC); err != nil {
		return 0, setupErr("close_range: %v", err)
	}
	// Init itself is not dumpable: its /proc entries (memory, fds, the
	// status pipe) stay closed to the program whatever the uids. The
	// program's own exec makes it dumpable again, for itself only.
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return 0, setupErr("PR_SET_DUMPABLE: %v", err)
	}
	// Join the run's cgroup (v1): this thread only, so that the program
	// forked from it is born there. The files close before it runs.
	for _, f := range joins {
		_, err := f.Write([]byte("0"))
		f.Close()
		if err != nil {
			return 0, setupErr("joining the run's cgroup: %v", err)
		}
	}
	// The cgroup namespace is made here, after the parent moved init
	// into the run's cgroup, so that its root is that cgroup and no host
	// cgroup path shows in /proc/self/cgroup.
	if err := unix.Unshare(unix.CLONE_NEWCGROUP); err != nil {
		return 0, setupErr("cgroup namespace: %v", err)
	}
	phase.Add("cgroup joined")
	if e := setRlimits(cfg); e != nil {
		return 0, e
	}
	if e := dropCapabilities(); e != nil {
		return 0, e
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return 0, setupErr("no_new_privs: %v", err)
	}
	if cfg.landlock != nil { // a prepared sandbox's, built before ready
		if e := cfg.landlock.addExec(cfg.moreExec); e != nil {
			return 0, e
		}
		if e := cfg.landlock.restrict(); e != nil {
			return 0, e
		}
	} else if e := restrictLandlock(cfg); e != nil {
		return 0, e
	}
	phase.Add("landlock")
	filter, err := seccomp.ParseFilter(cfg.Seccomp)
	if err != nil {
		return 0, setupErr("%v", err)
	}
	if err := filter.Install(); err != nil {
		return 0, setupErr("seccomp: %v", err)
	}
	phase.Add("seccomp")
	// syscall.ForkExec, not os/exec: init reaps by pid (reap), and os/exec
	// would first probe the kernel for pidfds with a clone of its own.
	pid, err := syscall.ForkExec(cfg.Path, cfg.Argv, &syscall.ProcAttr{
		Dir:   "/work",
		Env:   cfg.Env,
		Files: []uintptr{0, 1, 2},
		Sys: &syscall.SysProcAttr{
			Setsid:     true, // no controlling terminal: TIOCSTI has no target
			Pdeathsig:  syscall.SIGKILL,
			Credential: &syscall.Credential{Uid: uint32(cfg.UID), Gid: uint32(cfg.GID), NoSetGroups: true},
		},
	})
	if err != nil {
		switch {
		case errors.Is(err, unix.ENOENT):
			return 0, &initErr{code: ExitNotFound, err: fmt.Errorf("%s: %v", cfg.Path, err)}
		case errors.Is(err, unix.EACCES), errors.Is(err, unix.ENOEXEC), errors.Is(err, unix.EPERM):
			return 0, &initErr{code: ExitCannotExec, err: fmt.Errorf("%s: %v", cfg.Path, err)}
		}
		return 0, setupErr("starting %s: %v", cfg.Path, err)
	}
	return pid, nil
}

// reap waits for the program, then kills and reaps everything else in
// the PID namespace: nothing the program started outlives it.
func reap(pid int) initMessage {
	var msg initMessage
	for {
		var ws unix.WaitStatus
		got, err := unix.Wait4(-1, &ws, 0, nil)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			break // ECHILD: nothing left
		}
		if got != pid {
			continue
		}
		switch {
		case ws.Exited():
			code := ws.ExitStatus()
			msg.Exit = &code
		case ws.Signaled():
			msg.Signal = int(ws.Signal())
		default:
			continue
		}
		_ = unix.Kill(-1, unix.SIGKILL)
	}
	return msg
}

func setRlimits(cfg *initConfig) *initErr {
	limits := []struct {
		name string
		res  int
		v    int64
	}{
		{"RLIMIT_NOFILE", unix.RLIMIT_NOFILE, cfg.NoFile},
		{"RLIMIT_FSIZE", unix.RLIMIT_FSIZE, cfg.FileSize},
		{"RLIMIT_NPROC", unix.RLIMIT_NPROC, cfg.NProc},
		// 1, not 0: with core_pattern piping to a helper, the kernel
		// ignores the limit and runs the helper as host root with the
		// program's memory, unless the limit is exactly 1. One byte is
		// also below the smallest file core. The seccomp filter keeps the
		// program from lowering it to 0.
		{"RLIMIT_CORE", unix.RLIMIT_CORE, 1},
	}
	for _, l := range limits {
		if l.v < 0 {
			return setupErr("%s: negative limit %d", l.name, l.v)
		}
		// syscall.Setrlimit, not unix: it also stops os/exec from
		// restoring the original RLIMIT_NOFILE in the child.
		if err := syscall.Setrlimit(l.res, &syscall.Rlimit{Cur: uint64(l.v), Max: uint64(l.v)}); err != nil {
			return setupErr("%s=%d: %v", l.name, l.v, err)
		}
	}
	return nil
}

// dropCapabilities empties the bounding and ambient sets of this thread,
// so that nothing it executes can ever gain a capability; the program
// also runs under a non-zero uid, which clears its permitted set.
func dropCapabilities() *initErr {
	for c := 0; c <= 63; c++ {
		err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0)
		if errors.Is(err, unix.EINVAL) {
			break // past CAP_LAST_CAP
		}
		if err != nil {
			return setupErr("dropping capability %d from the bounding set: %v", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil {
		return setupErr("clearing ambient capabilities: %v", err)
	}
	return nil
}
