package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Red team (docs/security/redteam-spawner.md, finding 1): the program
// started through a spawner had the signals the spawner ignored
// (SIGINT, SIGHUP: an ignored signal stays ignored across fork and
// exec) ignored too; started directly it has none ignored. The signal
// dispositions and mask, umask and rlimits are compared.
func TestRedteamSpawner1SignalDisposition(t *testing.T) {
	// Caught here, whatever this test inherited (nohup, a shell's
	// background job): a direct start then gets them at the default.
	caught := make(chan os.Signal, 1)
	signal.Notify(caught, syscall.SIGINT, syscall.SIGHUP)
	defer signal.Stop(caught)
	sp := testSpawner(t)
	script := `while IFS= read -r l; do case "$l" in SigBlk*|SigIgn*|SigCgt*) echo "$l";; esac; done </proc/self/status; umask; ulimit -a`
	state := t.TempDir()
	run := func(opts ...option) outcome {
		return sandboxed(t, []string{"sh", "-c", script}, append(opts, func(s *Spec) { s.StateDir = state })...)
	}
	direct := run()
	spawned := run(withSpawner(sp))
	direct.mustExit(t, 0)
	spawned.mustExit(t, 0)
	if direct.stdout != spawned.stdout {
		t.Errorf("the program's signal dispositions, umask or rlimits differ through the spawner:\ndirect:\n%s\nspawned:\n%s", direct.stdout, spawned.stdout)
	}
	if want := "SigIgn:\t0000000000000000\n"; !strings.Contains(direct.stdout, want) {
		t.Errorf("started directly, the program ignores signals (the check would prove nothing):\n%s", direct.stdout)
	}
}

// Red team (finding 2): once the spawner is dead, nothing holds init's
// zombie, so its pid can name another process while Create still uses
// it. The spawner dies at the "ready" step; a host process takes init's
// pid; Create must not open that process's /work as the sandbox's.
func TestRedteamSpawner2PidReuseAfterSpawnerDeath(t *testing.T) {
	requireRoot(t, "takes a given pid through ns_last_pid")
	sp := testSpawner(t)
	s := newEscapeSpec(t)
	s.Argv = []string{"true"}
	s.Spawner = sp
	var victim *exec.Cmd
	hookCreate(t, func(sb *Sandbox, step string) error {
		if step != "ready" {
			return nil
		}
		pid := sb.proc.pid()
		if err := syscall.Kill(sp.PID(), syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			if _, err := os.Stat("/proc/" + strconv.Itoa(pid)); errors.Is(err, os.ErrNotExist) {
				break // reaped by whoever inherited it
			}
			if time.Now().After(deadline) {
				t.Fatalf("init %d was not reaped after the spawner died", pid)
			}
		}
		for range 50 {
			if err := os.WriteFile("/proc/sys/kernel/ns_last_pid", []byte(strconv.Itoa(pid-1)), 0); err != nil {
				t.Fatal(err)
			}
			c := exec.Command("sleep", "30")
			if err := c.Start(); err != nil {
				t.Fatal(err)
			}
			if c.Process.Pid == pid {
				victim = c
				break
			}
			_ = c.Process.Kill()
			_ = c.Wait()
		}
		if victim == nil {
			t.Fatalf("could not take pid %d", pid)
		}
		t.Cleanup(func() { _ = victim.Process.Kill(); _ = victim.Wait() })
		return nil
	})
	sb, err := Create(context.Background(), s)
	if err == nil {
		defer sb.Destroy()
		var st syscall.Stat_t
		_ = syscall.Fstat(int(sb.work.Fd()), &st)
		t.Errorf("Create succeeded after the spawner died and pid %d was taken by %s; the sandbox's /work is inode %d", victim.Process.Pid, victim.Path, st.Ino)
	}
	if victim == nil {
		t.Fatal("the hook did not run")
	}
}

