//go:build load

// The load test is a measurement, not a check: it is built only with
// -tags load (docs/server.md, "Figures").

package server_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/session"
	"github.com/cordon-dev/cordon/store"
)

// timedExec measures the executor's own time per run.
type timedExec struct {
	inner server.Executor
	mu    sync.Mutex
	d     map[string]time.Duration // guarded by mu
}

func (x *timedExec) Execute(ctx context.Context, run *store.Run) store.Outcome {
	start := time.Now()
	o := x.inner.Execute(ctx, run)
	x.mu.Lock()
	x.d[run.ID] = time.Since(start)
	x.mu.Unlock()
	return o
}

func pct(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// TestLoad is the control plane's load test (docs/server.md, "Figures"):
// CORDON_LOAD=1 runs it; CORDON_LOAD_RUNS and CORDON_LOAD_CLIENTS change
// its size (default 1000 runs, 200 clients); CORDON_LOAD_EXEC=none
// replaces the executor with one that does nothing (a diagnostic). It measures, on loopback,
// with the agent runner executing /bin/true in the sandbox:
//
//   - 200 concurrent clients submitting and approving 1,000 runs: the
//     throughput to the last run finished, and API latency p50/p99 of
//     the write routes and of the read routes;
//   - the queue's overhead per run, side by side, one run at a time:
//     `cordon exec`'s session path alone, the runner alone (the
//     executor, no queue), and approve → finished through the queue.
func TestLoad(t *testing.T) {
	runs, clients := 1000, 200
	if v, err := strconv.Atoi(os.Getenv("CORDON_LOAD_RUNS")); err == nil {
		runs = v
	}
	if v, err := strconv.Atoi(os.Getenv("CORDON_LOAD_CLIENTS")); err == nil {
		clients = v
	}
	workers, _ := strconv.Atoi(os.Getenv("CORDON_LOAD_WORKERS")) // 0: the server's default
	// The collector's target as `cordon serve` sets it, unless GOGC is
	// set (GOGC=100 measures with Go's default). It is the process's:
	// the clients here share it.
	if os.Getenv("GOGC") == "" {
		defer debug.SetGCPercent(debug.SetGCPercent(server.DefaultGCPercent))
		t.Logf("GC percent %d (cordon serve's default; GOGC not set)", server.DefaultGCPercent)
	} else {
		t.Logf("GOGC=%s", os.Getenv("GOGC"))
	}
	// The sandboxes start from a spawner, as in cordon serve, unless
	// CORDON_LOAD_SPAWNER=off (this process forks each run's init).
	var sp *sandbox.Spawner
	if os.Getenv("CORDON_LOAD_SPAWNER") != "off" {
		var err error
		if sp, err = sandbox.StartSpawner(); err != nil {
			t.Fatal(err)
		}
		defer sp.Close()
		t.Logf("the sandboxes start from a spawner (pid %d), as in cordon serve", sp.PID())
	} else {
		t.Log("CORDON_LOAD_SPAWNER=off: this process forks every run's sandbox init")
	}
	var ru0, rc0 syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &rc0)
	defer func() {
		var ru1, rc1 syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
		syscall.Getrusage(syscall.RUSAGE_CHILDREN, &rc1)
		cpu := func(a, b syscall.Rusage) time.Duration {
			return time.Duration(b.Utime.Nano() - a.Utime.Nano() + b.Stime.Nano() - a.Stime.Nano())
		}
		t.Logf("CPU: this process (server, runner, clients) %s; its child processes (the sandboxes) %s; this process's minor page faults %d, voluntary and involuntary context switches %d, %d",
			cpu(ru0, ru1).Round(time.Millisecond), cpu(rc0, rc1).Round(time.Millisecond), ru1.Minflt-ru0.Minflt, ru1.Nvcsw-ru0.Nvcsw, ru1.Nivcsw-ru0.Nivcsw)
		if sp != nil {
			t.Logf("CPU: the spawner %s, the sandboxes it reaped %s", spawnerCPU(sp.PID(), 13), spawnerCPU(sp.PID(), 15))
		}
	}()
	dir := t.TempDir()
	te := &timedExec{d: map[string]time.Duration{}}
	e := newEnv(t, envOpts{dir: dir, exec: te, workers: workers})
	t.Logf("workers: %d (0: the default, %d)", workers, server.DefaultWorkers)
	te.inner = &server.RunnerExecutor{StateDir: dir, Key: mustKey(t), Version: "test", Spawner: sp}
	if os.Getenv("CORDON_LOAD_EXEC") == "none" {
		// A diagnostic, not the measurement: the same load with an
		// executor that does nothing, to see what the executions' CPU
		// costs the API (docs/server.md, "Figures").
		te.inner = newFake()
		t.Log("CORDON_LOAD_EXEC=none: runs execute nothing (a diagnostic; the targets are measured without it)")
	}
	e.setup(projectFor("true"))

	// Side by side, one at a time.
	const n = 30
	gs, err := grant.Parse([]byte(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"true"}]},"limits":{"wall_ms":60000,"memory_bytes":268435456,"pids":64}}`))
	if err != nil {
		t.Fatal(err)
	}
	var execAlone, runnerAlone, viaQueue, overhead []time.Duration
	for range n {
		start := time.Now()
		s, err := session.Open(t.Context(), session.Config{Grants: gs, StateDir: dir + "/sandbox", Meters: session.Meters{}})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Exec(t.Context(), session.Command{Argv: []string{"true"}}); err != nil {
			t.Fatal(err)
		}
		s.Close()
		execAlone = append(execAlone, time.Since(start))
		id := e.submit(e.keys["member"])
		e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
		r := e.wait(id, e.keys["member"], time.Minute)
		if r.State != store.StateFinished {
			t.Fatalf("run %+v", r)
		}
		total := r.FinishedAt.Sub(*r.DecidedAt)
		te.mu.Lock()
		d := te.d[id]
		te.mu.Unlock()
		runnerAlone = append(runnerAlone, d)
		viaQueue = append(viaQueue, total)
		overhead = append(overhead, total-d)
	}
	t.Logf("one at a time, %d runs: cordon exec alone p50 %s; runner alone p50 %s; approve→finished p50 %s p99 %s; queue overhead p50 %s p99 %s",
		n, pct(execAlone, .5), pct(runnerAlone, .5), pct(viaQueue, .5), pct(viaQueue, .99), pct(overhead, .5), pct(overhead, .99))

	// The load: clients submitting and approving, and reading.
	var writes, reads []time.Duration
	submitReads := -1 // len(reads) when the last run was accepted
	var mu sync.Mutex
	var next atomic.Int64
	var ids []string
	timed := func(read bool, f func() resp) resp {
		start := time.Now()
		r := f()
		d := time.Since(start)
		mu.Lock()
		if read {
			reads = append(reads, d)
		} else {
			writes = append(writes, d)
		}
		mu.Unlock()
		return r
	}
	start := time.Now()
	var wg sync.WaitGroup
	var failures atomic.Int64
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for next.Add(1) <= int64(runs) {
				r := timed(false, func() resp { return e.doQuiet("POST", "/v1/projects/p/runs", e.keys["member"], `{"task":"t"}`) })
				var run struct{ ID string }
				if r.code != 201 || r.jsonQuiet(&run) != nil {
					failures.Add(1)
					continue
				}
				if timed(false, func() resp { return e.doQuiet("POST", "/v1/runs/"+run.ID+"/approve", e.keys["approver"], "") }).code != 200 {
					failures.Add(1)
				}
				mu.Lock()
				ids = append(ids, run.ID)
				mu.Unlock()
				timed(true, func() resp { return e.doQuiet("GET", "/v1/runs/"+run.ID, e.keys["member"], "") })
				timed(true, func() resp { return e.doQuiet("GET", "/v1/runs?limit=20", e.keys["tenant"], "") })
			}
		}()
	}
	wg.Wait()
	submitted := time.Since(start)
	mu.Lock()
	submitReads = len(reads)
	mu.Unlock()
	// Readers keep reading while the queue drains.
	stop := make(chan struct{})
	var rwg sync.WaitGroup
	for i := range clients {
		rwg.Add(1)
		go func() {
			defer rwg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				mu.Lock()
				id := ids[i%len(ids)]
				mu.Unlock()
				timed(true, func() resp { return e.doQuiet("GET", "/v1/runs/"+id, e.keys["member"], "") })
			}
		}()
	}
	var finished, failed int
	for _, id := range ids {
		r := e.wait(id, e.keys["member"], 10*time.Minute)
		if r.State == store.StateFinished {
			finished++
		} else {
			failed++
		}
	}
	close(stop)
	rwg.Wait()
	all := time.Since(start)
	t.Logf("load: %d clients, %d runs of /bin/true: all submitted and approved in %s, all ended in %s (%.1f runs/s); %d finished, %d failed, %d refused requests",
		clients, len(ids), submitted.Round(time.Millisecond), all.Round(time.Millisecond), float64(len(ids))/all.Seconds(), finished, failed, failures.Load())
	t.Logf("API latency: writes (submit, approve) n=%d p50 %s p99 %s; reads (GET run, GET runs) n=%d p50 %s p99 %s",
		len(writes), pct(writes, .5), pct(writes, .99), len(reads), pct(reads, .5), pct(reads, .99))
	// The reads above, by phase (added figures; the headline is the two
	// together): while the clients also submit and approve, and while
	// only the queue drains (runs execute, the clients only read).
	t.Logf("… of which while submitting and approving: n=%d p50 %s p99 %s; while the queue drains: n=%d p50 %s p99 %s",
		submitReads, pct(reads[:submitReads], .5), pct(reads[:submitReads], .99),
		len(reads)-submitReads, pct(reads[submitReads:], .5), pct(reads[submitReads:], .99))
	// Reads alone: the same clients, nothing executing, for 5 seconds.
	var quiet []time.Duration
	end := time.Now().Add(5 * time.Second)
	var qwg sync.WaitGroup
	for i := range clients {
		qwg.Add(1)
		go func() {
			defer qwg.Done()
			for time.Now().Before(end) {
				id := ids[i%len(ids)]
				start := time.Now()
				path := "/v1/runs/" + id
				if i%2 == 1 {
					path = "/v1/runs?limit=20"
				}
				e.doQuiet("GET", path, e.keys["member"], "")
				d := time.Since(start)
				mu.Lock()
				quiet = append(quiet, d)
				mu.Unlock()
			}
		}()
	}
	qwg.Wait()
	t.Logf("reads alone (%d clients, closed loops, nothing executing): n=%d p50 %s p99 %s", clients, len(quiet), pct(quiet, .5), pct(quiet, .99))
	if failed > 0 || failures.Load() > 0 {
		t.Errorf("%d runs failed, %d requests refused", failed, failures.Load())
	}
	fmt.Fprintln(os.Stderr)
}

func mustKey(t *testing.T) *sign.PrivateKey {
	k, err := sign.Generate()
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// spawnerCPU is the CPU time in /proc/PID/stat's fields at index i and
// i+1 after the command's name (utime and stime: 13; cutime and
// cstime: 15), at the kernel's 100 ticks a second.
func spawnerCPU(pid, i int) time.Duration {
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return -1
	}
	f := strings.Fields(string(st[bytes.LastIndexByte(st, ')')+2:]))
	if len(f) < i {
		return -1
	}
	a, _ := strconv.Atoi(f[i-2])
	b, _ := strconv.Atoi(f[i-1])
	return time.Duration(a+b) * 10 * time.Millisecond
}
