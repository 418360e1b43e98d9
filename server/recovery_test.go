package server_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/evidence/sign"
	"github.com/cordon-dev/cordon/sandbox"
	"github.com/cordon-dev/cordon/server"
	"github.com/cordon-dev/cordon/store"
)

// markerExec records each execution as a file created with O_EXCL in a
// directory shared by every process of a test: a second execution of a
// run, in any process, leaves a "twice" file.
type markerExec struct {
	dir   string
	delay time.Duration
}

func (m markerExec) Execute(ctx context.Context, run *store.Run) store.Outcome {
	os.MkdirAll(m.dir, 0o700)
	f, err := os.OpenFile(filepath.Join(m.dir, run.ID), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600)
	if errors.Is(err, fs.ErrExist) {
		os.WriteFile(filepath.Join(m.dir, run.ID+".twice"), nil, 0o600)
	} else if err == nil {
		fmt.Fprintf(f, "%d\n", os.Getpid())
		f.Close()
	}
	select {
	case <-time.After(m.delay):
	case <-ctx.Done():
		return store.Outcome{State: store.StateCancelled, Reason: "stopped"}
	}
	zero := 0
	return store.Outcome{State: store.StateFinished, ExitCode: &zero}
}

const helperEnv = "CORDON_TEST_HELPER_SERVER"

// TestHelperServer is not a test: it is the server process the recovery
// tests start and kill with SIGKILL. It serves on a port it writes to
// DIR/addr and executes runs slowly.
func TestHelperServer(t *testing.T) {
	dir := os.Getenv(helperEnv)
	if dir == "" {
		t.Skip("runs only as a child process of the recovery tests: it is their server, not a test")
	}
	dsn := os.Getenv(helperEnv + "_DSN")
	st, err := store.Open(context.Background(), dsn)
	if err != nil {
		t.Fatal(err)
	}
	if st.Engine() == store.SQLite {
		if err := st.CacheHotReads(); err != nil { // as cordon serve does
			t.Fatal(err)
		}
	}
	k, _ := sign.Generate()
	maxWall, _ := time.ParseDuration(os.Getenv(helperEnv + "_WALL"))
	delay := time.Minute
	if d, err := time.ParseDuration(os.Getenv(helperEnv + "_DELAY")); err == nil {
		delay = d
	}
	var ex server.Executor = markerExec{dir: filepath.Join(dir, "exec"), delay: delay}
	if os.Getenv(helperEnv+"_REAL") == "1" {
		// As cordon serve: the sandboxes start from a spawner.
		sp, err := sandbox.StartSpawner()
		if err != nil {
			t.Fatal(err)
		}
		ex = &server.RunnerExecutor{StateDir: dir, Key: k, Version: "test", Spawner: sp}
	}
	s, err := server.New(server.Config{Store: st, AdminKey: adminKey, StateDir: dir, Key: k, Version: "test", Execute: true, Workers: 2,
		Executor: ex, WorkerID: "helper-" + strconv.Itoa(os.Getpid()),
		MaxWall: maxWall, RescueAfter: 3 * maxWall, AuditKey: sharedAuditKey()})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "addr.tmp"), []byte(l.Addr().String()), 0o600)
	os.Rename(filepath.Join(dir, "addr.tmp"), filepath.Join(dir, "addr"))
	s.Serve(context.Background(), l, time.Second) // until killed
}

// startHelper starts the helper server process and returns its base URL.
func startHelper(t *testing.T, dir, dsn string, maxWall time.Duration) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperServer$", "-test.v")
	cmd.Env = append(os.Environ(), helperEnv+"="+dir, helperEnv+"_DSN="+dsn, helperEnv+"_WALL="+maxWall.String())
	out, _ := os.Create(filepath.Join(dir, "helper.log"))
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for i := 0; i < 300; i++ {
		if b, err := os.ReadFile(filepath.Join(dir, "addr")); err == nil {
			os.Remove(filepath.Join(dir, "addr"))
			return cmd, "http://" + string(b)
		}
		time.Sleep(50 * time.Millisecond)
	}
	log, _ := os.ReadFile(filepath.Join(dir, "helper.log"))
	t.Fatalf("the helper server did not start:\n%s", log)
	return nil, ""
}

// markers counts executions per run and reports any run executed twice.
func markers(t *testing.T, dir string) map[string]int {
	t.Helper()
	out := map[string]int{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), ".twice") {
			t.Errorf("run %s executed twice", strings.TrimSuffix(e.Name(), ".twice"))
			continue
		}
		out[e.Name()]++
	}
	return out
}