// Red team (finding 3): a spawner that died is replaced, but its
// request socket stayed open in this process: one descriptor leaked per
// death, until the garbage collector ran its finalizer (off here).
func TestRedteamSpawner3ReplacedSpawnerLeaksNoFD(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	sp := testSpawner(t)
	sandboxed(t, []string{"true"}, withSpawner(sp)).mustExit(t, 0)
	count := func() int {
		ents, err := os.ReadDir("/proc/self/fd")
		if err != nil {
			t.Fatal(err)
		}
		return len(ents)
	}
	before := count()
	const deaths = 8
	for range deaths {
		pid := sp.PID()
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		sp.mu.Lock()
		dead := sp.h.dead
		sp.mu.Unlock()
		select {
		case <-dead:
		case <-time.After(10 * time.Second):
			t.Fatalf("spawner %d not reaped", pid)
		}
		sandboxed(t, []string{"true"}, withSpawner(sp)).mustExit(t, 0)
		if sp.PID() == pid {
			t.Fatal("the killed spawner was not replaced")
		}
	}
	if after := count(); after >= before+deaths {
		t.Errorf("%d spawners died and were replaced; this process holds %d descriptors, %d before", deaths, after, before)
	}
}

// Red team (finding 4): a spawner that does not answer (stopped) held
// Run past its context, for as long as it did not answer. Run must
// return soon after its context ends, and what the spawner starts for
// the abandoned request once it goes on must not stay.
func TestRedteamSpawner4StoppedSpawnerHonoursContext(t *testing.T) {
	sp := testSpawner(t)
	pid := sp.PID()
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	cont := func() { _ = syscall.Kill(pid, syscall.SIGCONT) }
	defer cont()
	s := newEscapeSpec(t)
	s.Argv = []string{"sleep", "60"}
	s.Spawner = sp
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := Run(ctx, s); done <- err }()
	select {
	case err := <-done:
		if err == nil {
			t.Fatal("Run succeeded with its spawner stopped")
		}
	case <-time.After(10 * time.Second):
		cont()
		<-done
		t.Fatal("Run with a 2 s context still ran 10 s later, its spawner stopped")
	}
	cont()
	children := func() string {
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		var all string
		for _, task := range tasks {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
			all += string(b)
		}
		return strings.TrimSpace(all)
	}
	for deadline := time.Now().Add(10 * time.Second); children() != ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the spawner still has children %q 10 s after the abandoned request", children())
		}
	}
	sandboxed(t, []string{"true"}, withSpawner(sp)).mustExit(t, 0)
}

// Red team (finding 6): the spawner started a request that named a
// field it does not know (here os/exec's Dir, which it does not carry)
// as if the field were not there; a request it cannot honour whole must
// be refused.
func TestRedteamSpawner6UnknownRequestFieldRefused(t *testing.T) {
	sp := testSpawner(t)
	runConn, runEnd, err := seqpacketPair()
	if err != nil {
		t.Fatal(err)
	}
	defer runConn.Close()
	body := `{"path":"/bin/true","args":["true"],"env":[],"extra":[],"cloneflags":0,"setsid":true,"pdeathsig":9,"owner":-1,"dir":"/nonexistent"}`
	sp.mu.Lock()
	_, _, err = sp.h.conn.WriteMsgUnix([]byte(body), unix.UnixRights(int(runEnd.Fd())), nil)
	sp.mu.Unlock()
	runEnd.Close()
	if err != nil {
		t.Fatal(err)
	}
	pidfd := -1
	var rep spawnReply
	if err := readReply(runConn, &rep, &pidfd); err != nil {
		t.Fatal(err)
	}
	if pidfd >= 0 {
		unix.Close(pidfd)
	}
	if rep.Error == "" || !strings.Contains(rep.Error, "dir") {
		t.Errorf("the spawner answered %+v to a request with a field it does not know, want a refusal that names it", rep)
	}
}

// failLate is a slow writer that fails once more than limit bytes would
// have been written to it.
type failLate struct {
	mu    sync.Mutex
	n     int
	limit int
}

