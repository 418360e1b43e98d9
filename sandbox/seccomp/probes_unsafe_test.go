//go:build linux && (amd64 || arm64)

package seccomp

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A probe makes one system call, or one small sequence, on the calling
// thread and undoes whatever it changed. Each is chosen to be harmless
// without the filter, and, for a denied call, to answer something other
// than the filter's errno without it, so that the unfiltered control run
// shows that the filter made the difference: a call that succeeds, or
// arguments the kernel refuses with another errno before acting (a path
// that does not exist, a bad descriptor, invalid flags).
type probe struct {
	name string
	// rule is the Rule.Syscall the probe exercises; "" for a call the
	// filter must let through, or one the checks before the rules answer.
	rule string
	// deny is the filter's answer: EPERM or ENOSYS; 0 for a call the
	// filter must let through.
	deny unix.Errno
	// want is, for a call the filter lets through, its result with and
	// without the filter: 0 for success, or the kernel's errno.
	want unix.Errno
	// same, when set, says why the unfiltered run may legitimately give
	// the filter's errno too, so that only the filtered result is proven.
	same string
	run  func(e *probeEnv) error
}

// probeEnv holds what probes share, made before the filter is installed.
type probeEnv struct {
	absent string // a path that does not exist, in an empty directory of our own
	pipeR  int    // read end of a pipe
	ptm    int    // the master side of a pseudo-terminal
	pts    int    // its slave side; not our controlling terminal
}

func newProbeEnv() (e *probeEnv, cleanup func(), err error) {
	var undo []func()
	cleanup = func() {
		for i := len(undo) - 1; i >= 0; i-- {
			undo[i]()
		}
	}
	defer func() {
		if err != nil {
			cleanup()
		}
	}()
	dir, err := os.MkdirTemp("", "cordon-seccomp-probe-")
	if err != nil {
		return nil, nil, err
	}
	undo = append(undo, func() { os.Remove(dir) })
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_CLOEXEC); err != nil {
		return nil, nil, err
	}
	undo = append(undo, func() { unix.Close(p[0]); unix.Close(p[1]) })
	ptm, err := unix.Open("/dev/ptmx", unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("open /dev/ptmx: %w", err)
	}
	undo = append(undo, func() { unix.Close(ptm) })
	if err := unix.IoctlSetPointerInt(ptm, unix.TIOCSPTLCK, 0); err != nil {
		return nil, nil, fmt.Errorf("unlock pty: %w", err)
	}
	// O_NOCTTY: the child leads a session of its own, and without it the
	// pty would become its controlling terminal.
	pts, err := sys(unix.SYS_IOCTL, uintptr(ptm), unix.TIOCGPTPEER, unix.O_RDWR|unix.O_NOCTTY|unix.O_CLOEXEC)
	if err != nil {
		return nil, nil, fmt.Errorf("open pty peer: %w", err)
	}
	undo = append(undo, func() { unix.Close(int(pts)) })
	return &probeEnv{absent: filepath.Join(dir, "absent"), pipeR: p[0], ptm: ptm, pts: int(pts)}, cleanup, nil
}

// sys makes a system call whose arguments are not pointers.
func sys(nr uintptr, args ...uintptr) (uintptr, error) {
	var a [6]uintptr
	copy(a[:], args)
	r, _, errno := unix.Syscall6(nr, a[0], a[1], a[2], a[3], a[4], a[5])
	if errno != 0 {
		return r, errno
	}
	return r, nil
}

// closing closes a returned file descriptor.
func closing(fd uintptr, err error) error {
	if err == nil {
		unix.Close(int(fd))
	}
	return err
}

