package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
