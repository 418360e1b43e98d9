package seccomp

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"

	seccompbpf "github.com/elastic/go-seccomp-bpf"
	"golang.org/x/net/bpf"
	"golang.org/x/sys/unix"
)

// Install loads the filter on the calling OS thread. Other threads of the
// process stay unfiltered: there is no SECCOMP_FILTER_FLAG_TSYNC.
//
// Preconditions: the caller holds runtime.LockOSThread, and keeps holding
// it; unlocking would hand the filtered thread back to the Go scheduler to
// run unrelated goroutines. Let the goroutine exit while still locked and
// the runtime discards the thread.
//
// Processes started from this thread (os/exec, which forks on the calling
// thread) inherit the filter and no_new_privs across fork and execve, and
// so do all their threads. Threads the Go runtime creates for this process
// do not: the runtime creates them from a separate template thread while
// a goroutine is locked.
//
// Install first sets no_new_privs on the thread, which seccomp requires of
// a caller without CAP_SYS_ADMIN; it stays set if loading then fails.
// Installing twice stacks two copies of the filter, which is harmless.
//
// Errors wrap ErrUnavailable when the kernel cannot load the filter (see
// Supported), and errors.ErrUnsupported on a GOARCH other than amd64 and
// arm64.
func Install() error {
	f, err := Compile()
	if err != nil {
		return err
	}
	return f.Install()
}

// Filter is the assembled filter: the kernel's struct sock_filter array
// for the running GOARCH. Compile makes it; Install loads it. Its binary
// form (MarshalBinary, ParseFilter) is how a process that compiled it
// hands it to another on the same host, as cordon hands it to sandbox
// init, which then need not assemble it on its own start path.
type Filter []unix.SockFilter

// compiled is the filter, assembled once per process.
var compiled = sync.OnceValues(func() (Filter, error) {
	if _, err := archInfo(runtime.GOARCH); err != nil {
		return nil, err
	}
	insts, err := program()
	if err != nil {
		return nil, err
	}
	raw, err := bpf.Assemble(insts)
	if err != nil {
		return nil, fmt.Errorf("seccomp: assemble BPF: %w", err)
	}
	f := make(Filter, len(raw))
	for i, in := range raw {
		f[i] = unix.SockFilter{Code: in.Op, Jt: in.Jt, Jf: in.Jf, K: in.K}
	}
	return f, nil
})

// Compile returns the filter for the running GOARCH, assembling it on the
// first call. The result is shared: callers must not modify it. Errors
// wrap errors.ErrUnsupported on a GOARCH other than amd64 and arm64.
func Compile() (Filter, error) { return compiled() }

// filterInsnSize is the size of one struct sock_filter.
const filterInsnSize = 8

// MarshalBinary returns f as struct sock_filter records in the host's
// byte order (code, jt, jf, k): 8 bytes each.
func (f Filter) MarshalBinary() ([]byte, error) {
	b := make([]byte, 0, len(f)*filterInsnSize)
	for _, in := range f {
		b = binary.NativeEndian.AppendUint16(b, in.Code)
		b = append(b, in.Jt, in.Jf)
		b = binary.NativeEndian.AppendUint32(b, in.K)
	}
	return b, nil
}

// ParseFilter reads MarshalBinary's form. It checks only the framing
// (a whole number of records, 1 to 4096 of them: BPF_MAXINSNS); the
// kernel checks the program when Install loads it.
func ParseFilter(b []byte) (Filter, error) {
	if len(b) == 0 || len(b)%filterInsnSize != 0 || len(b)/filterInsnSize > 4096 {
		return nil, fmt.Errorf("seccomp: a filter of %d bytes is not 1 to 4096 records of %d bytes", len(b), filterInsnSize)
	}
	f := make(Filter, len(b)/filterInsnSize)
	for i := range f {
		r := b[i*filterInsnSize:]
		f[i] = unix.SockFilter{Code: binary.NativeEndian.Uint16(r), Jt: r[2], Jf: r[3], K: binary.NativeEndian.Uint32(r[4:])}
	}
	return f, nil
}

// Install loads f on the calling OS thread, with Install's preconditions
// and effects (no_new_privs first). It checks Supported first.
func (f Filter) Install() error {
	if err := Supported(); err != nil {
		return err
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("seccomp: set no_new_privs: %w", err)
	}
	// Supported has checked filter mode, so a failure here (EINVAL: the
	// kernel rejected the program) is not ErrUnavailable.
	if err := setModeFilter(f); err != nil {
		return fmt.Errorf("seccomp: load filter: %w", err)
	}
	return nil
}

// Supported returns nil when this kernel can load the filter here, and
// otherwise an error wrapping ErrUnavailable that names what is missing:
// the seccomp(2) system call, filter mode (CONFIG_SECCOMP_FILTER), or one
// of the actions the filter uses (SECCOMP_RET_KILL_PROCESS needs Linux
// 4.14). On a GOARCH other than amd64 and arm64 the error wraps
// errors.ErrUnsupported instead. Supported changes nothing.
func Supported() error {
	if _, err := archInfo(runtime.GOARCH); err != nil {
		return err
	}
	// A NULL program: a kernel with filter mode fails copying it in
	// (EFAULT), before it looks at privileges or no_new_privs.
	switch err := setModeFilterNull(); err {
	case unix.EFAULT:
	case unix.ENOSYS:
		return fmt.Errorf("seccomp: kernel has no seccomp(2) system call: %w", ErrUnavailable)
	case unix.EINVAL:
		return fmt.Errorf("seccomp: kernel lacks seccomp filter mode (CONFIG_SECCOMP_FILTER): %w", ErrUnavailable)
	default:
		return fmt.Errorf("seccomp: probing filter mode: seccomp(SECCOMP_SET_MODE_FILTER, NULL) = %v, want EFAULT: %w", err, ErrUnavailable)
	}
	for _, a := range []struct {
		name   string
		action seccompbpf.Action
	}{
		{"SECCOMP_RET_KILL_PROCESS", seccompbpf.ActionKillProcess},
		{"SECCOMP_RET_ERRNO", seccompbpf.ActionErrno},
		{"SECCOMP_RET_ALLOW", seccompbpf.ActionAllow},
	} {
		if err := actionAvail(uint32(a.action)); err != nil {
			return fmt.Errorf("seccomp: kernel lacks action %s: %v: %w", a.name, err, ErrUnavailable)
		}
	}
	return nil
}
