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
