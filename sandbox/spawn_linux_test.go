package sandbox

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// startSleeping starts `sleep 60` in a sandbox through sp, destroyed
// when the test ends.
func startSleeping(t *testing.T, sp *Spawner) *Sandbox {
	t.Helper()
	s := newEscapeSpec(t)
	s.Argv = []string{"sleep", "60"}
	s.Spawner = sp
	sb, err := Create(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sb.Destroy() })
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	return sb
}

// testSpawner starts a spawner for the test and closes it afterwards.
func testSpawner(t *testing.T) *Spawner {
	t.Helper()
	sp, err := StartSpawner()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := sp.Close(); err != nil {
			t.Errorf("closing the spawner: %v", err)
		}
	})
	return sp
}

func withSpawner(sp *Spawner) option { return func(s *Spec) { s.Spawner = sp } }

// A run through a spawner is the run started directly: the same
// streams (copied, as non-file readers and writers are), exit status,
// credentials, capabilities, seccomp and no_new_privs, descriptors, and
// resource figures.
func TestSpawnerRunsLikeDirect(t *testing.T) {
	sp := testSpawner(t)
	script := `cat; echo err >&2; ls /proc/self/fd; id; ` +
		`while IFS= read -r l; do case "$l" in Uid*|Gid*|Groups*|Cap*|NoNewPrivs*|Seccomp*|Speculation*) echo "$l";; esac; done </proc/self/status; ` +
		`cat /proc/self/uid_map /proc/self/gid_map /proc/self/setgroups; exit 3`
	state := t.TempDir() // one state directory: the same uid range
	run := func(opts ...option) outcome {
		return sandboxed(t, []string{"sh", "-c", script}, append(opts, func(s *Spec) {
			s.Stdin = strings.NewReader("hello\n")
			s.StateDir = state
		})...)
	}
	direct := run()
	spawned := run(withSpawner(sp))
	direct.mustExit(t, 3)
	spawned.mustExit(t, 3)
	if !strings.HasPrefix(spawned.stdout, "hello\n") || spawned.stderr != "err\n" {
		t.Errorf("through the spawner: stdout %q, stderr %q", spawned.stdout, spawned.stderr)
	}
	for _, want := range []string{"NoNewPrivs:\t1", "Seccomp:\t2", "CapEff:\t0000000000000000", "Uid:\t1000"} {
		if !strings.Contains(spawned.stdout, want) {
			t.Errorf("through the spawner the program's status lacks %q:\n%s", want, spawned.stdout)
		}
	}
	if spawned.stdout != direct.stdout {
		t.Errorf("the program sees another process through the spawner:\ndirect:\n%s\nspawned:\n%s", direct.stdout, spawned.stdout)
	}
	if spawned.res.CPUNanos <= 0 || spawned.res.PeakMemoryBytes <= 0 {
		t.Errorf("through the spawner the run has no resource figures: %+v", spawned.res)
	}
	for _, c := range [][]string{{"sh", "-c", "kill -KILL $$"}, {"true"}} {
		r := sandboxed(t, c, withSpawner(sp))
		if r.err != nil {
			t.Fatalf("%v: %v", c, r.err)
		}
		if want := map[bool]int{true: 128 + 9, false: 0}[c[0] == "sh"]; r.res.ExitCode != want {
			t.Errorf("%v through the spawner: exit %d, want %d", c, r.res.ExitCode, want)
		}
	}
}

// The run's user namespace belongs to its tenant's base uid, not to the
// spawner's root, as when cordon starts init itself.
func TestSpawnerNamespaceOwner(t *testing.T) {
	requireRoot(t, "reads the owner of a root-started run's namespace")
	sp := testSpawner(t)
	s := newEscapeSpec(t)
	s.Argv = []string{"true"}
	s.Spawner = sp
	sb, err := Create(context.Background(), s)
	if err != nil {
		t.Fatal(err)
	}
	defer sb.Destroy()
	if owner := nsOwner(t, sb.proc.pid()); owner != sb.hostBase {
		t.Errorf("through the spawner the run's user namespace is owned by host uid %d, want %d", owner, sb.hostBase)
	}
	ppid := parentOf(t, sb.proc.pid())
	if ppid != sp.PID() {
		t.Errorf("init's parent is %d, want the spawner %d", ppid, sp.PID())
	}
}

