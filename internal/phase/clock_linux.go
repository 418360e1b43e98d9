package phase

import "golang.org/x/sys/unix"

// Now reads the monotonic clock that all processes on the host share.
func Now() int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts); err != nil {
		return 0
	}
	return ts.Nano()
}
