package server

import (
	"runtime"
	"testing"
	"time"
)

// TestSpareProc: the first run to execute raises GOMAXPROCS by one, later
// ones leave it, and it comes back only once none has executed for the
// linger; a run that starts within the linger keeps it raised. With the
// operator's GOMAXPROCS set, nothing changes.
func TestSpareProc(t *testing.T) {
	base := runtime.GOMAXPROCS(0)
	t.Cleanup(func() { runtime.SetDefaultGOMAXPROCS() })
	p := &spareProc{linger: 100 * time.Millisecond}
	want := func(n int, when string) {
		t.Helper()
		if got := runtime.GOMAXPROCS(0); got != n {
			t.Fatalf("%s: GOMAXPROCS %d, want %d", when, got, n)
		}
	}
	p.begin()
	want(base+1, "one run executing")
	p.begin()
	want(base+1, "two runs executing")
	p.end()
	p.end()
	want(base+1, "just after the last run")
	time.Sleep(50 * time.Millisecond)
	p.begin() // within the linger
	time.Sleep(150 * time.Millisecond)
	want(base+1, "a run that began within the linger, still executing")
	p.end()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.GOMAXPROCS(0) != base && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	want(base, "after the linger")

	off := &spareProc{off: true, linger: time.Millisecond}
	off.begin()
	want(base, "the operator's GOMAXPROCS")
	off.end()
}
