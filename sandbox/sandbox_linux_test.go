package sandbox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/grant"
	"github.com/cordon-dev/cordon/tier"
	"github.com/cordon-dev/cordon/tier/selection"
)

// testGrants is the grant set of most tests: untrusted code and the
// common tools, like the CLI's default.
const testGrants = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"sh"},{"name":"dash"},{"name":"bash"},{"name":"python3"},{"name":"cat"},{"name":"echo"},
{"name":"true"},{"name":"false"},{"name":"ls"},{"name":"cp"},{"name":"ln"},{"name":"mkdir"},{"name":"rm"},
{"name":"sleep"},{"name":"id"},{"name":"head"},{"name":"sha256sum"},{"name":"chmod"},{"name":"env"}]}}`

// run is the outcome of one sandboxed command in a test.
type outcome struct {
	res            *Result
	err            error
	stdout, stderr string
	ws             string
}

type option func(*Spec)

func withGrants(t *testing.T, js string) option {
	return func(s *Spec) {
		gs, err := grant.Parse([]byte(js))
		if err != nil {
			t.Fatalf("grant.Parse: %v", err)
		}
		s.Grants = gs
		s.Tier = selection.Required(gs)
	}
}

func withFiles(files map[string]string) option {
	return func(s *Spec) {
		for name, body := range files {
			p := filepath.Join(s.Workspace, name)
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				panic(err)
			}
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				panic(err)
			}
		}
	}
}

func withInputs(p ...string) option  { return func(s *Spec) { s.Inputs = append(s.Inputs, p...) } }
func withOutputs(p ...string) option { return func(s *Spec) { s.Outputs = append(s.Outputs, p...) } }
func withLimits(f func(*Limits)) option {
	return func(s *Spec) { f(&s.Limits) }
}

// sandboxed runs argv in a fresh sandbox with a fresh workspace.
func sandboxed(t *testing.T, argv []string, opts ...option) outcome {
	t.Helper()
	gs, err := grant.Parse([]byte(testGrants))
	if err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	s := &Spec{
		Argv: argv, Grants: gs, Tier: tier.S2, StateDir: t.TempDir(), Workspace: t.TempDir(),
		Limits: DefaultLimits(), Stdout: &stdout, Stderr: &stderr,
	}
	s.Limits.Wall = 30 * time.Second
	s.Limits.CgroupOptional = true // as LimitsFor makes it for testGrants, which limit no memory
	for _, o := range opts {
		o(s)
	}
	res, err := Run(context.Background(), s)
	return outcome{res: res, err: err, stdout: stdout.String(), stderr: stderr.String(), ws: s.Workspace}
}

// mustExit requires the program to have run and exited with code.
func (r outcome) mustExit(t *testing.T, code int) {
	t.Helper()
	if r.err != nil {
		t.Fatalf("Run: %v\nstderr: %s", r.err, r.stderr)
	}
	if r.res.ExitCode != code {
		t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", r.res.ExitCode, code, r.stdout, r.stderr)
	}
}

func TestRunTrue(t *testing.T) {
	r := sandboxed(t, []string{"true"})
	r.mustExit(t, 0)
	if r.res.Tier != tier.S2 || r.res.Program.Path != "/usr/bin/true" || r.res.LandlockABI < 1 {
		t.Errorf("result %+v", r.res)
	}
	if r.res.HostUID == 0 {
		t.Errorf("the program ran as host root")
	}
}

func TestExitStatusAndSignal(t *testing.T) {
	sandboxed(t, []string{"sh", "-c", "exit 7"}).mustExit(t, 7)
	r := sandboxed(t, []string{"sh", "-c", "kill -TERM $$"})
	r.mustExit(t, 128+15)
	if r.res.Signal != 15 {
		t.Errorf("signal %d, want 15", r.res.Signal)
	}
}

func TestStagedScript(t *testing.T) {
	script := "import sys\nd=open('in/data.txt').read()\nopen('out/result.txt','w').write(d.upper())\nprint('ok')\n"
	r := sandboxed(t, []string{"python3", "in/job.py"},
		withFiles(map[string]string{"in/data.txt": "hello\n", "in/job.py": script, ".env": "SECRET=1\n", "out/.keep": ""}),
		withInputs("in"), withOutputs("out/result.txt"))
	r.mustExit(t, 0)
	if r.stdout != "ok\n" {
		t.Errorf("stdout %q", r.stdout)
	}
	b, err := os.ReadFile(filepath.Join(r.ws, "out/result.txt"))
	if err != nil || string(b) != "HELLO\n" {
		t.Fatalf("output %q, %v", b, err)
	}
	if len(r.res.Outputs) != 1 || r.res.Outputs[0].Path != "out/result.txt" {
		t.Errorf("outputs %+v", r.res.Outputs)
	}
	if r.res.CPUNanos <= 0 || r.res.PeakMemoryBytes <= 0 {
		t.Errorf("no resource accounting: cpu %d ns, peak %d bytes", r.res.CPUNanos, r.res.PeakMemoryBytes)
	}
}

func TestTimeoutKillsEverything(t *testing.T) {
	start := time.Now()
	r := sandboxed(t, []string{"sh", "-c", "(sleep 100 &) ; sleep 100"}, withLimits(func(l *Limits) { l.Wall = 500 * time.Millisecond }))
	r.mustExit(t, ExitTimeout)
	if !r.res.TimedOut {
		t.Errorf("not marked timed out")
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("took %s", d)
	}
}

func TestRefusals(t *testing.T) {
	for _, tc := range []struct {
		name string
		argv []string
		code int
		want string
	}{
		{"not granted", []string{"uname"}, ExitRefused, "no exec rule allows uname"},
		{"not found", []string{"no-such-program"}, ExitNotFound, "not in the runtime"},
		{"relative path", []string{"./x"}, ExitCannotExec, "must be absolute"},
		{"outside runtime", []string{"/etc/passwd"}, ExitCannotExec, "not in the runtime"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := sandboxed(t, tc.argv)
			var ee *ExitError
			if !errors.As(r.err, &ee) || ee.Code != tc.code || !strings.Contains(r.err.Error(), tc.want) {
				t.Fatalf("err %v, want code %d containing %q", r.err, tc.code, tc.want)
			}
		})
	}
}

// TestDecidedRecordsBeforeTheRun: the exec decision reaches Decided
// before the program runs, and a Decided that fails (a journal that
// cannot be written) refuses the run.
func TestDecidedRecordsBeforeTheRun(t *testing.T) {
	var got []grant.Decision
	r := sandboxed(t, []string{"sh", "-c", "echo ran > out.txt"}, withOutputs("out.txt"),
		func(s *Spec) { s.Decided = func(d grant.Decision) error { got = append(got, d); return nil } })
	r.mustExit(t, 0)
	if len(got) != 1 || !got[0].Allow || got[0].Query.Path != "/usr/bin/sh" {
		t.Fatalf("decisions %+v", got)
	}
	r = sandboxed(t, []string{"sh", "-c", "echo ran > out.txt"}, withOutputs("out.txt"),
		func(s *Spec) { s.Decided = func(grant.Decision) error { return errors.New("disk full") } })
	var ee *ExitError
	if !errors.As(r.err, &ee) || ee.Code != ExitRefused || !strings.Contains(r.err.Error(), "disk full") {
		t.Fatalf("a failed Decided: %v", r.err)
	}
	if _, err := os.Stat(filepath.Join(r.ws, "out.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the program ran although its decision was not recorded: %v", err)
	}
}