func closingInt(fd int, err error) error {
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func ptr(s string) *byte {
	p, err := unix.BytePtrFromString(s)
	if err != nil {
		panic(err)
	}
	return p
}

const (
	minus1          = ^uintptr(0)
	addrNoRandomize = 0x0040000 // include/uapi/linux/personality.h
	perLinux32      = 0x0008
)

func socketProbe(family, typ int) func(*probeEnv) error {
	return func(*probeEnv) error {
		return closingInt(unix.Socket(family, typ|unix.SOCK_CLOEXEC, 0))
	}
}

func socketpairProbe(family, typ int) func(*probeEnv) error {
	return func(*probeEnv) error {
		fds, err := unix.Socketpair(family, typ|unix.SOCK_CLOEXEC, 0)
		if err == nil {
			unix.Close(fds[0])
			unix.Close(fds[1])
		}
		return err
	}
}

// rawClone calls clone(2) with flags that the kernel refuses (EINVAL)
// before creating anything: CLONE_SIGHAND without CLONE_VM. Were a process
// ever created, it exits at once.
func rawClone(flags uintptr) error {
	r, _, errno := unix.RawSyscall6(unix.SYS_CLONE, flags|unix.CLONE_SIGHAND, 0, 0, 0, 0, 0)
	if errno == 0 && r == 0 {
		unix.RawSyscall(unix.SYS_EXIT_GROUP, 0, 0, 0)
	}
	if errno != 0 {
		return errno
	}
	return nil
}

func personality(persona uintptr) (uintptr, error) {
	return sys(unix.SYS_PERSONALITY, persona)
}

// execTrue starts /bin/true from the calling thread and waits for it.
func execTrue(attr *syscall.SysProcAttr) error {
	cmd := exec.Command("/bin/true")
	cmd.SysProcAttr = attr
	return cmd.Run()
}

var probes = []probe{
	// Calls the filter lets through.
	{name: "getpid", run: func(*probeEnv) error { _, err := sys(unix.SYS_GETPID); return err }},
	{name: "socket(AF_UNIX)", run: socketProbe(unix.AF_UNIX, unix.SOCK_STREAM)},
	{name: "socket(AF_INET)", run: socketProbe(unix.AF_INET, unix.SOCK_STREAM)},
	{name: "socket(AF_INET6)", run: socketProbe(unix.AF_INET6, unix.SOCK_DGRAM)},
	{name: "socketpair(AF_UNIX)", run: socketpairProbe(unix.AF_UNIX, unix.SOCK_STREAM)},
	{name: "ioctl(pipe, FIONREAD)", run: func(e *probeEnv) error {
		_, err := unix.IoctlGetInt(e.pipeR, unix.TIOCINQ)
		return err
	}},
	{name: "ioctl(pty, TCGETS)", run: func(e *probeEnv) error {
		_, err := unix.IoctlGetTermios(e.pts, unix.TCGETS)
		return err
	}},
	// musl passes the request as a sign-extended int: TIOCGPTN (bit 31
	// set) arrives with its high 32 bits all set.
	{name: "ioctl(ptmx, TIOCGPTN) sign-extended as musl passes it", run: func(e *probeEnv) error {
		var n uint32
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(e.ptm), 0xFFFFFFFF_00000000|unix.TIOCGPTN, uintptr(unsafe.Pointer(&n)))
		return errnoErr(errno)
	}},
	{name: "personality(0xffffffff) query", run: func(*probeEnv) error { _, err := personality(0xffffffff); return err }},
	{name: "personality(PER_LINUX)", run: func(*probeEnv) error {
		old, err := personality(0xffffffff)
		if err != nil {
			return err
		}
		_, err = personality(0)
		personality(old)
		return err
	}},
	{name: "prlimit64(RLIMIT_CORE) read", run: func(*probeEnv) error {
		var old unix.Rlimit
		_, err := sys(unix.SYS_PRLIMIT64, 0, unix.RLIMIT_CORE, 0, uintptr(unsafe.Pointer(&old)))
		return err
	}},
	{name: "setrlimit(RLIMIT_NOFILE)", run: func(*probeEnv) error { return sameRlimit(unix.SYS_SETRLIMIT, unix.RLIMIT_NOFILE) }},
	{name: "prlimit64(RLIMIT_NOFILE, new)", run: func(*probeEnv) error { return sameRlimit(unix.SYS_PRLIMIT64, unix.RLIMIT_NOFILE) }},
	{name: "clone(CLONE_SIGHAND) reaches the kernel", want: unix.EINVAL, run: func(*probeEnv) error { return rawClone(0) }},
	{name: "clone(CLONE_NEWTIME bit, the exit signal byte) reaches the kernel", want: unix.EINVAL,
		run: func(*probeEnv) error { return rawClone(unix.CLONE_NEWTIME) }},
	{name: "os/exec /bin/true", run: func(*probeEnv) error { return execTrue(nil) }},
	{name: "goroutine on another locked thread", run: func(*probeEnv) error {
		self := unix.Gettid()
		done := make(chan error)
		go func() {
			runtime.LockOSThread() // not unlocked: the thread ends with the goroutine
			if unix.Gettid() == self {
				done <- errors.New("ran on the filtered thread")
				return
			}
			_, err := sys(unix.SYS_GETPID)
			done <- err
		}()
		return <-done
	}},

	// Mounts and the view of the file system.
	{name: "mount", rule: "mount", deny: unix.EPERM, run: func(e *probeEnv) error {
		return unix.Mount("none", e.absent, "cordon-no-such-fs", 0, "")
	}},
	{name: "umount2", rule: "umount2", deny: unix.EPERM, run: func(e *probeEnv) error { return unix.Unmount(e.absent, 0) }},
	{name: "pivot_root", rule: "pivot_root", deny: unix.EPERM, run: func(e *probeEnv) error { return unix.PivotRoot(e.absent, e.absent) }},
	{name: "chroot", rule: "chroot", deny: unix.EPERM, run: func(e *probeEnv) error { return unix.Chroot(e.absent) }},
	{name: "open_tree(/)", rule: "open_tree", deny: unix.EPERM, run: func(*probeEnv) error {
		return closingInt(unix.OpenTree(unix.AT_FDCWD, "/", unix.O_CLOEXEC))
	}},
	{name: "open_tree_attr", rule: "open_tree_attr", deny: unix.EPERM, run: func(e *probeEnv) error {
		fd, _, errno := unix.Syscall6(unix.SYS_OPEN_TREE_ATTR, fdArg(unix.AT_FDCWD), uintptr(unsafe.Pointer(ptr(e.absent))), unix.O_CLOEXEC, 0, 0, 0)
		return closing(fd, errnoErr(errno))
	}},
	{name: "move_mount", rule: "move_mount", deny: unix.EPERM, run: func(*probeEnv) error {
		return unix.MoveMount(-1, "", -1, "", 1<<30)
	}},
	{name: "fsopen", rule: "fsopen", deny: unix.EPERM, run: func(*probeEnv) error {
		return closingInt(unix.Fsopen("cordon-no-such-fs", unix.FSOPEN_CLOEXEC))
	}},
	{name: "fsconfig", rule: "fsconfig", deny: unix.EPERM, run: func(*probeEnv) error { return unix.FsconfigSetFlag(-1, "ro") }},
	{name: "fsmount", rule: "fsmount", deny: unix.EPERM, run: func(*probeEnv) error { return closingInt(unix.Fsmount(-1, 0, 0)) }},
	{name: "fspick", rule: "fspick", deny: unix.EPERM, run: func(e *probeEnv) error {
		return closingInt(unix.Fspick(unix.AT_FDCWD, e.absent, unix.FSPICK_CLOEXEC))
	}},
	{name: "mount_setattr", rule: "mount_setattr", deny: unix.EPERM, run: func(e *probeEnv) error {
		_, _, errno := unix.Syscall6(unix.SYS_MOUNT_SETATTR, fdArg(unix.AT_FDCWD), uintptr(unsafe.Pointer(ptr(e.absent))), 0, 0, 0, 0)
		return errnoErr(errno)
	}},

	// Namespaces.
	{name: "unshare(0)", rule: "unshare", deny: unix.EPERM, run: func(*probeEnv) error { return unix.Unshare(0) }},
	// A Go process has threads, so the kernel refuses CLONE_NEWUSER with EINVAL.
	{name: "unshare(CLONE_NEWUSER)", rule: "unshare", deny: unix.EPERM, run: func(*probeEnv) error { return unix.Unshare(unix.CLONE_NEWUSER) }},
	{name: "setns", rule: "setns", deny: unix.EPERM, run: func(*probeEnv) error { return unix.Setns(-1, 0) }},
	{name: "clone(CLONE_NEWNS)", rule: "clone", deny: unix.EPERM, run: func(*probeEnv) error { return rawClone(unix.CLONE_NEWNS) }},
	{name: "clone(CLONE_NEWUTS)", rule: "clone", deny: unix.EPERM, run: func(*probeEnv) error { return rawClone(unix.CLONE_NEWUTS) }},
	{name: "clone(CLONE_NEWIPC)", rule: "clone", deny: unix.EPERM, run: func(*probeEnv) error { return rawClone(unix.CLONE_NEWIPC) }},
	{name: "clone(CLONE_NEWUSER)", rule: "clone", deny: unix.EPERM, run: func(*probeEnv) error { return rawClone(unix.CLONE_NEWUSER) }},
	{name: "clone(CLONE_NEWPID)", rule: "clone", deny: unix.EPERM, run: func(*probeEnv) error { return rawClone(unix.CLONE_NEWPID) }},
	{name: "clone(CLONE_NEWNET)", rule: "clone", deny: unix.EPERM, run: func(*probeEnv) error { return rawClone(unix.CLONE_NEWNET) }},
	{name: "clone(CLONE_NEWCGROUP)", rule: "clone", deny: unix.EPERM, run: func(*probeEnv) error { return rawClone(unix.CLONE_NEWCGROUP) }},
	{name: "os/exec /bin/true in a new user namespace", rule: "clone", deny: unix.EPERM, run: func(*probeEnv) error {
		return execTrue(&syscall.SysProcAttr{Cloneflags: unix.CLONE_NEWUSER})
	}},
	// A NULL argument of size 0: the kernel refuses it with EINVAL.
	{name: "clone3", rule: "clone3", deny: unix.ENOSYS, run: func(*probeEnv) error { _, err := sys(unix.SYS_CLONE3, 0, 0); return err }},

	// Other processes.
	{name: "ptrace(PTRACE_SEIZE) of a child", rule: "ptrace", deny: unix.EPERM, run: func(*probeEnv) error {
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), childEnv+"=sleep")
		if err := cmd.Start(); err != nil {
			return fmt.Errorf("start child to trace: %v", err)
		}
		defer func() {
			cmd.Process.Kill()
			cmd.Wait()
		}()
		return unix.PtraceSeize(cmd.Process.Pid)
	}},
	{name: "process_vm_readv(self)", rule: "process_vm_readv", deny: unix.EPERM, run: func(*probeEnv) error {
		src, dst := []byte("cordon"), make([]byte, 6)
		local := []unix.Iovec{{Base: &dst[0]}}
		local[0].SetLen(len(dst))
		_, err := unix.ProcessVMReadv(unix.Getpid(), local,
			[]unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&src[0])), Len: len(src)}}, 0)
		runtime.KeepAlive(src)
		return err
	}},
	{name: "process_vm_writev(self)", rule: "process_vm_writev", deny: unix.EPERM, run: func(*probeEnv) error {
		src, dst := []byte("cordon"), make([]byte, 6)
		local := []unix.Iovec{{Base: &src[0]}}
		local[0].SetLen(len(src))
		_, err := unix.ProcessVMWritev(unix.Getpid(), local,
			[]unix.RemoteIovec{{Base: uintptr(unsafe.Pointer(&dst[0])), Len: len(dst)}}, 0)
		runtime.KeepAlive(dst)
		return err
	}},
	{name: "pidfd_getfd", rule: "pidfd_getfd", deny: unix.EPERM, run: func(*probeEnv) error { return closingInt(unix.PidfdGetfd(-1, 0, 0)) }},

	// Kernel code and instrumentation, the keyring. Module and kexec calls
	// get arguments the kernel refuses: no image, bad descriptors, unknown
	// flags (never KEXEC_FILE_UNLOAD or an empty kexec_load, which unload).
	{name: "init_module", rule: "init_module", deny: unix.EPERM, run: func(*probeEnv) error {
		_, _, errno := unix.Syscall(unix.SYS_INIT_MODULE, 0, 0, uintptr(unsafe.Pointer(ptr(""))))
		return errnoErr(errno)
	}},
	{name: "finit_module", rule: "finit_module", deny: unix.EPERM, run: func(*probeEnv) error { return unix.FinitModule(-1, "", 0) }},
	{name: "delete_module", rule: "delete_module", deny: unix.EPERM, run: func(*probeEnv) error {
		return unix.DeleteModule("cordon_no_such_module", unix.O_NONBLOCK)
	}},
	{name: "kexec_load", rule: "kexec_load", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_KEXEC_LOAD, 0, 0, 0, 0x8000); return err }},
	{name: "kexec_file_load", rule: "kexec_file_load", deny: unix.EPERM, run: func(*probeEnv) error {
		_, err := sys(unix.SYS_KEXEC_FILE_LOAD, minus1, minus1, 0, 0, 1<<30)
		return err
	}},
	{name: "bpf(BPF_MAP_CREATE)", rule: "bpf", deny: unix.EPERM, run: func(*probeEnv) error {
		// union bpf_attr, map create: map_type, key_size, value_size, max_entries.
		var attr [16]uint32
		attr[0], attr[1], attr[2], attr[3] = unix.BPF_MAP_TYPE_ARRAY, 4, 4, 1
		fd, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_MAP_CREATE, uintptr(unsafe.Pointer(&attr)), unsafe.Sizeof(attr))
		return closing(fd, errnoErr(errno))
	}},
	{name: "perf_event_open(self)", rule: "perf_event_open", deny: unix.EPERM, run: func(*probeEnv) error {
		attr := unix.PerfEventAttr{
			Type:   unix.PERF_TYPE_SOFTWARE,
			Config: unix.PERF_COUNT_SW_CPU_CLOCK,
			Size:   uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
			Bits:   unix.PerfBitDisabled | unix.PerfBitExcludeKernel | unix.PerfBitExcludeHv,
		}
		return closingInt(unix.PerfEventOpen(&attr, 0, -1, -1, unix.PERF_FLAG_FD_CLOEXEC))
	}},
	{name: "keyctl(KEYCTL_GET_KEYRING_ID)", rule: "keyctl", deny: unix.EPERM, run: func(*probeEnv) error {
		_, err := unix.KeyctlInt(unix.KEYCTL_GET_KEYRING_ID, unix.KEY_SPEC_THREAD_KEYRING, 1, 0, 0)
		return err
	}},
	{name: "add_key", rule: "add_key", deny: unix.EPERM, run: func(*probeEnv) error {
		_, err := unix.AddKey("user", "cordon-seccomp-probe", []byte("x"), unix.KEY_SPEC_THREAD_KEYRING)
		return err
	}},
	// No callout information, so the kernel does not upcall: ENOKEY.
	{name: "request_key", rule: "request_key", deny: unix.EPERM, run: func(*probeEnv) error {
		_, _, errno := unix.Syscall6(unix.SYS_REQUEST_KEY, uintptr(unsafe.Pointer(ptr("user"))), uintptr(unsafe.Pointer(ptr("cordon-seccomp-absent"))), 0, 0, 0, 0)
		return errnoErr(errno)
	}},

	// Exploitation aids and seccomp bypasses.
	{name: "userfaultfd", rule: "userfaultfd", deny: unix.EPERM, run: func(*probeEnv) error {
		const uffdUserModeOnly = 1
		return closing(sys(unix.SYS_USERFAULTFD, unix.O_CLOEXEC|uffdUserModeOnly))
	}},
	{name: "open_by_handle_at", rule: "open_by_handle_at", deny: unix.EPERM, run: func(*probeEnv) error {
		var handle [2]uint32 // handle_bytes 0: EINVAL
		fd, _, errno := unix.Syscall(unix.SYS_OPEN_BY_HANDLE_AT, fdArg(unix.AT_FDCWD), uintptr(unsafe.Pointer(&handle)), unix.O_RDONLY|unix.O_CLOEXEC)
		return closing(fd, errnoErr(errno))
	}},
	{name: "name_to_handle_at(/)", rule: "name_to_handle_at", deny: unix.EPERM, run: func(*probeEnv) error {
		_, _, err := unix.NameToHandleAt(unix.AT_FDCWD, "/", 0)
		return err
	}},
	{name: "io_uring_setup", rule: "io_uring_setup", deny: unix.EPERM, run: func(*probeEnv) error {
		var params [120]byte // struct io_uring_params, zeroed
		fd, _, errno := unix.Syscall(unix.SYS_IO_URING_SETUP, 1, uintptr(unsafe.Pointer(&params)), 0)
		return closing(fd, errnoErr(errno))
	}},
	{name: "io_uring_enter", rule: "io_uring_enter", deny: unix.EPERM, run: func(*probeEnv) error {
		_, err := sys(unix.SYS_IO_URING_ENTER, minus1, 0, 0, 0, 0, 0)
		return err
	}},
	{name: "io_uring_register", rule: "io_uring_register", deny: unix.EPERM, run: func(*probeEnv) error {
		_, err := sys(unix.SYS_IO_URING_REGISTER, minus1, 0, 0, 0)
		return err
	}},
	{name: "personality(ADDR_NO_RANDOMIZE)", rule: "personality", deny: unix.EPERM, run: func(*probeEnv) error {
		old, err := personality(0xffffffff)
		if err != nil {
			return err
		}
		if _, err := personality(old | addrNoRandomize); err != nil {
			return err
		}
		_, err = personality(old)
		return err
	}},
	{name: "personality(PER_LINUX32)", rule: "personality", deny: unix.EPERM, run: func(*probeEnv) error {
		old, err := personality(0xffffffff)
		if err != nil {
			return err
		}
		if _, err := personality(perLinux32); err != nil {
			return err
		}
		_, err = personality(old)
		return err
	}},

	// Host administration. Paths do not exist; nothing is switched on or off.
	{name: "acct", rule: "acct", deny: unix.EPERM, run: func(e *probeEnv) error { return unix.Acct(e.absent) }},
	// A quota type beyond MAXQUOTAS: EINVAL.
	{name: "quotactl", rule: "quotactl", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_QUOTACTL, 0xffffffff, 0, 0, 0); return err }},
	{name: "quotactl_fd", rule: "quotactl_fd", deny: unix.EPERM, run: func(*probeEnv) error {
		_, err := sys(unix.SYS_QUOTACTL_FD, 0xffffffff, 0xffffffff, 0, 0)
		return err
	}},
	{name: "syslog(SYSLOG_ACTION_SIZE_BUFFER)", rule: "syslog", deny: unix.EPERM, run: func(*probeEnv) error {
		_, err := unix.Klogctl(10, nil)
		return err
	}},
	{name: "swapon", rule: "swapon", deny: unix.EPERM, run: func(e *probeEnv) error {
		_, _, errno := unix.Syscall(unix.SYS_SWAPON, uintptr(unsafe.Pointer(ptr(e.absent))), 0, 0)
		return errnoErr(errno)
	}},
	{name: "swapoff", rule: "swapoff", deny: unix.EPERM, run: func(e *probeEnv) error {
		_, _, errno := unix.Syscall(unix.SYS_SWAPOFF, uintptr(unsafe.Pointer(ptr(e.absent))), 0, 0)
		return errnoErr(errno)
	}},
	// No magic numbers: EINVAL.
	{name: "reboot", rule: "reboot", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_REBOOT, 0, 0, 0, 0); return err }},
	{name: "vhangup", rule: "vhangup", deny: unix.EPERM, run: func(*probeEnv) error {
		// The child runs in a session of its own with no controlling
		// terminal, so vhangup has nothing to hang up. Check that first.
		if fd, err := unix.Open("/dev/tty", unix.O_RDONLY|unix.O_CLOEXEC, 0); err == nil {
			unix.Close(fd)
			return errors.New("refusing: this process has a controlling terminal")
		}
		_, err := sys(unix.SYS_VHANGUP)
		return err
	}},
	{name: "fanotify_init", rule: "fanotify_init", deny: unix.EPERM, run: func(*probeEnv) error {
		return closingInt(unix.FanotifyInit(unix.FAN_CLASS_NOTIF|unix.FAN_CLOEXEC, unix.O_RDONLY))
	}},

	// NUMA memory placement: empty ranges and the default policy, no-ops.
	{name: "mbind", rule: "mbind", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_MBIND, 0, 0, 0, 0, 0, 0); return err }},
	{name: "set_mempolicy", rule: "set_mempolicy", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_SET_MEMPOLICY, 0, 0, 0); return err }},
	{name: "set_mempolicy_home_node", rule: "set_mempolicy_home_node", deny: unix.EPERM, run: func(*probeEnv) error {
		_, err := sys(unix.SYS_SET_MEMPOLICY_HOME_NODE, 0, 0, 0, 0)
		return err
	}},
	{name: "move_pages", rule: "move_pages", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_MOVE_PAGES, 0, 0, 0, 0, 0, 0); return err }},
	{name: "migrate_pages", rule: "migrate_pages", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_MIGRATE_PAGES, 0, 0, 0, 0); return err }},

	// The clock, left as it is: settimeofday(NULL, NULL) sets nothing,
	// CLOCK_MONOTONIC cannot be set or adjusted, adjtimex with modes 0 reads.
	{name: "settimeofday(NULL, NULL)", rule: "settimeofday", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_SETTIMEOFDAY, 0, 0); return err }},
	{name: "clock_settime(CLOCK_MONOTONIC)", rule: "clock_settime", deny: unix.EPERM, run: func(*probeEnv) error {
		var ts unix.Timespec
		if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
			return err
		}
		return unix.ClockSettime(unix.CLOCK_MONOTONIC, &ts)
	}},
	{name: "clock_adjtime(CLOCK_MONOTONIC)", rule: "clock_adjtime", deny: unix.EPERM, run: func(*probeEnv) error {
		_, err := unix.ClockAdjtime(unix.CLOCK_MONOTONIC, &unix.Timex{})
		return err
	}},
	{name: "adjtimex(read)", rule: "adjtimex", deny: unix.EPERM, run: func(*probeEnv) error { _, err := unix.Adjtimex(&unix.Timex{}); return err }},

	// Obsolete.
	{name: "lookup_dcookie", rule: "lookup_dcookie", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_LOOKUP_DCOOKIE, 0, 0, 0); return err }},
	{name: "nfsservctl", rule: "nfsservctl", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_NFSSERVCTL, 0, 0, 0); return err }},

	// Terminals. The pty is ours and is nobody's controlling terminal.
	{name: "ioctl(pty, TIOCSTI)", rule: "ioctl", deny: unix.EPERM, run: func(e *probeEnv) error {
		return ioctlSTI(e.pts, unix.TIOCSTI)
	}},
	// The kernel reads only the low 32 bits of the request: without the
	// filter this is TIOCSTI (CVE-2019-10063).
	{name: "ioctl(pty, 1<<32|TIOCSTI)", rule: "ioctl", deny: unix.EPERM, run: func(e *probeEnv) error {
		return ioctlSTI(e.pts, 1<<32|unix.TIOCSTI)
	}},
	{name: "ioctl(pty, 0xFFFFFFFF<<32|TIOCSTI)", rule: "ioctl", deny: unix.EPERM, run: func(e *probeEnv) error {
		return ioctlSTI(e.pts, 0xFFFFFFFF_00000000|unix.TIOCSTI)
	}},
	{name: "ioctl(pipe, 1<<32|FIONREAD)", rule: "ioctl", deny: unix.EPERM, run: func(e *probeEnv) error {
		var n int32
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(e.pipeR), 1<<32|unix.TIOCINQ, uintptr(unsafe.Pointer(&n)))
		return errnoErr(errno)
	}},
	// TIOCLINUX is for virtual consoles; a pty refuses it.
	{name: "ioctl(pty, TIOCLINUX)", rule: "ioctl", deny: unix.EPERM, run: func(e *probeEnv) error {
		sub := byte(7) // TIOCL_GETSHIFTSTATE, a read
		_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(e.pts), unix.TIOCLINUX, uintptr(unsafe.Pointer(&sub)))
		return errnoErr(errno)
	}},

	// Address families.
	{name: "socket(AF_NETLINK)", rule: "socket", deny: unix.EPERM, run: socketProbe(unix.AF_NETLINK, unix.SOCK_RAW)},
	{name: "socket(AF_PACKET)", rule: "socket", deny: unix.EPERM, run: socketProbe(unix.AF_PACKET, unix.SOCK_DGRAM)},
	{name: "socket(AF_VSOCK)", rule: "socket", deny: unix.EPERM, run: socketProbe(unix.AF_VSOCK, unix.SOCK_STREAM)},
	{name: "socket(AF_ALG)", rule: "socket", deny: unix.EPERM, run: socketProbe(unix.AF_ALG, unix.SOCK_SEQPACKET)},
	{name: "socket(AF_UNSPEC)", rule: "socket", deny: unix.EPERM, run: socketProbe(unix.AF_UNSPEC, unix.SOCK_STREAM)},
	// The kernel reads the family as an int: without the filter this is AF_INET.
	{name: "socket(1<<32|AF_INET)", rule: "socket", deny: unix.EPERM, run: func(*probeEnv) error {
		return closing(sys(unix.SYS_SOCKET, 1<<32|unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0))
	}},
	// Both succeed without the filter.
	{name: "memfd_create(MFD_CLOEXEC)", rule: "memfd_create", deny: unix.EPERM, run: func(*probeEnv) error {
		return closingInt(unix.MemfdCreate("probe", unix.MFD_CLOEXEC))
	}},
	{name: "memfd_create(MFD_NOEXEC_SEAL)", rule: "memfd_create", deny: unix.EPERM, run: func(*probeEnv) error {
		return closingInt(unix.MemfdCreate("probe", unix.MFD_CLOEXEC|unix.MFD_NOEXEC_SEAL))
	}},
	// Core limits: each sets the limit it already has, so that it
	// succeeds without the filter and changes nothing.
	// Memory merging: each asks for what is harmless unfiltered (turning
	// merging off, or KSM on a fresh private page).
	{name: "prctl(PR_SET_MEMORY_MERGE, 0)", rule: "prctl", deny: unix.EPERM, run: func(*probeEnv) error {
		return unix.Prctl(67, 0, 0, 0, 0)
	}},
	{name: "prctl(1<<32|PR_GET_DUMPABLE)", rule: "prctl", deny: unix.EPERM, run: func(*probeEnv) error {
		if _, _, e := unix.Syscall6(unix.SYS_PRCTL, 1<<32|unix.PR_GET_DUMPABLE, 0, 0, 0, 0, 0); e != 0 {
			return e
		}
		return nil
	}},
	{name: "madvise(MADV_MERGEABLE)", rule: "madvise", deny: unix.EPERM, run: func(*probeEnv) error {
		b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return err
		}
		defer unix.Munmap(b)
		return unix.Madvise(b, unix.MADV_MERGEABLE)
	}},
	{name: "madvise(1<<32|MADV_NORMAL)", rule: "madvise", deny: unix.EPERM, run: func(*probeEnv) error {
		b, err := unix.Mmap(-1, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return err
		}
		defer unix.Munmap(b)
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, uintptr(unsafe.Pointer(&b[0])), 4096, 1<<32|unix.MADV_NORMAL); e != 0 {
			return e
		}
		return nil
	}},
	{name: "setrlimit(RLIMIT_CORE)", rule: "setrlimit", deny: unix.EPERM, run: func(*probeEnv) error {
		return sameRlimit(unix.SYS_SETRLIMIT, unix.RLIMIT_CORE)
	}},
	{name: "setrlimit(1<<32|RLIMIT_CORE)", rule: "setrlimit", deny: unix.EPERM, run: func(*probeEnv) error {
		return sameRlimit(unix.SYS_SETRLIMIT, 1<<32|unix.RLIMIT_CORE)
	}},
	{name: "prlimit64(RLIMIT_CORE, new)", rule: "prlimit64", deny: unix.EPERM, run: func(*probeEnv) error {
		return sameRlimit(unix.SYS_PRLIMIT64, unix.RLIMIT_CORE)
	}},
	{name: "prlimit64(1<<32|RLIMIT_CORE, new)", rule: "prlimit64", deny: unix.EPERM, run: func(*probeEnv) error {
		return sameRlimit(unix.SYS_PRLIMIT64, 1<<32|unix.RLIMIT_CORE)
	}},
	{name: "memfd_secret", rule: "memfd_secret", deny: unix.EPERM,
		run: func(*probeEnv) error { return closing(sys(unix.SYS_MEMFD_SECRET, 0)) }},
	{name: "sync", rule: "sync", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_SYNC); return err }},
	{name: "syncfs(pipe)", rule: "syncfs", deny: unix.EPERM, run: func(e *probeEnv) error {
		_, err := sys(unix.SYS_SYNCFS, uintptr(e.pipeR))
		return err
	}},

	// Other processes and the host name. As root, sethostname and
	// setdomainname fail on the length (at most 64) before changing
	// anything.
	{name: "kcmp(self, self, KCMP_FILE, 0, 0)", rule: "kcmp", deny: unix.EPERM, run: named("kcmp", uintptr(unix.Getpid()), uintptr(unix.Getpid()), 0, 0, 0)},
	{name: "process_madvise(-1)", rule: "process_madvise", deny: unix.EPERM, run: named("process_madvise", minus1, 0, 0, 0, 0)},
	{name: "process_mrelease(-1)", rule: "process_mrelease", deny: unix.EPERM, run: named("process_mrelease", minus1, 0)},
	{name: "sethostname(NULL, 65)", rule: "sethostname", deny: unix.EPERM, same: "without CAP_SYS_ADMIN the kernel answers EPERM as well",
		run: named("sethostname", 0, 65)},
	{name: "setdomainname(NULL, 65)", rule: "setdomainname", deny: unix.EPERM, same: "without CAP_SYS_ADMIN the kernel answers EPERM as well",
		run: named("setdomainname", 0, 65)},
	{name: "fanotify_mark(-1)", rule: "fanotify_mark", deny: unix.EPERM, run: named("fanotify_mark", minus1, 0, 0, fdArg(unix.AT_FDCWD), 0)},
	{name: "cachestat(-1)", rule: "cachestat", deny: unix.EPERM, run: named("cachestat", minus1, 0, 0, 0)},
	{name: "remap_file_pages(0)", rule: "remap_file_pages", deny: unix.EPERM, run: named("remap_file_pages", 0, 0, 0, 0, 0)},

	// Newer variants answer ENOSYS. Invalid arguments: without the filter
	// the kernel (6.13 or later) refuses them with EINVAL, EFAULT or EBADF.
	{name: "futex_wake(NULL)", rule: "futex_wake", deny: unix.ENOSYS, same: newerSame, run: named("futex_wake", 0, 0, 0, 0)},
	{name: "futex_wait(NULL)", rule: "futex_wait", deny: unix.ENOSYS, same: newerSame, run: named("futex_wait", 0, 0, 0, 0, 0, 0)},
	{name: "futex_requeue(NULL)", rule: "futex_requeue", deny: unix.ENOSYS, same: newerSame, run: named("futex_requeue", 0, 0, 0, 0)},
	{name: "setxattrat(-1)", rule: "setxattrat", deny: unix.ENOSYS, same: newerSame, run: named("setxattrat", minus1, 0, 0, 0, 0, 0)},
	{name: "getxattrat(-1)", rule: "getxattrat", deny: unix.ENOSYS, same: newerSame, run: named("getxattrat", minus1, 0, 0, 0, 0, 0)},
	{name: "listxattrat(-1)", rule: "listxattrat", deny: unix.ENOSYS, same: newerSame, run: named("listxattrat", minus1, 0, 0, 0, 0)},
	{name: "removexattrat(-1)", rule: "removexattrat", deny: unix.ENOSYS, same: newerSame, run: named("removexattrat", minus1, 0, 0, 0)},
	{name: "statmount(NULL)", rule: "statmount", deny: unix.ENOSYS, same: newerSame, run: named("statmount", 0, 0, 0, 0)},
	{name: "listmount(NULL)", rule: "listmount", deny: unix.ENOSYS, same: newerSame, run: named("listmount", 0, 0, 0, 0)},
	{name: "lsm_get_self_attr(0)", rule: "lsm_get_self_attr", deny: unix.ENOSYS, same: newerSame, run: named("lsm_get_self_attr", 0, 0, 0, 0)},
	{name: "lsm_set_self_attr(0)", rule: "lsm_set_self_attr", deny: unix.ENOSYS, same: newerSame, run: named("lsm_set_self_attr", 0, 0, 0, 0)},
	{name: "lsm_list_modules(NULL)", rule: "lsm_list_modules", deny: unix.ENOSYS, same: newerSame, run: named("lsm_list_modules", 0, 0, 0)},

	// Numbers no rule names: below the newest call the table knows, the
	// default's EPERM (the kernel has no call there: ENOSYS); above it,
	// ENOSYS, as from a kernel without that call.
	{name: "number 400 (no call)", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(400); return err }},
	{name: "number above the newest known", deny: unix.ENOSYS, same: "the kernel has no call there either",
		run: func(*probeEnv) error { _, err := sys(uintptr(newestKnown(arches[runtime.GOARCH])) + 1); return err }},

	// Set-ID modes. Each names a path in a directory that does not exist
	// (ENOENT without the filter) or a bad descriptor (EBADF): nothing is
	// created or changed either way.
	{name: "fchmodat(absent, 0o4755)", rule: "fchmodat", deny: unix.EPERM, run: func(e *probeEnv) error {
		return unix.Fchmodat(unix.AT_FDCWD, e.absent, 0o4755, 0)
	}},
	{name: "fchmodat(absent, 0o755)", want: unix.ENOENT, run: func(e *probeEnv) error {
		return unix.Fchmodat(unix.AT_FDCWD, e.absent, 0o755, 0)
	}},
	{name: "fchmodat2(absent, 0o2755)", rule: "fchmodat2", deny: unix.EPERM, same: newerSame, run: func(e *probeEnv) error {
		_, _, errno := unix.Syscall6(uintptr(arches[runtime.GOARCH].SyscallNames["fchmodat2"]), fdArg(unix.AT_FDCWD), uintptr(unsafe.Pointer(ptr(e.absent))), 0o2755, 0, 0, 0)
		return errnoErr(errno)
	}},
	{name: "fchmod(-1, 0o4755)", rule: "fchmod", deny: unix.EPERM, run: func(*probeEnv) error { return unix.Fchmod(-1, 0o4755) }},
	{name: "openat(absent/x, O_CREAT, 0o4755)", rule: "openat", deny: unix.EPERM, run: func(e *probeEnv) error {
		return closingInt(unix.Openat(unix.AT_FDCWD, e.absent+"/x", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o4755))
	}},
	{name: "openat(absent/x, O_CREAT, 0o644)", want: unix.ENOENT, run: func(e *probeEnv) error {
		return closingInt(unix.Openat(unix.AT_FDCWD, e.absent+"/x", unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o644))
	}},
	{name: "mkdirat(absent/x, 0o2775)", rule: "mkdirat", deny: unix.EPERM, run: func(e *probeEnv) error {
		return unix.Mkdirat(unix.AT_FDCWD, e.absent+"/x", 0o2775)
	}},
	{name: "mknodat(absent/x, S_IFREG|0o4755)", rule: "mknodat", deny: unix.EPERM, run: func(e *probeEnv) error {
		return unix.Mknodat(unix.AT_FDCWD, e.absent+"/x", unix.S_IFREG|0o4755, 0)
	}},
	{name: "openat2(-1)", rule: "openat2", deny: unix.ENOSYS, run: named("openat2", minus1, 0, 0, 0)},

	{name: "socketpair(AF_NETLINK)", rule: "socketpair", deny: unix.EPERM, run: socketpairProbe(unix.AF_NETLINK, unix.SOCK_RAW)},
	{name: "socketpair(AF_VSOCK)", rule: "socketpair", deny: unix.EPERM, run: socketpairProbe(unix.AF_VSOCK, unix.SOCK_STREAM)},
}

