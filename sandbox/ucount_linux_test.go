package sandbox

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The kernel counts some resources per user (kernel/ucount.c): inotify
// instances and watches, queued signals, POSIX message queue bytes,
// user namespaces, fanotify groups. A user namespace's counts are also
// charged to its owner, the uid that created it, in the parent
// namespace. These tests check that a sandboxed program that uses up its
// counters uses up its own tenant's, never host root's or another
// tenant's.

// ucountHog uses up the program's inotify instances, queued real-time
// signals and message queue bytes, reports what stopped it, and holds
// everything until its stdin ends. Each line it reads makes it take
// inotify instances again until refused (others of its owner's may have
// closed theirs meanwhile) and report "more inotify N ERR".
const ucountHog = `import ctypes, errno, os, signal, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
def E():
    return errno.errorcode.get(ctypes.get_errno(), "?")
n = 0
while True:
    if libc.inotify_init1(0o2000000) < 0:
        ino = E(); break
    n += 1
sig = signal.SIGRTMIN
signal.pthread_sigmask(signal.SIG_BLOCK, [sig])
s = 0
while True:
    try:
        signal.pthread_kill(threading.get_ident(), sig)
    except OSError as e:
        sq = errno.errorcode.get(e.errno, "?"); break
    s += 1
q = 0
while True:
    if libc.mq_open(b"/hog%d" % q, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600, None) < 0:
        mq = E(); break
    q += 1
print("held inotify %d %s sigqueue %d %s mqueue %d %s" % (n, ino, s, sq, q, mq), flush=True)
for line in sys.stdin:
    m = 0
    while libc.inotify_init1(0o2000000) >= 0:
        m += 1
    print("more inotify %d %s" % (m, E()), flush=True)
`

// ucountProbe tries one of each counted resource and reports each as ok
// or the error.
const ucountProbe = `import ctypes, errno, os, signal, threading
libc = ctypes.CDLL(None, use_errno=True)
def E():
    return errno.errorcode.get(ctypes.get_errno(), "?")
fd = libc.inotify_init1(0o2000000)
print("inotify", "ok" if fd >= 0 else E())
signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGRTMIN])
try:
    signal.pthread_kill(threading.get_ident(), signal.SIGRTMIN)
    print("sigqueue ok")
except OSError as e:
    print("sigqueue", errno.errorcode.get(e.errno, "?"))
name = b"/cordon-ucount-%d" % os.getpid()
q = libc.mq_open(name, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600, None)
if q >= 0:
    print("mqueue ok")
    libc.mq_unlink(name)
else:
    print("mqueue", E())
`

const ucountAllOK = "inotify ok\nsigqueue ok\nmqueue ok\n"

// hostProbe runs ucountProbe on the host as uid (0: as root).
func hostProbe(t *testing.T, uid int) string {
	t.Helper()
	// The system's python3 (the sandbox runs the same): one found
	// through PATH may live where uid cannot reach.
	cmd := exec.Command("/usr/bin/python3", "-c", ucountProbe)
	cmd.Dir = "/"
	if uid != 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{
			Credential: &syscall.Credential{Uid: uint32(uid), Gid: uint32(uid), Groups: []uint32{}},
		}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the host probe as uid %d: %v\n%s", uid, err, out)
	}
	return string(out)
}

// nsOwnerUID is NS_GET_OWNER_UID, _IO(0xb7, 0x4), from linux/nsfs.h.
const nsOwnerUID = 0xb704

// nsOwner returns the host uid that owns pid's user namespace.
func nsOwner(t *testing.T, pid int) int {
	t.Helper()
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/ns/user")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	uid, err := unix.IoctlGetUint32(int(f.Fd()), nsOwnerUID)
	if err != nil {
		t.Fatalf("NS_GET_OWNER_UID: %v", err)
	}
	return int(uid)
}

// hog is a sandbox running ucountHog, holding its counters.
type hog struct {
	sb     *Sandbox
	report string
	stdin  *io.PipeWriter
	lines  chan string // what the hog prints after its first report
	done   chan error
	mqueue bool // the hog used up its message queue bytes
}

