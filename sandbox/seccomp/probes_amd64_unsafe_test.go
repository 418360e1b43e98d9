//go:build linux && amd64

package seccomp

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

func init() {
	probes = append(probes,
		probe{name: "modify_ldt(read)", rule: "modify_ldt", deny: unix.EPERM, run: func(*probeEnv) error {
			var buf [16]byte
			_, _, errno := unix.Syscall(unix.SYS_MODIFY_LDT, 0, uintptr(unsafe.Pointer(&buf)), unsafe.Sizeof(buf))
			return errnoErr(errno)
		}},
		// Level 0 never raises privilege.
		probe{name: "iopl(0)", rule: "iopl", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_IOPL, 0); return err }},
		// An empty range: EINVAL.
		probe{name: "ioperm", rule: "ioperm", deny: unix.EPERM, run: func(*probeEnv) error { _, err := sys(unix.SYS_IOPERM, 0, 0, 0); return err }},
		probe{name: "uselib", rule: "uselib", deny: unix.EPERM, run: func(e *probeEnv) error {
			_, _, errno := unix.Syscall(unix.SYS_USELIB, uintptr(unsafe.Pointer(ptr(e.absent))), 0, 0)
			return errnoErr(errno)
		}},
		// Set-ID modes through the amd64-only calls: paths in a
		// directory that does not exist, ENOENT without the filter.
		probe{name: "chmod(absent, 0o4755)", rule: "chmod", deny: unix.EPERM, run: func(e *probeEnv) error {
			_, _, errno := unix.Syscall(unix.SYS_CHMOD, uintptr(unsafe.Pointer(ptr(e.absent))), 0o4755, 0)
			return errnoErr(errno)
		}},
		probe{name: "open(absent/x, O_CREAT, 0o2755)", rule: "open", deny: unix.EPERM, run: func(e *probeEnv) error {
			return closing(sys(unix.SYS_OPEN, uintptr(unsafe.Pointer(ptr(e.absent+"/x"))), unix.O_CREAT|unix.O_WRONLY|unix.O_CLOEXEC, 0o2755))
		}},
		probe{name: "creat(absent/x, 0o4755)", rule: "creat", deny: unix.EPERM, run: func(e *probeEnv) error {
			return closing(sys(unix.SYS_CREAT, uintptr(unsafe.Pointer(ptr(e.absent+"/x"))), 0o4755))
		}},
		probe{name: "mkdir(absent/x, 0o2775)", rule: "mkdir", deny: unix.EPERM, run: func(e *probeEnv) error {
			_, err := sys(unix.SYS_MKDIR, uintptr(unsafe.Pointer(ptr(e.absent+"/x"))), 0o2775)
			return err
		}},
		probe{name: "mknod(absent/x, S_IFREG|0o4755)", rule: "mknod", deny: unix.EPERM, run: func(e *probeEnv) error {
			_, err := sys(unix.SYS_MKNOD, uintptr(unsafe.Pointer(ptr(e.absent+"/x"))), unix.S_IFREG|0o4755, 0)
			return err
		}},
		// The x32 getpid, which the check before the rules answers (it is
		// not a Rule).
		probe{name: "x32 getpid", deny: unix.ENOSYS, same: "a kernel without CONFIG_X86_X32_ABI, or booted without x32 support, answers ENOSYS to every x32 call itself", run: func(*probeEnv) error {
			_, err := sys(0x40000000 | unix.SYS_GETPID)
			return err
		}},
	)
}
