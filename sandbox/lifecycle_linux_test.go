package sandbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/tier"
)

// lifecycleSpec is the spec of sandboxed, with a workspace holding one
// input, and the buffer that receives the program's stdout.
func lifecycleSpec(t *testing.T, argv ...string) (*Spec, *bytes.Buffer) {
	t.Helper()
	gs, err := grant.Parse([]byte(testGrants))
	if err != nil {
		t.Fatal(err)
	}
	var stdout bytes.Buffer
	s := &Spec{
		Argv: argv, Grants: gs, Tier: tier.S2, StateDir: t.TempDir(), Workspace: t.TempDir(),
		Limits: DefaultLimits(), Stdout: &stdout, Stderr: &stdout,
	}
	s.Limits.Wall = 30 * time.Second
	s.Limits.CgroupOptional = true // as LimitsFor makes it for testGrants, which limit no memory
	withFiles(map[string]string{"in.txt": "hello\n"})(s)
	withInputs("in.txt")(s)
	return s, &stdout
}

// trace is what a test learns about a sandbox while Create builds it, so
// that it can look for leftovers afterwards.
type trace struct {
	runID     string
	pid       int    // init's, or 0 before it started
	startTime string // init's start time (/proc/PID/stat field 22): tells a reused PID apart
	steps     []string
}

// traceOf records what sb has now.
func (tr *trace) record(sb *Sandbox, step string) {
	tr.runID = sb.runID
	tr.steps = append(tr.steps, step)
	if sb.proc != nil && tr.pid == 0 {
		tr.pid = sb.proc.pid()
		tr.startTime = procStartTime(tr.pid)
	}
}

// hookCreate sets testHookCreate to f for the test.
func hookCreate(t *testing.T, f func(sb *Sandbox, step string) error) {
	t.Helper()
	testHookCreate = f
	t.Cleanup(func() { testHookCreate = nil })
}

// procStartTime returns field 22 of /proc/PID/stat, or "" if there is no
// such process.
func procStartTime(pid int) string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return ""
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return ""
	}
	f := strings.Fields(s[i+1:]) // fields 3…
	if len(f) < 20 {
		return ""
	}
	return f[19]
}

