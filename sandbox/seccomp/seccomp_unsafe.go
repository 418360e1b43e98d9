//go:build linux

package seccomp

import (
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// This file holds the package's only raw system calls and uses of unsafe.

// setModeFilter loads filter on the calling thread: seccomp(2) with
// SECCOMP_SET_MODE_FILTER and no flags.
func setModeFilter(filter []unix.SockFilter) error {
	if len(filter) == 0 || len(filter) > 0xffff {
		return unix.EINVAL
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return errno
	}
	return nil
}

// setModeFilterNull calls seccomp(SECCOMP_SET_MODE_FILTER, 0, NULL) and
// returns its errno (0 would mean the kernel accepted a NULL program).
func setModeFilterNull() unix.Errno {
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, 0)
	return errno
}

// actionAvail asks the kernel whether it knows action:
// seccomp(SECCOMP_GET_ACTION_AVAIL).
func actionAvail(action uint32) error {
	_, _, errno := unix.RawSyscall(unix.SYS_SECCOMP, unix.SECCOMP_GET_ACTION_AVAIL, 0, uintptr(unsafe.Pointer(&action)))
	if errno != 0 {
		return errno
	}
	return nil
}
