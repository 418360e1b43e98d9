package sandbox

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// This file holds the package's raw setfsuid/setfsgid calls
// (TestUnsafeConfined): x/sys has no wrapper that acts on one thread only.

// setfsid calls setfsuid or setfsgid on this thread only and checks that
// the id took effect (both calls return the previous id, never an error).
func setfsid(nr uintptr, id int) error {
	unix.RawSyscall(nr, uintptr(id), 0, 0)
	got, _, _ := unix.RawSyscall(nr, ^uintptr(0), 0, 0) // -1 changes nothing and returns the current id
	if int(got) != id {
		return fmt.Errorf("id is %d after setting %d", got, id)
	}
	return nil
}

// asNamespaceOwner makes the calling thread the owner of the user
// namespaces it creates from now on: its real, effective and file system
// uid and gid become id, with no supplementary groups. The kernel charges
// a user namespace's per-user counts (kernel/ucount.c: inotify
// instances and watches, queued signals, message queue bytes, user
// namespaces) to its owner as well, so the run's are charged to its own
// host uid, not to host root. The saved uid and gid stay 0 and the
// effective capabilities are raised again, so that the thread can still
// create the namespaces where the host allows that only to privileged
// callers, and write their id maps.
//
// Only this thread changes (raw calls; syscall.Setresuid would change
// every thread). The caller must have locked it and must let its
// goroutine exit without unlocking it, so that Go ends the thread and no
// other goroutine ever runs with these ids.
func asNamespaceOwner(id int) error {
	if _, _, e := unix.RawSyscall(unix.SYS_SETGROUPS, 0, 0, 0); e != 0 {
		return fmt.Errorf("setgroups: %w", e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESGID, uintptr(id), uintptr(id), 0); e != 0 {
		return fmt.Errorf("setresgid(%d): %w", id, e)
	}
	if _, _, e := unix.RawSyscall(unix.SYS_SETRESUID, uintptr(id), uintptr(id), 0); e != 0 {
		return fmt.Errorf("setresuid(%d): %w", id, e)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capget: %w", err)
	}
	for i := range data {
		data[i].Effective = data[i].Permitted
	}
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}
