// Package phase records where a cold start's time goes: named marks on
// the system's monotonic clock, which every process on the host shares,
// so that marks from cordon and from the sandbox's init can be put on one
// time line. Recording is off unless Enable is called; a mark then costs
// a clock read and an append. `cordon exec` enables it when the
// environment variable CORDON_PHASES holds the monotonic time at which
// its caller started it (scripts/bench-phases), and prints the marks to
// stderr at exit (docs/PERFORMANCE.md, "The sandbox").
package phase

import (
	"sync"
	"sync/atomic"
)

// Mark is one named moment: Name happened at T, in nanoseconds of the
// monotonic clock (CLOCK_MONOTONIC on Linux).
type Mark struct {
	Name string `json:"name"`
	T    int64  `json:"t"`
}

var (
	on atomic.Bool

	mu    sync.Mutex
	marks []Mark // guarded by mu
)

// MaxMarks bounds how many marks are kept: later ones are dropped (a
// long-lived process that records marks never grows without bound).
const MaxMarks = 1024

// Enable starts recording marks.
func Enable() { on.Store(true) }

// Disable stops recording marks.
func Disable() { on.Store(false) }

// Reset drops every mark recorded so far.
func Reset() {
	mu.Lock()
	marks = nil
	mu.Unlock()
}

// Enabled reports whether marks are recorded.
func Enabled() bool { return on.Load() }

// Add records that name happens now, when recording is enabled.
func Add(name string) {
	if !on.Load() {
		return
	}
	AddAt(name, Now())
}

// AddAt records that name happened at t (a Now reading), when recording
// is enabled: marks another process took, for one.
func AddAt(name string, t int64) {
	if !on.Load() {
		return
	}
	mu.Lock()
	if len(marks) < MaxMarks {
		marks = append(marks, Mark{Name: name, T: t})
	}
	mu.Unlock()
}

// Marks returns the recorded marks in the order they were recorded.
func Marks() []Mark {
	mu.Lock()
	defer mu.Unlock()
	return append([]Mark(nil), marks...)
}