// newerSame is why a newer call may answer ENOSYS without the filter.
const newerSame = "a kernel older than the call answers ENOSYS itself"

// named returns a probe that makes the system call go-seccomp-bpf names
// name on this GOARCH, with args that are not pointers.
func named(name string, args ...uintptr) func(*probeEnv) error {
	return func(*probeEnv) error {
		nr, ok := arches[runtime.GOARCH].SyscallNames[name]
		if !ok {
			return fmt.Errorf("no system call %q on %s", name, runtime.GOARCH)
		}
		_, err := sys(uintptr(nr), args...)
		return err
	}
}

// sameRlimit sets resource (its low 32 bits name it to the kernel) to
// the limit it has, with setrlimit or prlimit64 (nr).
func sameRlimit(nr, resource uintptr) error {
	var lim unix.Rlimit
	if err := unix.Getrlimit(int(uint32(resource)), &lim); err != nil {
		return err
	}
	if nr == unix.SYS_PRLIMIT64 {
		_, err := sys(nr, 0, resource, uintptr(unsafe.Pointer(&lim)), 0)
		return err
	}
	_, err := sys(nr, resource, uintptr(unsafe.Pointer(&lim)))
	return err
}

func ioctlSTI(fd int, req uintptr) error {
	c := byte('\n')
	_, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(fd), req, uintptr(unsafe.Pointer(&c)))
	return errnoErr(errno)
}

func errnoErr(errno unix.Errno) error {
	if errno != 0 {
		return errno
	}
	return nil
}

// fdArg passes a file descriptor, which may be negative (AT_FDCWD).
func fdArg(fd int) uintptr { return uintptr(fd) }
