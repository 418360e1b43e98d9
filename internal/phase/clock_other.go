//go:build !linux

package phase

import "time"

var start = time.Now()

// Now reads a monotonic clock; outside Linux it is this process's own.
func Now() int64 { return int64(time.Since(start)) }