func parentOf(t *testing.T, pid int) int {
	t.Helper()
	st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
	ppid, err := strconv.Atoi(f[1])
	if err != nil {
		t.Fatal(err)
	}
	return ppid
}

// Every descriptor the spawner holds, but its standard streams, is
// close-on-exec: no init inherits one (the request socket, another
// run's files) by accident.
func TestSpawnerHoldsOnlyCloseOnExec(t *testing.T) {
	sp := testSpawner(t)
	// A run in flight, so that the spawner holds a run's socket too.
	startSleeping(t, sp)
	dir := "/proc/" + strconv.Itoa(sp.PID()) + "/fdinfo"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(ents) < 5 {
		t.Fatalf("the spawner holds %d descriptors; the check would prove nothing", len(ents))
	}
	for _, e := range ents {
		fd, _ := strconv.Atoi(e.Name())
		if fd <= 2 {
			continue
		}
		info, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			continue // closed meanwhile
		}
		var flags int64
		for l := range strings.Lines(string(info)) {
			if v, ok := strings.CutPrefix(l, "flags:"); ok {
				flags, _ = strconv.ParseInt(strings.TrimSpace(v), 8, 64)
			}
		}
		if flags&unix.O_CLOEXEC == 0 {
			link, _ := os.Readlink("/proc/" + strconv.Itoa(sp.PID()) + "/fd/" + e.Name())
			t.Errorf("the spawner's fd %d (%s) is not close-on-exec: %s", fd, link, info)
		}
	}
}

// A spawner killed mid-run takes its runs' inits with it (their
// parent-death signal), the runs fail instead of hanging, and the next
// run gets a new spawner.
func TestSpawnerKilledEndsItsRuns(t *testing.T) {
	sp := testSpawner(t)
	sb := startSleeping(t, sp)
	initPID, old := sb.proc.pid(), sp.PID()
	if err := syscall.Kill(old, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		_, err := sb.Wait()
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil {
			t.Error("Wait succeeded after the spawner was killed")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Wait still waits 10 s after the spawner was killed")
	}
	waitGone(t, initPID)
	r := sandboxed(t, []string{"true"}, withSpawner(sp))
	r.mustExit(t, 0)
	if sp.PID() == old {
		t.Error("the killed spawner was not replaced")
	}
}

// Closing the spawner kills what it started; the terminal's signals do
// not reach it.
func TestSpawnerCloseAndSignals(t *testing.T) {
	sp, err := StartSpawner()
	if err != nil {
		t.Fatal(err)
	}
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGPIPE} {
		if err := syscall.Kill(sp.PID(), sig); err != nil {
			t.Fatal(err)
		}
	}
	s := newEscapeSpec(t)
	s.Argv = []string{"sleep", "60"}
	s.Spawner = sp
	sb, err := Create(context.Background(), s)
	if err != nil {
		t.Fatalf("after the terminal's signals the spawner does not serve: %v", err)
	}
	defer sb.Destroy()
	if err := sb.Start(); err != nil {
		t.Fatal(err)
	}
	initPID, spPID := sb.proc.pid(), sp.PID()
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	waitGone(t, initPID)
	if err := syscall.Kill(spPID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("the closed spawner is still there: %v", err)
	}
	r := sandboxed(t, []string{"true"}, withSpawner(sp))
	if r.err == nil || !strings.Contains(r.err.Error(), "spawner is closed") {
		t.Errorf("a run through a closed spawner: %v, want a refusal that names it", r.err)
	}
}