// TestKill9Recovery kills the embedded server (SQLite) with SIGKILL
// while runs execute and others are queued, restarts it on the same
// database, and checks that no accepted run is lost and none executes
// twice: the interrupted ones are failed with the reason, the queued ones
// execute once.
func TestKill9Recovery(t *testing.T) {
	dir := t.TempDir()
	dsn := filepath.Join(dir, "cordon.db")
	cmd, url := startHelper(t, dir, dsn, 30*time.Second)
	e := &env{t: t, dir: dir, url: url, keys: map[string]string{"none": "", "admin": adminKey}}
	e.setup(withWall(projectFor("true"), 20000))
	var ids []string
	for range 6 {
		id := e.submit(e.keys["member"])
		e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
		ids = append(ids, id)
	}
	// Wait for the two workers to be executing.
	deadline := time.Now().Add(20 * time.Second)
	for len(markers(t, filepath.Join(dir, "exec"))) < 2 {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "helper.log"))
			t.Fatalf("the helper executed nothing:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	running := markers(t, filepath.Join(dir, "exec"))
	t.Logf("executing when killed: %d of %d runs", len(running), len(ids))

	// Restart on the same database and state directory.
	e2 := newEnv(t, envOpts{dsn: dsn, dir: dir, exec: markerExec{dir: filepath.Join(dir, "exec"), delay: 10 * time.Millisecond}})
	e2.keys = e.keys
	for _, id := range ids {
		got := e2.wait(id, e.keys["member"], 20*time.Second)
		if running[id] > 0 {
			if got.State != store.StateFailed || !strings.Contains(got.Reason, "server stopped") {
				t.Errorf("interrupted run %s: %s %q", id, got.State, got.Reason)
			}
		} else if got.State != store.StateFinished {
			t.Errorf("queued run %s: %s %q", id, got.State, got.Reason)
		}
	}
	final := markers(t, filepath.Join(dir, "exec"))
	for _, id := range ids {
		if running[id] == 0 && final[id] != 1 {
			t.Errorf("queued run %s executed %d times", id, final[id])
		}
	}
}

// TestTwoWorkersExactlyOnce: two workers on one PostgreSQL execute 40
// runs; each executes exactly once. Then a worker process killed with
// SIGKILL mid-run has its run failed with the reason by the queue's
// rescue, never executed again.
func TestTwoWorkersExactlyOnce(t *testing.T) {
	dir := t.TempDir()
	m := markerExec{dir: filepath.Join(dir, "exec"), delay: 5 * time.Millisecond}
	api := newEnv(t, envOpts{postgres: true, dir: filepath.Join(dir, "a"), exec: m, maxWall: time.Second, rescue: 3 * time.Second})
	w2 := newEnv(t, envOpts{dsn: api.store.DSN(), dir: filepath.Join(dir, "b"), exec: m, maxWall: time.Second, rescue: 3 * time.Second})
	_ = w2
	api.setup(withWall(projectFor("true"), 900))
	var ids []string
	for range 40 {
		id := api.submit(api.keys["member"])
		api.must(200, "POST", "/v1/runs/"+id+"/approve", api.keys["approver"], "")
		ids = append(ids, id)
	}
	workers := map[string]bool{}
	var mu sync.Mutex
	for _, id := range ids {
		got := api.wait(id, api.keys["member"], 30*time.Second)
		if got.State != store.StateFinished || got.Attempts != 1 {
			t.Errorf("run %s: %s attempts %d", id, got.State, got.Attempts)
		}
		mu.Lock()
		workers[got.Worker] = true
		mu.Unlock()
	}
	final := markers(t, m.dir)
	for _, id := range ids {
		if final[id] != 1 {
			t.Errorf("run %s executed %d times", id, final[id])
		}
	}
	t.Logf("workers used: %v", workers)

	// A worker process killed mid-run.
	hdir := filepath.Join(dir, "h")
	os.MkdirAll(hdir, 0o700)
	m2 := markerExec{dir: filepath.Join(hdir, "exec"), delay: time.Minute}
	// Stop the in-process workers' execution so the helper takes the run.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	api.srv.Stop(ctx)
	w2.srv.Stop(ctx)
	cancel()
	cmd, hurl := startHelper(t, hdir, api.store.DSN(), time.Second)
	h := &env{t: t, url: hurl, keys: api.keys}
	id := h.submit(api.keys["member"])
	h.must(200, "POST", "/v1/runs/"+id+"/approve", api.keys["approver"], "")
	deadline := time.Now().Add(20 * time.Second)
	for markers(t, m2.dir)[id] == 0 {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(hdir, "helper.log"))
			t.Fatalf("the helper did not execute the run:\n%s", log)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// A fresh worker: its queue's rescuer finds the dead worker's job.
	w3 := newEnv(t, envOpts{dsn: api.store.DSN(), dir: filepath.Join(dir, "c"), exec: m2, maxWall: time.Second, rescue: 3 * time.Second})
	_ = w3
	got := api.wait(id, api.keys["member"], 90*time.Second)
	if got.State != store.StateFailed || !strings.Contains(got.Reason, "never executed twice") {
		t.Fatalf("killed worker's run: %s %q", got.State, got.Reason)
	}
	if markers(t, m2.dir)[id] != 1 {
		t.Fatalf("the killed worker's run executed %d times", markers(t, m2.dir)[id])
	}
}

