package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/internal/proctest"
	"github.com/cordon-dev/cordon/sandbox/reaper"
	"github.com/cordon-dev/cordon/store"
)

// TestKill9ReapsSandboxes kills the embedded server with SIGKILL while a
// run executes `sleep` in the sandbox, and restarts it: the run is failed
// with the reason and what its sandbox left on the host is reaped.
func TestKill9ReapsSandboxes(t *testing.T) {
	requireRoot(t, "the reaper's leftovers are the run's cgroups, which a rootless run on cgroup v1 has none of")
	dir := t.TempDir()
	dsn := filepath.Join(dir, "cordon.db")
	t.Setenv(helperEnv+"_REAL", "1")
	cmd, url := startHelper(t, dir, dsn, 30*time.Second)
	e := &env{t: t, dir: dir, url: url, keys: map[string]string{"none": "", "admin": adminKey}}
	e.setup(withWall(projectFor("sleep", "30"), 20000))
	id := e.submit(e.keys["member"])
	e.must(200, "POST", "/v1/runs/"+id+"/approve", e.keys["approver"], "")
	sb := filepath.Join(dir, "sandbox")
	deadline := time.Now().Add(30 * time.Second)
	for {
		rep, err := reaper.Sweep(sb, reaper.Options{DryRun: true, Wait: true})
		if err == nil && len(rep.Kept) > 0 { // a live run: its owner is alive
			break
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "helper.log"))
			t.Fatalf("no sandbox run appeared: %+v %v\n%s", rep, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
	spawners := proctest.Spawners(t, cmd.Process.Pid)
	if len(spawners) != 1 {
		t.Fatalf("the helper server runs %d spawners, want 1", len(spawners))
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	// The spawner sees its server's end close and exits; the run's init
	// dies with it (its parent-death signal).
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(spawners[0], 0) == nil; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the killed server's spawner %d still runs 10 s later", spawners[0])
		}
	}
	time.Sleep(200 * time.Millisecond)
	e2 := newEnv(t, envOpts{dsn: dsn, dir: dir, real: true})
	e2.keys = e.keys
	got := e2.wait(id, e.keys["member"], 20*time.Second)
	if got.State != store.StateFailed || !strings.Contains(got.Reason, "server stopped") {
		t.Fatalf("run %s: %s %q", id, got.State, got.Reason)
	}
	rep, err := reaper.Sweep(sb, reaper.Options{DryRun: true, Wait: true})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Removed)+len(rep.Kept) != 0 {
		t.Fatalf("the killed server's sandbox was not reaped at restart: %+v", rep)
	}
}
