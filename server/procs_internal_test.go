package server

import (
	"sync"
	"testing"
	"time"
)

// TestSpareProc: the first run to execute raises GOMAXPROCS by one, later
// ones leave it, and it comes back only once none has executed for the
// linger; a run that starts within the linger keeps it raised.
func TestSpareProc(t *testing.T) {
	var mu sync.Mutex
	n, changes := 2, 0
	get := func() int { mu.Lock(); defer mu.Unlock(); return n }
	p := &spareProc{linger: 100 * time.Millisecond,
		procs: func(v int) int {
			mu.Lock()
			defer mu.Unlock()
			old := n
			if v > 0 {
				n = v
				changes++
			}
			return old
		},
		reset: func() { mu.Lock(); defer mu.Unlock(); n = 2; changes++ },
	}
	want := func(v int, when string) {
		t.Helper()
		if got := get(); got != v {
			t.Fatalf("%s: GOMAXPROCS %d, want %d", when, got, v)
		}
	}
	p.begin()
	want(3, "one run executing")
	p.begin()
	want(3, "two runs executing")
	p.end()
	p.end()
	want(3, "just after the last run")
	time.Sleep(50 * time.Millisecond)
	p.begin() // within the linger
	time.Sleep(150 * time.Millisecond)
	want(3, "a run that began within the linger, still executing")
	p.end()
	deadline := time.Now().Add(5 * time.Second)
	for get() != 2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	want(2, "after the linger")
	mu.Lock()
	defer mu.Unlock()
	if changes != 2 {
		t.Errorf("GOMAXPROCS changed %d times, want 2 (raised once, given back once)", changes)
	}
}
