package server

import (
	"fmt"
	"sync"
	"testing"
	"time"
)

// fakeProcs stands in for the runtime's GOMAXPROCS (its own choice:
// def), counting the changes and remembering the first set to a value
// other than def+1.
type fakeProcs struct {
	mu      sync.Mutex
	def, n  int
	changes int
	bad     string
}

func newFakeProcs(def int, linger time.Duration) (*fakeProcs, *spareProc) {
	f := &fakeProcs{def: def, n: def}
	return f, &spareProc{linger: linger, procs: f.procs, reset: f.reset}
}

func (f *fakeProcs) procs(v int) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	old := f.n
	if v > 0 {
		f.n = v
		f.changes++
		if v != f.def+1 && f.bad == "" {
			f.bad = fmt.Sprintf("GOMAXPROCS set to %d", v)
		}
	}
	return old
}

func (f *fakeProcs) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n = f.def
	f.changes++
}

func (f *fakeProcs) get() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// TestSpareProc: the first run to execute raises GOMAXPROCS by one, later
// ones leave it, and it comes back only once none has executed for the
// linger; a run that starts within the linger keeps it raised.
func TestSpareProc(t *testing.T) {
	f, p := newFakeProcs(2, 100*time.Millisecond)
	get := f.get
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
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.changes != 2 || f.bad != "" {
		t.Errorf("GOMAXPROCS changed %d times, want 2 (raised once, given back once); %s", f.changes, f.bad)
	}
}

// TestSpareProcConcurrent: runs that begin and end from many goroutines
// at once, with a linger short enough that restores fire while runs
// begin (a timer that fires as it is stopped, a stale one that fires
// after another was set), never raise GOMAXPROCS by more than one or
// lower it below the runtime's choice, keep it raised while any run
// executes, and give the runtime its own choice back once none does.
func TestSpareProcConcurrent(t *testing.T) {
	const def = 2
	f, p := newFakeProcs(def, 200*time.Microsecond)
	get := f.get
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
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n != def || f.bad != "" {
		t.Fatalf("after the last run: GOMAXPROCS %d, want %d; %s", f.n, def, f.bad)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.running != 0 || p.raised {
		t.Fatalf("after the last run: %d running, raised %v", p.running, p.raised)
	}
}
