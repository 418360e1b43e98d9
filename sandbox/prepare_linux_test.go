package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/tier"
)

// preparedSpec is a spec for Prepare: the test grants, no program.
func preparedSpec(t testing.TB) *Spec {
	t.Helper()
	gs, err := grant.Parse([]byte(testGrants))
	if err != nil {
		t.Fatal(err)
	}
	s := &Spec{Grants: gs, Tier: tier.S2, StateDir: t.TempDir(), Limits: DefaultLimits()}
	s.Limits.Wall = 30 * time.Second
	s.Limits.CgroupOptional = true
	return s
}

// TestPreparedRunsLikeCold: a prepared sandbox, started later with a
// program, its environment, a workspace and streams, runs it under the
// same policy as a cold run: the program's output and exit status come
// back, the input was staged, the output copied back, and the exec
// decision reported; a program the grant set does not allow is refused
// at Start, as a cold run refuses it.
func TestPreparedRunsLikeCold(t *testing.T) {
	ctx := context.Background()
	p, err := Prepare(ctx, preparedSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy()
	if err := p.Check(); err != nil {
		t.Fatalf("Check of a fresh prepared sandbox: %v", err)
	}
	ws := t.TempDir()
	if err := os.WriteFile(filepath.Join(ws, "in.txt"), []byte("hello\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	var decided []grant.Decision
	err = p.Start(ctx, &Launch{
		Argv:      []string{"sh", "-c", "cat in.txt; echo err >&2; read x; echo got $x; cp in.txt out.txt; exit 3"},
		Workspace: ws, Inputs: []string{"in.txt"}, Outputs: []string{"out.txt"},
		Stdin: strings.NewReader("stdin-line\n"), Stdout: &out, Stderr: &errOut,
		Decided: func(d grant.Decision) error { decided = append(decided, d); return nil },
	})
	if err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 3 || out.String() != "hello\ngot stdin-line\n" || errOut.String() != "err\n" {
		t.Fatalf("exit %d, stdout %q, stderr %q", res.ExitCode, out.String(), errOut.String())
	}
	if b, err := os.ReadFile(filepath.Join(ws, "out.txt")); err != nil || string(b) != "hello\n" {
		t.Fatalf("output: %q, %v", b, err)
	}
	if len(decided) != 1 || !decided[0].Allow || res.Program.Path == "" {
		t.Fatalf("decisions %+v, program %+v", decided, res.Program)
	}
	// One sandbox, one run.
	if err := p.Start(ctx, &Launch{Argv: []string{"true"}}); !errors.Is(err, ErrLifecycle) {
		t.Fatalf("second Start: %v, want ErrLifecycle", err)
	}

	// A program the grants do not allow: refused at Start, nothing runs.
	q, err := Prepare(ctx, preparedSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Destroy()
	err = q.Start(ctx, &Launch{Argv: []string{"/usr/bin/tail", "/etc/passwd"}})
	var ee *ExitError
	if !errors.As(err, &ee) || ee.Code != ExitRefused {
		t.Fatalf("Start of a program the grants do not allow: %v", err)
	}
	if err := q.Check(); err == nil {
		t.Fatal("a prepared sandbox whose Start failed still passes Check")
	}
}

// TestPreparedExecControl: a prepared sandbox learns its allowed
// executables only at Start, and still enforces them: a program that is
// allowed cannot execute one that is not.
func TestPreparedExecControl(t *testing.T) {
	ctx := context.Background()
	p, err := Prepare(ctx, preparedSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy()
	var out, errOut bytes.Buffer
	if err := p.Start(ctx, &Launch{Argv: []string{"sh", "-c", "echo ok; /usr/bin/tail /etc/hostname; echo $?"}, Stdout: &out, Stderr: &errOut}); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if res.ExitCode != 0 || out.String() != "ok\n126\n" || !strings.Contains(errOut.String(), "Permission denied") {
		t.Fatalf("exit %d, output %q: tail should have been refused (126)", res.ExitCode, out.String())
	}
}

// TestPreparedRefusals: Prepare refuses a spec with a program or streams
// (they are the launch's) and a grant set with egress rules; a prepared
// sandbox whose init died fails Check and cannot start; Start refuses a
// wall-clock limit longer than the prepared one.
func TestPreparedRefusals(t *testing.T) {
	ctx := context.Background()
	s := preparedSpec(t)
	s.Argv = []string{"true"}
	if _, err := Prepare(ctx, s); err == nil || !strings.Contains(err.Error(), "Argv") {
		t.Fatalf("Prepare with Argv: %v", err)
	}
	s = preparedSpec(t)
	eg, err := grant.Parse([]byte(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"true"}]},"egress":[{"host":"example.com","proto":"tcp","ports":[443,443]}]}`))
	if err != nil {
		t.Fatal(err)
	}
	s.Grants = eg
	if _, err := Prepare(ctx, s); err == nil || !strings.Contains(err.Error(), "egress") {
		t.Fatalf("Prepare with egress rules: %v", err)
	}

	p, err := Prepare(ctx, preparedSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy()
	if err := p.Start(ctx, &Launch{Argv: []string{"true"}, Wall: time.Hour}); err == nil {
		t.Fatal("Start with a longer wall-clock limit than prepared")
	}

	d, err := Prepare(ctx, preparedSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Destroy()
	if err := syscall.Kill(d.InitPID(), syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for d.Check() == nil && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if err := d.Check(); err == nil {
		t.Fatal("Check passes with init killed")
	}
	if err := d.Start(ctx, &Launch{Argv: []string{"true"}}); err == nil {
		t.Fatal("Start of a prepared sandbox whose init was killed")
	}
}

// TestPreparedNamesPlanLikeCold: the executables a prepared sandbox
// allows (the names resolved when it was prepared, the program at Start)
// are exactly those a cold run of the same program allows; with a rule
// that pins a hash nothing is prepared and every name is decided at
// Start, as cold.
func TestPreparedNamesPlanLikeCold(t *testing.T) {
	gs, err := grant.Parse([]byte(testGrants))
	if err != nil {
		t.Fatal(err)
	}
	enf := grant.New(gs)
	names, err := planNames(enf, nil)
	if err != nil || names == nil {
		t.Fatalf("planNames: %v, %v", names, err)
	}
	for _, argv := range [][]string{{"true"}, {"sh", "-c", ":"}, {"python3", "-c", "pass"}, {"/usr/bin/env", "true"}} {
		cold, err := planExecFS(enf, argv, nil)
		if err != nil {
			t.Fatal(err)
		}
		warm, err := planExecNames(enf, argv, nil, names)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Equal(cold.execFiles, warm.execFiles) || cold.program.Path != warm.program.Path || cold.program.B3 != warm.program.B3 {
			t.Errorf("%v: cold allows %v, prepared %v", argv, cold.execFiles, warm.execFiles)
		}
	}
	if _, err := planExecNames(enf, []string{"/usr/bin/tail"}, nil, names); err == nil {
		t.Error("a program the grants do not allow is allowed with prepared names")
	}
	pinned, err := grant.Parse([]byte(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"true"},{"b3":"b3:AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if n, err := planNames(grant.New(pinned), nil); err != nil || n != nil {
		t.Fatalf("planNames with a pinned hash: %v, %v; want nothing prepared", n, err)
	}
}

// TestPreparedCgroupGone: a prepared sandbox whose cgroup was removed
// while it was parked fails Check and cannot start: it would run
// without its limits.
func TestPreparedCgroupGone(t *testing.T) {
	requireRoot(t, "a rootless prepared sandbox here has no cgroup of its own (none is delegated)")
	p, err := Prepare(context.Background(), preparedSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy()
	if p.sb.cg == nil {
		t.Fatal("the prepared sandbox has no cgroup on this host (root, cgroups available)")
	}
	dirs := cgroupDirs(t, p.sb.runID)
	if len(dirs) == 0 {
		t.Fatal("no cgroup directory labelled with the run")
	}
	for _, d := range dirs {
		if err := os.Remove(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.Check(); err == nil || !strings.Contains(err.Error(), "cgroup") {
		t.Fatalf("Check with the cgroup removed: %v", err)
	}
	if err := p.Start(context.Background(), &Launch{Argv: []string{"true"}}); err == nil {
		t.Fatal("Start with the cgroup removed")
	}
}

// TestPreparedStreamsArePipes: a prepared sandbox's program gets pipes
// as its standard streams, never the launch's files: given a host file
// as stdout, the program sees a pipe at fd 1, and the file receives what
// it wrote.
func TestPreparedStreamsArePipes(t *testing.T) {
	ctx := context.Background()
	p, err := Prepare(ctx, preparedSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy()
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	in, err := os.Open("/etc/hostname")
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	if err := p.Start(ctx, &Launch{Argv: []string{"ls", "-l", "/proc/self/fd/0", "/proc/self/fd/1", "/proc/self/fd/2"}, Stdin: in, Stdout: f, Stderr: f}); err != nil {
		t.Fatal(err)
	}
	if res, err := p.Wait(); err != nil || res.ExitCode != 0 {
		t.Fatalf("%v %+v", err, res)
	}
	b, err := os.ReadFile(f.Name())
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(b), "-> pipe:["); n != 3 || strings.Contains(string(b), f.Name()) || strings.Contains(string(b), "/etc/hostname") {
		t.Fatalf("the program's streams:\n%s", b)
	}
}

// lockedBuffer is a bytes.Buffer that a relay may write while the test
// reads it; each write takes slow.
type lockedBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	slow time.Duration
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	time.Sleep(l.slow)
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestPreparedWaitLeavesNothingRunning: when a prepared sandbox's Wait
// returns, the program's processes are all dead and reaped (one left
// looping in the background, writing to stdout, and one sleeping), and
// its output is complete, though slow to copy: nothing more arrives
// afterwards. With a cgroup
// (root here), init's own exit is left to Destroy, which reaps init and
// removes the run's cgroup.
func TestPreparedWaitLeavesNothingRunning(t *testing.T) {
	ctx := context.Background()
	p, err := Prepare(ctx, preparedSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Destroy()
	out := lockedBuffer{slow: 20 * time.Millisecond}
	const marker = "leaves-nothing-4711"
	script := "while :; do echo tick; done & sleep 60." + marker[len(marker)-4:] + " & echo " + marker + "; sleep 0.1; exit 3"
	if err := p.Start(ctx, &Launch{Argv: []string{"sh", "-c", script}, Stdout: &out}); err != nil {
		t.Fatal(err)
	}
	res, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if res.ExitCode != 3 || !strings.Contains(got, marker+"\n") || !strings.Contains(got, "tick\n") {
		t.Fatalf("exit %d, stdout %.200q", res.ExitCode, got)
	}
	// No process of the run: the shell and its background loop carry the
	// script in their command line, the sleep its own.
	for _, e := range procEntries(t) {
		b, err := os.ReadFile("/proc/" + e + "/cmdline")
		if err == nil && (bytes.Contains(b, []byte(marker)) || bytes.Contains(b, []byte("60.4711"))) {
			t.Fatalf("process %s of the run is alive after Wait: %q", e, b)
		}
	}
	time.Sleep(200 * time.Millisecond)
	if later := out.String(); later != got {
		t.Fatalf("stdout grew after Wait returned: %d bytes, then %d", len(got), len(later))
	}
	pid, runID := p.InitPID(), p.sb.runID
	if p.sb.cg != nil && p.sb.waited {
		t.Fatal("Wait of a prepared sandbox with a cgroup waited for init's exit; Destroy should")
	}
	if err := p.Destroy(); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("init (pid %d) after Destroy: kill 0 = %v, want ESRCH (reaped)", pid, err)
	}
	if os.Geteuid() == 0 {
		if dirs := cgroupDirs(t, runID); len(dirs) > 0 {
			t.Fatalf("the run's cgroup after Destroy: %v", dirs)
		}
	}
}

// procEntries are the pids in /proc.
func procEntries(t *testing.T) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if e.Name()[0] >= '0' && e.Name()[0] <= '9' {
			out = append(out, e.Name())
		}
	}
	return out
}
