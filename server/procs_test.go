package server_test

import (
	"context"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/store"
)

// panicExec panics in every execution, after noting the GOMAXPROCS it
// ran under.
type panicExec struct{ procs chan int }

func (p panicExec) Execute(context.Context, *store.Run) store.Outcome {
	p.procs <- runtime.GOMAXPROCS(0)
	panic("the executor failed")
}

// TestSpareProcExecutorPanics: an execution that panics gives its spare
// P back as one that returns does: the run executes with one P more
// than the runtime's choice (Config.SpareProc, as cordon serve sets it
// unless GOMAXPROCS is), the queue recovers the panic and fails the run
// as interrupted, and the runtime's own choice comes back after the
// linger, not raised for good.
func TestSpareProcExecutorPanics(t *testing.T) {
	time.Sleep(400 * time.Millisecond) // an earlier test's spare P is given back
	want := runtime.GOMAXPROCS(0)
	spare := 0
	if os.Getenv("GOMAXPROCS") == "" {
		spare = 1
	}
	ex := panicExec{procs: make(chan int, 10)}
	e := newEnv(t, envOpts{exec: ex, workers: 1})
	e.setup(projectFor("true"))
	id := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	select {
	case got := <-ex.procs:
		if got != want+spare {
			t.Fatalf("the run executed with GOMAXPROCS %d, want %d", got, want+spare)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the run never executed")
	}
	if r := e.wait(id, e.keys["member"], 60*time.Second); r.State != store.StateFailed {
		t.Fatalf("a run whose executor panicked is %s (%s)", r.State, r.Reason)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.GOMAXPROCS(0) != want && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := runtime.GOMAXPROCS(0); got != want {
		t.Fatalf("after the panicked run: GOMAXPROCS %d, want the runtime's %d", got, want)
	}
}