// startHog runs ucountHog in s's sandbox and returns once the hog holds
// everything it could take.
func startHog(t *testing.T, s *Spec) *hog {
	t.Helper()
	s.Argv = []string{"python3", "-c", ucountHog}
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	var stderr strings.Builder
	s.Stdin, s.Stdout, s.Stderr = inR, outW, &stderr
	sb, err := Create(context.Background(), s)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	h := &hog{sb: sb, stdin: inW, done: make(chan error, 1)}
	t.Cleanup(func() {
		inW.Close()
		_ = sb.Destroy()
	})
	if err := sb.Start(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	go func() {
		res, err := sb.Wait()
		outW.Close()
		if err == nil && res.ExitCode != 0 {
			err = &ExitError{Code: res.ExitCode}
		}
		h.done <- err
	}()
	lines := make(chan string, 16)
	h.lines = lines
	go func() {
		sc := bufio.NewScanner(outR)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, outR)
	}()
	select {
	case l, ok := <-lines:
		if !ok || !strings.HasPrefix(l, "held ") {
			t.Fatalf("the hog reported %q; stderr:\n%s", l, stderr.String())
		}
		h.report = l
	case <-time.After(60 * time.Second):
		t.Fatalf("the hog did not report; stderr:\n%s", stderr.String())
	}
	t.Logf("hog (host uid base %d): %s", sb.hostBase, h.report)
	// Every counter ran out, and not because of a limit of the sandbox's
	// own (RLIMIT_NOFILE is 1024). The program may not create message
	// queues at all (EACCES): then it has no message queue bytes to use.
	f := strings.Fields(h.report)
	if len(f) != 10 || f[3] != "EMFILE" || f[6] != "EAGAIN" || (f[9] != "EMFILE" && (f[8] != "0" || f[9] != "EACCES")) {
		t.Fatalf("the hog's report %q: want inotify … EMFILE sigqueue … EAGAIN mqueue … EMFILE", h.report)
	}
	h.mqueue = f[9] == "EMFILE"
	return h
}

// topUp makes the hog take inotify instances again until refused: another
// process of its owner's may have closed one since.
func (h *hog) topUp(t *testing.T) {
	t.Helper()
	if _, err := io.WriteString(h.stdin, "more\n"); err != nil {
		t.Fatalf("the hog's stdin: %v", err)
	}
	select {
	case l, ok := <-h.lines:
		if !ok || !strings.HasPrefix(l, "more inotify ") || !strings.HasSuffix(l, " EMFILE") {
			t.Fatalf("the hog topped up with %q, want more inotify N EMFILE", l)
		}
		t.Logf("the hog topped up: %s", l)
	case <-time.After(30 * time.Second):
		t.Fatalf("the hog did not top up")
	}
}

// finish lets the hog exit and waits for it.
func (h *hog) finish(t *testing.T) {
	t.Helper()
	h.stdin.Close()
	select {
	case err := <-h.done:
		if err != nil {
			t.Errorf("the hog: %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Errorf("the hog did not exit")
	}
}

// A program that uses up its per-user counters leaves host root's alone:
// they are charged to the tenant's base uid, the owner of the run's user
// namespace, which is out of them while the hog holds them.
func TestUcountsNotChargedToRoot(t *testing.T) {
	requireRoot(t, "probes host root's counters; a rootless run's are charged to its caller, who owns its namespace")
	s := newEscapeSpec(t)
	s.Limits.Wall = 60 * time.Second
	h := startHog(t, s)
	if owner := nsOwner(t, h.sb.proc.pid()); owner != h.sb.hostBase {
		t.Errorf("the run's user namespace is owned by host uid %d, want its base uid %d", owner, h.sb.hostBase)
	}
	root := hostProbe(t, 0)
	owner := hostProbe(t, h.sb.hostBase)
	h.finish(t)
	if root != ucountAllOK {
		t.Errorf("while the sandbox holds its counters, host root gets:\n%s", root)
	}
	want := "inotify EMFILE\nsigqueue EAGAIN\nmqueue ok\n"
	if h.mqueue {
		want = strings.Replace(want, "mqueue ok", "mqueue EMFILE", 1)
	}
	if owner != want {
		t.Errorf("the run's owner uid %d gets:\n%s\nwant:\n%s", h.sb.hostBase, owner, want)
	}
}

// At S3, one tenant's hog leaves another tenant's counters alone.
func TestUcountsSeparateTenants(t *testing.T) {
	requireRoot(t, "S3 is offered only as root")
	state := t.TempDir()
	a := tenantSpec(t, state, "alpha", nil)
	a.Limits.Wall = 60 * time.Second
	h := startHog(t, a)
	b := runWithin(t, tenantSpec(t, state, "beta", []string{"python3", "-c", ucountProbe}), 60*time.Second)
	h.finish(t)
	b.mustExit(t, 0)
	// Inside, mq_open may be refused (EACCES) whoever holds what.
	if strings.TrimSuffix(b.stdout, "mqueue EACCES\n")+"mqueue ok\n" != ucountAllOK && b.stdout != ucountAllOK {
		t.Errorf("while tenant alpha holds its counters, tenant beta gets:\n%s", b.stdout)
	}
	if root := hostProbe(t, 0); root != ucountAllOK {
		t.Errorf("after the hog, host root gets:\n%s", root)
	}
}