// cgroupDirs returns the directories labelled with runID anywhere in the host's
// cgroup hierarchies: the run's cgroup, in every hierarchy it lives in.
func cgroupDirs(t *testing.T, runID string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir("/sys/fs/cgroup", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // a group removed while we walk
			}
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), runID+"-") { // package reaper's label
			out = append(out, p)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// stateFiles lists everything under the state directory.
func stateFiles(t *testing.T, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p != dir {
			rel, _ := filepath.Rel(dir, p)
			out = append(out, rel)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// openFDs counts this process's open descriptors.
func openFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// nothingLeft fails the test if the traced sandbox left its init, its
// cgroup, anything in the state directory but the tenant's range, or a
// descriptor (more than the fds open before) behind.
func nothingLeft(t *testing.T, tr *trace, stateDir string, fds int) {
	t.Helper()
	if tr.runID == "" {
		t.Fatal("the trace has no run ID: the hook never ran")
	}
	if tr.pid != 0 {
		if st := procStartTime(tr.pid); st != "" && st == tr.startTime {
			t.Errorf("sandbox init (pid %d) is still there", tr.pid)
		}
	}
	if dirs := cgroupDirs(t, tr.runID); len(dirs) > 0 {
		t.Errorf("the run's cgroup is still there: %v", dirs)
	}
	want := []string{"runs", "tenants", "tenants/_single", "tenants/_single/range"}
	if os.Geteuid() != 0 {
		want = []string{"runs"} // rootless runs take no range from the state directory
	}
	if got := stateFiles(t, stateDir); !slices.Equal(got, want) {
		t.Errorf("state directory holds %v, want %v", got, want)
	}
	// Descriptors are closed at once, but a goroutine of the run may
	// still be on its way out: allow it a moment.
	for deadline := time.Now().Add(2 * time.Second); openFDs(t) > fds && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if n := openFDs(t); n > fds {
		t.Errorf("%d descriptors open, %d before the sandbox", n, fds)
	}
}

// warmUp runs one sandbox, so that descriptors the runtime opens once
// (the network poller's) are open before a test counts them.
func warmUp(t *testing.T) {
	t.Helper()
	sandboxed(t, []string{"true"}).mustExit(t, 0)
}

// TestCreateDestroyWithoutStart: Create builds the sandbox (init runs,
// the cgroup exists) but never starts the program, and Destroy then
// leaves nothing behind; the sandbox cannot be started or waited for
// afterwards, and Destroy may be called again.
func TestCreateDestroyWithoutStart(t *testing.T) {
	warmUp(t)
	fds := openFDs(t)
	s, stdout := lifecycleSpec(t, "sh", "-c", "echo ran; echo ran > out.txt")
	withOutputs("out.txt")(s)
	var tr trace
	hookCreate(t, func(sb *Sandbox, step string) error { tr.record(sb, step); return nil })
	sb, err := Create(context.Background(), s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if want := []string{"init started", "cgroup", "prepared", "ready", "work"}; !slices.Equal(tr.steps, want) {
		t.Errorf("Create went through %v, want %v", tr.steps, want)
	}
	if procStartTime(tr.pid) == "" {
		t.Errorf("no sandbox init (pid %d) after Create", tr.pid)
	}
	if n := len(cgroupDirs(t, tr.runID)); n == 0 && CgroupLimits() == nil {
		t.Errorf("no cgroup for run %s after Create", tr.runID)
	} else if n != 0 && CgroupLimits() != nil {
		t.Errorf("a cgroup for run %s, rootless without cgroup limits (%v)", tr.runID, CgroupLimits())
	}
	time.Sleep(200 * time.Millisecond) // time enough for a program that was started anyway
	if err := sb.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("the program ran without Start: %q", stdout)
	}
	if _, err := os.Lstat(filepath.Join(s.Workspace, "out.txt")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("an output came back without Start (lstat: %v)", err)
	}
	nothingLeft(t, &tr, s.StateDir, fds)

	if err := sb.Destroy(); err != nil {
		t.Errorf("the second Destroy: %v", err)
	}
	if err := sb.Start(); !errors.Is(err, ErrLifecycle) {
		t.Errorf("Start after Destroy = %v, want ErrLifecycle", err)
	}
	if _, err := sb.Wait(); !errors.Is(err, ErrLifecycle) {
		t.Errorf("Wait after Destroy = %v, want ErrLifecycle", err)
	}
	var none *Sandbox
	if err := none.Destroy(); err != nil {
		t.Errorf("Destroy of a nil Sandbox (a failed Create's): %v", err)
	}
}

// TestLifecycleMatchesRun: Create, Start, Wait and Destroy give what Run
// gives for the same spec.
func TestLifecycleMatchesRun(t *testing.T) {
	argv := []string{"sh", "-c", "cat in.txt; echo out > out.txt; exit 3"}
	s1, out1 := lifecycleSpec(t, argv...)
	withOutputs("out.txt")(s1)
	want, err := Run(context.Background(), s1)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	s2, out2 := lifecycleSpec(t, argv...)
	withOutputs("out.txt")(s2)
	s2.StateDir = s1.StateDir // one installation: the same host uid range
	sb, err := Create(context.Background(), s2)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer sb.Destroy()
	if err := sb.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	got, err := sb.Wait()
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	if err := sb.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}

	if want.ExitCode != 3 || out1.String() != "hello\n" {
		t.Fatalf("Run: exit %d, output %q; want 3, %q", want.ExitCode, out1, "hello\n")
	}
	if out2.String() != out1.String() {
		t.Errorf("output %q, Run's %q", out2, out1)
	}
	// Times and resources differ from run to run; everything else must not.
	for _, r := range []*Result{want, got} {
		if r.CPUNanos <= 0 || r.PeakMemoryBytes <= 0 || !r.End.After(r.Start) {
			t.Errorf("result without accounting: %+v", r)
		}
		r.CPUNanos, r.PeakMemoryBytes, r.Start, r.End = 0, 0, time.Time{}, time.Time{}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Create/Start/Wait gave\n%+v\nRun gave\n%+v", got, want)
	}
	if len(got.Inputs) != 1 || len(got.Outputs) != 1 {
		t.Errorf("inputs %+v, outputs %+v; want one of each", got.Inputs, got.Outputs)
	}
}

// TestLifecycleOutOfOrder: each method refuses to run out of order, with
// ErrLifecycle, and Destroy after Wait is fine.
func TestLifecycleOutOfOrder(t *testing.T) {
	s, _ := lifecycleSpec(t, "true")
	sb, err := Create(context.Background(), s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer sb.Destroy()
	if _, err := sb.Wait(); !errors.Is(err, ErrLifecycle) {
		t.Errorf("Wait before Start = %v, want ErrLifecycle", err)
	}
	if err := sb.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := sb.Start(); !errors.Is(err, ErrLifecycle) {
		t.Errorf("the second Start = %v, want ErrLifecycle", err)
	}
	res, err := sb.Wait()
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("Wait = %+v, %v", res, err)
	}
	if _, err := sb.Wait(); !errors.Is(err, ErrLifecycle) {
		t.Errorf("the second Wait = %v, want ErrLifecycle", err)
	}
	if err := sb.Destroy(); err != nil {
		t.Errorf("Destroy after Wait: %v", err)
	}
	if err := sb.Destroy(); err != nil {
		t.Errorf("the second Destroy: %v", err)
	}
}

// TestCreateFailureLeavesNothing fails Create at each of its steps, by
// the test hook and by a real refusal (a Decided that fails), and
// requires that nothing of the sandbox remains: no init, no cgroup, no
// state but the tenant's range, no open descriptor.
func TestCreateFailureLeavesNothing(t *testing.T) {
	warmUp(t)
	injected := errors.New("injected failure")
	for _, step := range []string{"cgroup", "init started", "prepared", "ready", "work", "Decided"} {
		t.Run(step, func(t *testing.T) {
			fds := openFDs(t)
			s, stdout := lifecycleSpec(t, "sh", "-c", "echo ran")
			wantErr := injected
			if step == "Decided" {
				wantErr = errors.New("journal full")
				s.Decided = func(grant.Decision) error { return wantErr }
			}
			var tr trace
			hookCreate(t, func(sb *Sandbox, at string) error {
				tr.record(sb, at)
				if at == step {
					return injected
				}
				return nil
			})
			sb, err := Create(context.Background(), s)
			if sb != nil || !errors.Is(err, wantErr) && !strings.Contains(err.Error(), wantErr.Error()) {
				t.Fatalf("Create failing at %s = %v, %v; want nil, %v", step, sb, err, wantErr)
			}
			if step != "Decided" && tr.steps[len(tr.steps)-1] != step {
				t.Fatalf("Create went through %v, not stopping at %s", tr.steps, step)
			}
			if tr.pid == 0 {
				t.Fatalf("init was not started before %s", step)
			}
			nothingLeft(t, &tr, s.StateDir, fds)
			if stdout.Len() != 0 {
				t.Errorf("the program ran: %q", stdout)
			}
		})
	}
}

// TestDestroyRunning: Destroy of a started sandbox, with no Wait, kills
// the program and what it left running in the background, and leaves
// nothing behind.
func TestDestroyRunning(t *testing.T) {
	warmUp(t)
	fds := openFDs(t)
	// The token is the sleeps' duration, so that it shows in their
	// command lines: one in the background, reparented to init.
	token := fmt.Sprintf("100.%06d", time.Now().UnixNano()%1000000)
	s, _ := lifecycleSpec(t, "sh", "-c", "(sleep "+token+" &) ; sleep "+token)
	var tr trace
	hookCreate(t, func(sb *Sandbox, step string) error { tr.record(sb, step); return nil })
	sb, err := Create(context.Background(), s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if err := sb.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	time.Sleep(300 * time.Millisecond) // let the background sleep start
	start := time.Now()
	if err := sb.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("Destroy took %s", d)
	}
	nothingLeft(t, &tr, s.StateDir, fds)
	noSandboxLeftovers(t, token)
	if _, err := sb.Wait(); !errors.Is(err, ErrLifecycle) {
		t.Errorf("Wait after Destroy = %v, want ErrLifecycle", err)
	}
}

// TestStartAfterCancel: a sandbox whose context ended before Start never
// starts its program.
func TestStartAfterCancel(t *testing.T) {
	s, stdout := lifecycleSpec(t, "sh", "-c", "echo ran")
	ctx, cancel := context.WithCancel(context.Background())
	sb, err := Create(ctx, s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	defer sb.Destroy()
	cancel()
	if err := sb.Start(); !errors.Is(err, context.Canceled) {
		t.Errorf("Start after cancel = %v, want context.Canceled", err)
	}
	if err := sb.Destroy(); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if stdout.Len() != 0 {
		t.Errorf("the program ran: %q", stdout)
	}
}
