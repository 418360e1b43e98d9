package server

import (
	"fmt"
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

// TestSpareProcConcurrent: runs that begin and end from many goroutines
// at once, with a linger short enough that restores fire while runs
// begin (a timer that fires as it is stopped, a stale one that fires
// after another was set), never raise GOMAXPROCS by more than one or
// lower it below the runtime's choice, keep it raised while any run
// executes, and give the runtime its own choice back once none does.
func TestSpareProcConcurrent(t *testing.T) {
	var mu sync.Mutex
	const def = 2
	n, bad := def, ""
	p := &spareProc{linger: 200 * time.Microsecond,
		procs: func(v int) int {
			mu.Lock()
			defer mu.Unlock()
			old := n
			if v > 0 {
				n = v
				if n != def+1 && bad == "" {
					bad = fmt.Sprintf("GOMAXPROCS set to %d", n)
				}
			}
			return old
		},
		reset: func() { mu.Lock(); defer mu.Unlock(); n = def },
	}
	get := func() int { mu.Lock(); defer mu.Unlock(); return n }
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 1000 {
				p.begin()
				if v := get(); v != def+1 {
					errs <- fmt.Errorf("a run executing with GOMAXPROCS %d, want %d", v, def+1)
					p.end()
					return
				}
				if (i+g)%4 == 0 {
					time.Sleep(time.Duration(i%3) * 100 * time.Microsecond)
				}
				if v := get(); v != def+1 {
					errs <- fmt.Errorf("a run still executing with GOMAXPROCS %d, want %d", v, def+1)
					p.end()
					return
				}
				p.end()
				if (i+g)%3 == 0 {
					time.Sleep(time.Duration(i%5) * 100 * time.Microsecond) // around the linger
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for get() != def && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	time.Sleep(10 * time.Millisecond) // any stale restore has fired
	mu.Lock()
	defer mu.Unlock()
	if n != def || bad != "" {
		t.Fatalf("after the last run: GOMAXPROCS %d, want %d; %s", n, def, bad)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running != 0 || p.raised {
		t.Fatalf("after the last run: %d running, raised %v", p.running, p.raised)
	}
}
