//go:build linux

package nvmldl

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"golang.org/x/sys/unix"
)

// Isolate prepares the helper's process before it opens the library:
//
//   - It closes every descriptor above standard error that is not
//     close-on-exec: those are what cordon inherited from its own caller
//     and os/exec passed on (cordon opens its own close-on-exec, as does
//     the Go runtime here), and neither NVIDIA's library nor this helper
//     has any use for them.
//   - It catches and drops the terminal's and a service manager's
//     signals (SIGINT, SIGTERM, SIGHUP, SIGQUIT), which reach the helper
//     with cordon's process group or cgroup: cordon catches them to end
//     its run and seal it, reading the GPU meter once more. The helper
//     ends at the end of its input (cordon's Close, or cordon's death) or
//     when cordon kills it. A signal the helper inherited ignored stays
//     ignored.
//
// Without /proc/self/fd it fails: it cannot tell what it holds.
func Isolate() error {
	dropped := make(chan os.Signal, 1) // never read: Notify drops what does not fit
	for _, sig := range []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT} {
		if !signal.Ignored(sig) {
			signal.Notify(dropped, sig)
		}
	}
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return fmt.Errorf("listing its descriptors: %v", err)
	}
	for _, e := range fds {
		fd, err := strconv.Atoi(e.Name())
		if err != nil || fd <= 2 {
			continue
		}
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil { // the directory ReadDir held, now closed
			continue
		}
		if flags&unix.FD_CLOEXEC == 0 {
			if err := unix.Close(fd); err != nil {
				return fmt.Errorf("closing inherited descriptor %d: %v", fd, err)
			}
		}
	}
	return nil
}