func (w *failLate) Write(p []byte) (int, error) {
	time.Sleep(200 * time.Millisecond) // the program exits before its output is copied
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.n+len(p) > w.limit {
		return 0, errors.New("the output is too large")
	}
	w.n += len(p)
	return len(p), nil
}

// Red team (finding 7): when the writer of the program's output failed
// after Wait had begun, a spawned init's wait held the lock the copy
// needed to record its error, and waited for the copy: Wait never
// returned. Started directly, Wait returns the writer's error.
func TestRedteamSpawner7FailingWriterDoesNotHangWait(t *testing.T) {
	sp := testSpawner(t)
	for _, spawn := range []bool{false, true} {
		s := newEscapeSpec(t)
		if spawn {
			s.Spawner = sp
		}
		// 256 KiB of output at once; the writer fails on its last part.
		s.Argv = []string{"sh", "-c", `x=xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx; x=$x$x$x$x$x$x$x$x$x$x$x$x$x$x$x$x; x=$x$x$x$x$x$x$x$x$x$x$x$x$x$x$x$x; i=0; while [ $i -lt 16 ]; do echo "$x"; i=$((i+1)); done`}
		s.Stdout = &failLate{limit: 250000}
		done := make(chan outcome, 1)
		go func() { done <- runEscape(s) }()
		select {
		case r := <-done:
			if r.err == nil || !strings.Contains(r.err.Error(), "the output is too large") {
				t.Errorf("spawner %v: Run returned %v, want the writer's error", spawn, r.err)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("spawner %v: Run still waits 20 s after its program's output failed to be written", spawn)
		}
	}
}

// Red team (finding 8): a request that reached a spawner as it died
// could stay unanswered with the run's socket never closing (seen
// rootless: TestSpawnerKilledEndsItsRuns hung there one time in twenty),
// and the run waited forever. Here another holder of the spawner's
// request socket (a pidfd_getfd copy) keeps the request unanswered, and
// the spawner's death is noticed only after the request was written, as
// when it races with the write. The run must fail, not hang. (Since the
// fix, the request goes once more to the spawner's successor, and the
// run starts; the first request, in flight in the held socket, still
// holds its output pipes open, so Wait gives them up copyDelay after
// init has exited and fails the run, saying so.)
func TestRedteamSpawner8DyingSpawnerFailsRun(t *testing.T) {
	sp := testSpawner(t)
	pidfd, err := unix.PidfdOpen(sp.PID(), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	// The spawner, new, holds one socket: its request socket.
	dir := "/proc/" + strconv.Itoa(sp.PID()) + "/fd/"
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var sockets []int
	for _, e := range ents {
		if l, _ := os.Readlink(dir + e.Name()); strings.HasPrefix(l, "socket:") {
			fd, _ := strconv.Atoi(e.Name())
			sockets = append(sockets, fd)
		}
	}
	if len(sockets) != 1 {
		t.Fatalf("the new spawner holds sockets %v, want its request socket alone", sockets)
	}
	held, err := unix.PidfdGetfd(pidfd, sockets[0], 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(held)
	// The run's start sees the spawner's death late: once the request
	// is out.
	late := make(chan struct{})
	sp.mu.Lock()
	h := sp.h
	sp.h = &spawnerProc{conn: h.conn, proc: h.proc, dead: late}
	sp.mu.Unlock()
	if err := syscall.Kill(h.proc.Pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-h.dead
	go func() {
		time.Sleep(500 * time.Millisecond)
		close(late)
	}()
	done := make(chan outcome, 1)
	go func() {
		s := newEscapeSpec(t)
		s.Spawner = sp
		s.Argv = []string{"true"}
		done <- runEscape(s)
	}()
	select {
	case r := <-done:
		if r.err == nil {
			t.Error("a run sent to a spawner that died succeeded")
		}
	case <-time.After(15 * time.Second):
		// Closing held does not end it either: the run's socket, in
		// flight in a socket nobody holds, is not closed.
		t.Fatal("a run sent to a spawner that died before it answered still waits 15 s later")
	}
	sandboxed(t, []string{"true"}, withSpawner(sp)).mustExit(t, 0)
}