// withWall sets a project's task's wall budget.
func withWall(project string, ms int) string {
	return strings.Replace(project, `"wall_ms":120000`, `"wall_ms":`+strconv.Itoa(ms), 1)
}

// TestKill9UnderLoad kills the embedded server with SIGKILL while 40
// clients submit and approve runs that execute, restarts it on the same
// database, and checks every run it accepted: none is lost (each is in
// the store, and each approved one ends), none executes twice, and the
// ones interrupted mid-execution are failed with the reason.
func TestKill9UnderLoad(t *testing.T) {
	dir := t.TempDir()
	dsn := filepath.Join(dir, "cordon.db")
	t.Setenv(helperEnv+"_DELAY", "30ms")
	cmd, url := startHelper(t, dir, dsn, 30*time.Second)
	e := &env{t: t, dir: dir, url: url, keys: map[string]string{"none": "", "admin": adminKey}}
	e.setup(withWall(projectFor("true"), 20000))
	var mu sync.Mutex
	submitted, approved := map[string]bool{}, map[string]bool{}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				r := e.doQuiet("POST", "/v1/projects/p/runs", e.keys["member"], `{"task":"t"}`)
				var run struct{ ID string }
				if r.code != 201 || r.jsonQuiet(&run) != nil {
					continue // the server is gone: nothing was accepted
				}
				mu.Lock()
				submitted[run.ID] = true
				mu.Unlock()
				if e.doQuiet("POST", "/v1/runs/"+run.ID+"/approve", e.keys["approver"], "").code == 200 {
					mu.Lock()
					approved[run.ID] = true
					mu.Unlock()
				}
			}
		}()
	}
	// Kill once runs are flowing: some executed, some executing.
	deadline := time.Now().Add(30 * time.Second)
	for len(markers(t, filepath.Join(dir, "exec"))) < 20 {
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "helper.log"))
			t.Fatalf("the helper executed too little:\n%s", log)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	time.Sleep(100 * time.Millisecond)
	close(stop)
	wg.Wait()
	before := markers(t, filepath.Join(dir, "exec"))

	e2 := newEnv(t, envOpts{dsn: dsn, dir: dir, exec: markerExec{dir: filepath.Join(dir, "exec"), delay: time.Millisecond}})
	e2.keys = e.keys
	var finished, interrupted, pending int
	for id := range submitted {
		if !approved[id] {
			// Accepted, not (known to be) approved: it is in the store.
			var r store.Run
			e2.must(200, "GET", "/v1/runs/"+id, e.keys["member"], "").json(t, &r)
			if r.State == store.StatePending {
				pending++
				continue
			}
		}
		got := e2.wait(id, e.keys["member"], 60*time.Second)
		switch {
		case got.State == store.StateFinished:
			finished++
		case got.State == store.StateFailed && strings.Contains(got.Reason, "server stopped"):
			interrupted++
			// Claimed before the kill: its execution had begun (1) or was
			// about to (0); either way it is never executed again.
			if before[id] > 1 {
				t.Errorf("run %s executed %d times before the kill", id, before[id])
			}
		default:
			t.Errorf("run %s: %s %q", id, got.State, got.Reason)
		}
	}
	for id, n := range markers(t, filepath.Join(dir, "exec")) { // markers reports any run executed twice
		if !submitted[id] || n != 1 {
			t.Errorf("execution of %s: %d (submitted %v)", id, n, submitted[id])
		}
	}
	t.Logf("accepted %d runs (%d approved) before SIGKILL: %d finished, %d interrupted and failed with the reason, %d pending approval",
		len(submitted), len(approved), finished, interrupted, pending)
	if finished == 0 {
		t.Error("nothing finished: the test did not exercise the queue")
	}
}

// sharedAuditKey is the audit key every process of one test's database
// holds, as the operator gives serve and its workers the same one.
func sharedAuditKey() *sign.PrivateKey {
	k, err := sign.NewKeyFromSeed(bytes.Repeat([]byte{7}, 32))
	if err != nil {
		panic(err)
	}
	return k
}