// waitGone waits until pid is no more, or fails the test.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil || strings.Contains(string(st), ") Z ") {
			return // gone, or a zombie: it runs nothing
		}
	}
	t.Fatalf("init %d still runs 10 s later", pid)
}

// failingWriter fails every write, slowly: the program has exited by
// then.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) {
	time.Sleep(300 * time.Millisecond)
	return 0, errors.New("the reader is gone")
}

// A standard stream whose writer fails ends the run as it does without
// a spawner (the first time it hung: the copy's error and Wait took one
// lock).
func TestSpawnerFailingWriter(t *testing.T) {
	sp := testSpawner(t)
	for _, spawned := range []bool{false, true} {
		s := newEscapeSpec(t)
		s.Argv = []string{"sh", "-c", "echo out; echo err >&2"}
		s.Stdout, s.Stderr = failingWriter{}, failingWriter{}
		if spawned {
			s.Spawner = sp
		}
		r := runWithin(t, s, 20*time.Second)
		if r.err == nil || !strings.Contains(r.err.Error(), "the reader is gone") {
			t.Errorf("spawned %v: Run: %v, want the writer's error", spawned, r.err)
		}
	}
}

// Red team (finding 5): a resource limit the operator lowers on the
// running server (prlimit) reaches the runs the spawner starts, as it
// reaches those started directly; the spawner was started before.
func TestSpawnerTakesTheCallersLimitsOfNow(t *testing.T) {
	sp := testSpawner(t)
	var old unix.Rlimit
	if err := unix.Prlimit(0, unix.RLIMIT_STACK, nil, &old); err != nil {
		t.Fatal(err)
	}
	lower := old
	lower.Cur = 4 << 20
	if lower.Max != unix.RLIM_INFINITY && lower.Max < lower.Cur {
		lower.Cur = lower.Max
	}
	if err := unix.Prlimit(0, unix.RLIMIT_STACK, &lower, nil); err != nil {
		t.Fatal(err)
	}
	defer unix.Prlimit(0, unix.RLIMIT_STACK, &old, nil)
	want := strconv.FormatUint(lower.Cur>>10, 10) + "\n"
	direct := sandboxed(t, []string{"sh", "-c", "ulimit -s"})
	spawned := sandboxed(t, []string{"sh", "-c", "ulimit -s"}, withSpawner(sp))
	if direct.stdout != want {
		t.Fatalf("started directly the program's stack limit is %q, want %q (the check proves nothing)", direct.stdout, want)
	}
	if spawned.stdout != direct.stdout {
		t.Errorf("the server's stack limit, lowered after the spawner started, is %q through the spawner, %q directly", spawned.stdout, direct.stdout)
	}
}

// watchedWriter reports whether anything ever copied into it.
type watchedWriter struct{ used chan struct{} }

func (w watchedWriter) Write(p []byte) (int, error) {
	select {
	case w.used <- struct{}{}:
	default:
	}
	return len(p), nil
}

func (w watchedWriter) ReadFrom(r io.Reader) (int64, error) {
	select {
	case w.used <- struct{}{}:
	default:
	}
	return io.Copy(io.Discard, r)
}

// A run the spawner refuses leaves no copy of its streams behind, still
// writing to the caller's writers after Run has returned (it did: the
// copies' start checked a shadowed error).
func TestSpawnerRefusedRunCopiesNothing(t *testing.T) {
	sp, err := StartSpawner()
	if err != nil {
		t.Fatal(err)
	}
	if err := sp.Close(); err != nil {
		t.Fatal(err)
	}
	w := watchedWriter{used: make(chan struct{}, 1)}
	s := newEscapeSpec(t)
	s.Argv = []string{"true"}
	s.Spawner = sp
	s.Stdin, s.Stdout, s.Stderr = strings.NewReader("input"), w, w
	if r := runEscape(s); r.err == nil {
		t.Fatal("a run through a closed spawner was not refused")
	}
	select {
	case <-w.used:
		t.Error("a refused run's stream copy still ran after Run returned")
	case <-time.After(300 * time.Millisecond):
	}
}
