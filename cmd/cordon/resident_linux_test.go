package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cordon-dev/cordon/cmd/cordon/internal/handoff"
	"github.com/cordon-dev/cordon/grant"
)

// residentCmd is this test binary run as cordon (testscript.Main runs main
// when argv[0]'s base name is "cordon"), with the handoff package's init
// in front of it as in the real binary.
func residentCmd(t *testing.T, args ...string) *exec.Cmd {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Args[0] = "cordon"
	// A loaded machine (CI) may not run an idle warm process within the
	// default 10 ms: the tests that want a served run wait longer.
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "HOME=" + t.TempDir(), "LANG=C.UTF-8", handoff.WaitEnv + "=5000"}
	// The race detector's options (CI's GORACE=atexit_sleep_ms=50): a
	// race-built cordon otherwise sleeps a second at every exit, and these
	// tests start hundreds of them, one after another (a server's stop
	// waits for its own exit, a probe for its cold run's).
	if v, ok := os.LookupEnv("GORACE"); ok {
		cmd.Env = append(cmd.Env, "GORACE="+v)
	}
	return cmd
}

// startResident runs 'cordon pool serve --exec n' on state until the test
// ends, and waits until a cordon exec there is served by a warm slot.
func startResident(t *testing.T, state string, n int) *exec.Cmd {
	t.Helper()
	srv := residentCmd(t, "pool", "serve", "--state", state, "--size", "1", "--exec", strconv.Itoa(n))
	var log bytes.Buffer
	srv.Stderr = &log
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- srv.Wait() }()
	t.Cleanup(func() {
		_ = residentCmd(t, "pool", "stop", "--state", state).Run()
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
			_ = srv.Process.Kill()
			t.Error("pool serve did not stop")
		}
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, _ := residentCmd(t, "exec", "--stats", "--state", state, "--", "true").CombinedOutput()
		if strings.Contains(string(out), "served by a warm process") && strings.Contains(string(out), "cordon: pool: slot") {
			waitWarm(t, state)
			return srv
		}
		select {
		case err := <-exited:
			t.Fatalf("pool serve exited (%v): %s", err, log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warm slot served after 30 s: last exec: %s; server: %s", out, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// waitWarm waits until a warm process of the server on state takes a
// connection ("ready"): a caller then is served, not sent cold by
// handoff.ReadyWait. The probe's connection ends before any request, and
// the warm process goes on waiting.
func waitWarm(t *testing.T, state string) {
	t.Helper()
	sock := filepath.Join(state, "pool", handoff.SocketName)
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("unix", sock, time.Second)
		if err == nil {
			_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			b := make([]byte, 6)
			n, _ := io.ReadFull(c, b)
			c.Close()
			// A warm process took it: "ready", or a decline (of this test
			// process, whose context may differ).
			if n == 6 && (string(b) == "ready " || string(b) == "declin") {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no warm process ready on %s after 30 s (%v)", sock, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type result struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, cmd *exec.Cmd) result {
	t.Helper()
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return result{code, out.String(), errb.String()}
}

const servedLine = "served by a warm process"

// TestResidentServes: with a resident exec server on the state directory,
// a plain cordon exec is run by a warm process in its prepared slot, with
// the caller's arguments, working directory (relative paths), streams and
// exit status, and its journal (the slot's pool.claim entry included)
// verifies; a grant set other than the slot's is served cold in the warm
// process, with the caller's environment; CORDON_RESIDENT=off starts
// cold.
func TestResidentServes(t *testing.T) {
	state := t.TempDir()
	startResident(t, state, 2)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "in.txt"), []byte("from the caller\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := residentCmd(t, "exec", "--stats", "--state", state, "--journal", "j.jsonl", "--workspace", ".", "--in", "in.txt", "--out", "out.txt", "--",
		"sh", "-c", "cat in.txt > out.txt; echo out; echo err >&2; exit 7")
	cmd.Dir = dir
	r := runCmd(t, cmd)
	if r.code != 7 || r.stdout != "out\n" || !strings.Contains(r.stderr, "err\n") {
		t.Fatalf("served exec: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}
	if !strings.Contains(r.stderr, servedLine) || !strings.Contains(r.stderr, "cordon: pool: slot") {
		t.Fatalf("not served by a warm slot: %s", r.stderr)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "out.txt")); err != nil || string(b) != "from the caller\n" {
		t.Fatalf("the output in the caller's directory: %q, %v", b, err)
	}
	j, err := os.ReadFile(filepath.Join(dir, "j.jsonl"))
	if err != nil || !bytes.Contains(j, []byte(`"type":"pool.claim"`)) {
		t.Fatalf("journal in the caller's directory: %v\n%s", err, j)
	}
	if r := runCmd(t, residentCmd(t, "verify", "journal", filepath.Join(dir, "j.jsonl"))); r.code != 0 {
		t.Fatalf("verify journal: %s", r.stderr)
	}

	// Another grant set: served, cold, in the warm process, with the
	// caller's environment where the grant set names it.
	waitWarm(t, state)
	gf := filepath.Join(dir, "g.json")
	if err := os.WriteFile(gf, []byte(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"env":["GREETING"],"exec":{"allow":[{"name":"sh"}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd = residentCmd(t, "exec", "--stats", "--state", state, "--grants", gf, "--", "sh", "-c", "echo \"$GREETING\"")
	cmd.Env = append(cmd.Env, "GREETING=hello from the caller's environment")
	r = runCmd(t, cmd)
	if r.code != 0 || r.stdout != "hello from the caller's environment\n" || !strings.Contains(r.stderr, servedLine) || strings.Contains(r.stderr, "cordon: pool: slot") {
		t.Fatalf("another grant set: exit %d, stdout %q, stderr %s", r.code, r.stdout, r.stderr)
	}

	// CORDON_RESIDENT=off: cold.
	cmd = residentCmd(t, "exec", "--stats", "--state", state, "--", "true")
	cmd.Env = append(cmd.Env, "CORDON_RESIDENT=off")
	if r := runCmd(t, cmd); r.code != 0 || strings.Contains(r.stderr, servedLine) {
		t.Fatalf("CORDON_RESIDENT=off: exit %d, %s", r.code, r.stderr)
	}
	// A usage error is served as it is cold: the same message and status.
	waitWarm(t, state)
	r = runCmd(t, residentCmd(t, "exec", "--state", state, "--stats"))
	if r.code != 2 || !strings.Contains(r.stderr, "exec: no program given") {
		t.Fatalf("usage error: exit %d, %s", r.code, r.stderr)
	}
}

// TestResidentDeclinesOtherContexts: a caller whose process differs from
// the warm process in anything that bounds what it may do is declined
// before anything runs, and its command runs cold, once: a lower
// scheduling priority, no_new_privs (as under a seccomp sandbox), another
// mount namespace. The caller's nice value is five above the test's (the
// warm process's), or, when the test already runs at 15 or more (under
// nice -n 19 on a shared machine), five below as root; rootless at 19 no
// caller can differ, and the test says so in its log.
func TestResidentDeclinesOtherContexts(t *testing.T) {
	state := t.TempDir()
	startResident(t, state, 2)
	cases := map[string][]string{
		"NoNewPrivs": {"setpriv", "--no-new-privs"},
	}
	// getpriority(2) returns 20 - nice.
	prio, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	switch nice := 20 - prio; {
	case nice <= 14:
		cases["nice"] = []string{"nice", "-n", "5"}
	case os.Geteuid() == 0:
		cases["nice"] = []string{"nice", "-n", "-5"}
	case nice < 19:
		cases["nice"] = []string{"nice", "-n", strconv.Itoa(19 - nice)}
	default:
		t.Logf("nice not checked: the test runs at nice %d, unprivileged, so no caller's nice value can differ from the warm process's", nice)
	}
	if os.Geteuid() == 0 {
		cases["ns/mnt"] = []string{"unshare", "--mount", "--propagation", "private"}
	}
	for what, wrap := range cases {
		exe, _ := os.Executable()
		link := filepath.Join(t.TempDir(), "cordon")
		if err := os.Symlink(exe, link); err != nil {
			t.Fatal(err)
		}
		waitWarm(t, state)
		args := append(append([]string{}, wrap...), link, "exec", "--stats", "--state", state, "--", "sh", "-c", "echo ran")
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = residentCmd(t).Env
		r := runCmd(t, cmd)
		// Rootless, a cold run under no_new_privs cannot map its ids
		// (newuidmap is set-user-ID): refused, after the decline.
		nnpRootless := what == "NoNewPrivs" && os.Geteuid() != 0 && r.code == 125 && strings.Contains(r.stderr, "newuidmap")
		if (r.code != 0 || r.stdout != "ran\n") && !nnpRootless {
			t.Fatalf("%s: exit %d, stdout %q, stderr %s", what, r.code, r.stdout, r.stderr)
		}
		if !strings.Contains(r.stderr, "declined (the caller's "+what+" differs") || strings.Contains(r.stderr, servedLine) {
			t.Fatalf("%s: not declined: %s", what, r.stderr)
		}
	}
}

// TestResidentTerminalStartsCold: a command whose standard streams are a
// terminal is never handed off.
func TestResidentTerminalStartsCold(t *testing.T) {
	state := t.TempDir()
	startResident(t, state, 1)
	exe, _ := os.Executable()
	link := filepath.Join(t.TempDir(), "cordon")
	if err := os.Symlink(exe, link); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("script", "-qec", link+" exec --stats --state "+state+" -- true", "/dev/null")
	cmd.Env = residentCmd(t).Env
	r := runCmd(t, cmd)
	if r.code != 0 || strings.Contains(r.stdout+r.stderr, servedLine) || !strings.Contains(r.stdout+r.stderr, "cordon: run: tier") {
		t.Fatalf("under a terminal: exit %d, %s %s", r.code, r.stdout, r.stderr)
	}
}

// findProc returns the pids whose command line starts with prefix.
func findProc(prefix string) []int {
	var pids []int
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.HasPrefix(b, []byte(prefix)) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func waitFor(t *testing.T, d time.Duration, what string, ok func() bool) {
	t.Helper()
	for deadline := time.Now().Add(d); !ok(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %s", d, what)
		}
	}
}

// TestResidentCallerKilled: killing the caller (kill -9) ends its served
// run, as a signal to a cold cordon does: the program is killed, and the
// journal ends with the run's outcome and verifies.
func TestResidentCallerKilled(t *testing.T) {
	state := t.TempDir()
	startResident(t, state, 1)
	dir := t.TempDir()
	journal := filepath.Join(dir, "j.jsonl")
	cmd := residentCmd(t, "exec", "--state", state, "--journal", journal, "--", "sleep", "61.2345")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the served program never started", func() bool { return len(findProc("sleep\x0061.2345")) > 0 })
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	waitFor(t, 10*time.Second, "the served program outlived its caller", func() bool { return len(findProc("sleep\x0061.2345")) == 0 })
	waitFor(t, 10*time.Second, "the journal was not ended", func() bool {
		b, _ := os.ReadFile(journal)
		return bytes.Contains(b, []byte(`"type":"command"`))
	})
	if r := runCmd(t, residentCmd(t, "verify", "journal", journal)); r.code != 0 {
		t.Fatalf("verify journal: %s", r.stderr)
	}
}

// TestResidentServerKilled: the server killed (kill -9) mid-run: its warm
// processes die with it (the parent-death signal), the served run is
// killed, and the caller reports it rather than waiting forever.
func TestResidentServerKilled(t *testing.T) {
	state := t.TempDir()
	srv := startResident(t, state, 1)
	cmd := residentCmd(t, "exec", "--state", state, "--", "sleep", "62.3456")
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the served program never started", func() bool { return len(findProc("sleep\x0062.3456")) > 0 })
	_ = srv.Process.Signal(syscall.SIGKILL)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() == 0 {
			t.Fatalf("the caller exited %v: %s", err, errb.String())
		}
	case <-time.After(15 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatal("the caller waited on after the server was killed")
	}
	waitFor(t, 10*time.Second, "the served program outlived the server", func() bool { return len(findProc("sleep\x0062.3456")) == 0 })
	waitFor(t, 10*time.Second, "warm processes outlived the server", func() bool {
		return len(findProc("cordon\x00pool\x00warm\x00--state\x00"+state+"\x00")) == 0
	})
}

// TestResidentStop: 'cordon pool stop' ends the warm processes and
// removes the socket; a cordon exec then starts cold.
func TestResidentStop(t *testing.T) {
	state := t.TempDir()
	startResident(t, state, 2)
	if r := runCmd(t, residentCmd(t, "pool", "stop", "--state", state)); r.code != 0 {
		t.Fatalf("pool stop: %s", r.stderr)
	}
	waitFor(t, 10*time.Second, "warm processes outlived stop", func() bool {
		return len(findProc("cordon\x00pool\x00warm\x00--state\x00"+state+"\x00")) == 0
	})
	if _, err := os.Lstat(filepath.Join(state, "pool", handoff.SocketName)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket after stop: %v", err)
	}
	if r := runCmd(t, residentCmd(t, "exec", "--stats", "--state", state, "--", "true")); r.code != 0 || strings.Contains(r.stderr, servedLine) {
		t.Fatalf("after stop: exit %d, %s", r.code, r.stderr)
	}
}

// TestPoolWarmByHand: 'cordon pool warm' is refused unless started by
// the server (descriptor 3 its listening socket).
func TestPoolWarmByHand(t *testing.T) {
	r := runCmd(t, residentCmd(t, "pool", "warm", "--state", t.TempDir()))
	if r.code != 125 || !strings.Contains(r.stderr, "not a listening socket") {
		t.Fatalf("pool warm by hand: exit %d, %s", r.code, r.stderr)
	}
}

func init() {
	testCommands["handoff-probe"] = handoffProbe
	testCommands["handoff-idle"] = func() { time.Sleep(time.Minute) }
}

// handoffProbe is a hostile caller of the same uid (this test binary run
// as "handoff-probe SOCK MODE [ARG…]"): it connects to SOCK, reads the
// warm process's "ready PID" and its nonce as the hand-off does, sends a
// request as MODE says, and prints what the server answers after
// "ready" before it closes. MODE: "three" (args, three descriptors),
// "cwdfile" (args, a file as the working directory), "raw" (bytes that
// are not the protocol), "ok" (args, the four descriptors), "badnonce"
// (args with another nonce), "silent" (nothing).
func handoffProbe() {
	sock, mode, args := os.Args[1], os.Args[2], os.Args[3:]
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: sock})
	}
	if err != nil {
		fmt.Println("probe:", err)
		os.Exit(1)
	}
	tv := unix.NsecToTimeval(int64(20 * time.Second))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	var line []byte
	for b := make([]byte, 1); ; {
		if n, err := unix.Read(fd, b); n != 1 || err != nil {
			fmt.Printf("probe: no ready line: %q %v\n", line, err)
			os.Exit(1)
		}
		if b[0] == '\n' {
			break
		}
		line = append(line, b[0])
	}
	if !strings.HasPrefix(string(line), "ready ") {
		fmt.Printf("%s\n", line) // declined before it was asked for anything
		os.Exit(0)
	}
	nonce := strings.Repeat("0", handoff.NonceLen)
	if pid, ok := strings.CutPrefix(string(line), "ready "); ok {
		env, _ := os.ReadFile("/proc/" + pid + "/environ")
		for _, kv := range strings.Split(string(env), "\x00") {
			if v, ok := strings.CutPrefix(kv, handoff.NonceEnv+"="); ok {
				nonce = v
			}
		}
	}
	if mode == "badnonce" {
		nonce = strings.Repeat("a", handoff.NonceLen)
	}
	req, _ := handoff.Encode(nonce, append([]string{"cordon"}, args...), []string{"PATH=/usr/bin:/bin"})
	cwd, _ := unix.Open(".", unix.O_PATH|unix.O_DIRECTORY, 0)
	devnull, _ := unix.Open(os.DevNull, unix.O_RDWR, 0)
	fds := []int{0, 1, 2, cwd}
	switch mode {
	case "three":
		fds = fds[:3]
	case "cwdfile":
		fds[3] = devnull
	case "raw":
		req = append([]byte("GET / HTTP/1.1\r\n\r\n"), make([]byte, 16)...)
	}
	if mode != "silent" {
		if err := unix.Sendmsg(fd, req, unix.UnixRights(fds...), nil, 0); err != nil {
			fmt.Println("probe:", err)
			os.Exit(1)
		}
	}
	buf := make([]byte, 4096)
	for {
		n, err := unix.Read(fd, buf)
		if n <= 0 || err != nil {
			os.Exit(0)
		}
		os.Stdout.Write(buf[:n])
	}
}

// probeCmd runs handoffProbe.
func probeCmd(t *testing.T, exe string, args ...string) *exec.Cmd {
	cmd := exec.Command(exe, args...)
	cmd.Args[0] = "handoff-probe"
	cmd.Env = residentCmd(t).Env
	cmd.Dir = t.TempDir()
	return cmd
}

// TestResidentHostileRequests: what a warm process refuses, without
// running anything: too few descriptors, a working directory that is
// not one, a request that is not the protocol's, a command other than
// exec, and a command line whose state directory is another (which is
// not even made).
func TestResidentHostileRequests(t *testing.T) {
	state := t.TempDir()
	startResident(t, state, 1)
	sock := filepath.Join(state, "pool", handoff.SocketName)
	exe, _ := os.Executable()
	other := filepath.Join(t.TempDir(), "other-state")
	for name, c := range map[string]struct {
		args []string
		want string
	}{
		"three descriptors":   {[]string{"three", "exec", "--state", state, "--", "true"}, "decline a request with 3 descriptors, want 4"},
		"cwd not a directory": {[]string{"cwdfile", "exec", "--state", state, "--", "true"}, "decline the working directory is not a directory"},
		"not the protocol":    {[]string{"raw"}, "decline not a hand-off request"},
		"not exec":            {[]string{"ok", "version"}, "decline not an exec command line"},
		"another state":       {[]string{"ok", "exec", "--state", other, "--", "true"}, "decline the command names another state directory"},
		"silent":              {[]string{"silent"}, "decline no request within 1s"},
		"another nonce":       {[]string{"badnonce", "exec", "--state", state, "--", "true"}, "decline the request does not carry this warm process's nonce (/proc/PID/environ)"},
		"/dev/stdin":          {[]string{"ok", "exec", "--state", state, "--grants", "/dev/stdin", "--", "true"}, "decline a command line the hand-off does not take (an unknown flag, or a path that may name the process's own files)"},
	} {
		waitWarm(t, state)
		r := runCmd(t, probeCmd(t, exe, append([]string{sock}, c.args...)...))
		if strings.TrimSpace(r.stdout) != c.want {
			t.Errorf("%s: the server answered %q (%s), want %q", name, r.stdout, r.stderr, c.want)
		}
	}
	if _, err := os.Lstat(other); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a declined command made its state directory: %v", err)
	}
	// A well-formed request is served: the probe sees the start and the
	// exit status.
	waitWarm(t, state)
	r := runCmd(t, probeCmd(t, exe, sock, "ok", "exec", "--state", state, "--", "sh", "-c", "exit 5"))
	if r.stdout != "start\nexit 5\n" {
		t.Errorf("a well-formed request: %q (%s)", r.stdout, r.stderr)
	}
}

// TestResidentOtherUID: a process of another uid is not served: the
// caller ignores a server that is not its own (a note, then cold), and
// the server declines a caller of another uid that reaches its socket.
func TestResidentOtherUID(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("needs root: runs processes as another uid (uid %d)", os.Geteuid())
	}
	// Directories uid 65534 can reach (a test's TempDir is 0700).
	base, err := os.MkdirTemp("", "cordon-resident-uid")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	state, bin := filepath.Join(base, "state"), filepath.Join(base, "bin")
	for _, d := range []string{base, state, bin} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	startResident(t, state, 1)
	exe, _ := os.Executable()
	b, err := os.ReadFile(exe)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bin, "cordon"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	// The caller's side: the state directory opened so that nobody can
	// reach the socket.
	for _, p := range []string{state, filepath.Join(state, "pool")} {
		if err := os.Chmod(p, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(filepath.Join(state, "pool", handoff.SocketName), 0o666); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(filepath.Join(bin, "cordon"), "exec", "--state", state, "--", "true")
	cmd.Env = []string{"PATH=/usr/bin:/bin", "HOME=/"}
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	r := runCmd(t, cmd)
	if !strings.Contains(r.stderr, "ignoring the resident exec server") || strings.Contains(r.stderr, servedLine) {
		t.Fatalf("another uid's caller: exit %d, %s", r.code, r.stderr)
	}
	// The server's side: a raw connection as uid 65534.
	pc := probeCmd(t, filepath.Join(bin, "cordon"), filepath.Join(state, "pool", handoff.SocketName), "ok", "exec", "--state", state, "--", "true")
	pc.Dir = "/"
	pc.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	waitWarm(t, state)
	// It cannot read the warm process's nonce (another uid's environ), nor
	// would its uid pass.
	if r := runCmd(t, pc); !strings.HasPrefix(r.stdout, "decline ") || strings.Contains(r.stdout, "start") {
		t.Fatalf("a raw connection of another uid: %q %s", r.stdout, r.stderr)
	}
}

// TestHandoffFlagsMatchExec: the hand-off's list of exec's flags is
// exec's: a flag it does not know would make it give up (cold), and a
// value flag it took for a boolean would let it misread --state.
func TestHandoffFlagsMatchExec(t *testing.T) {
	err := runExec(&env{stdin: nil, stdout: &bytes.Buffer{}, stderr: &bytes.Buffer{}}, []string{"--help"})
	var hr *helpRequest
	if !errors.As(err, &hr) {
		t.Fatalf("exec --help: %v", err)
	}
	var values, bools []string
	hr.fs.VisitAll(func(f *flag.Flag) {
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			bools = append(bools, f.Name)
		} else {
			values = append(values, f.Name)
		}
	})
	if fmt.Sprint(values) != fmt.Sprint(handoff.ValueFlags) || fmt.Sprint(bools) != fmt.Sprint(handoff.BoolFlags) {
		t.Fatalf("exec's flags: values %q, booleans %q; handoff's: %q, %q", values, bools, handoff.ValueFlags, handoff.BoolFlags)
	}
}

// TestHandoffStateDirMatchesExec: the hand-off finds the socket in the
// state directory exec would use.
func TestHandoffStateDirMatchesExec(t *testing.T) {
	for _, c := range []map[string]string{
		{"CORDON_STATE": "/e", "HOME": "/h"},
		{"HOME": "/h", "XDG_STATE_HOME": "/x"},
		{"HOME": "/h", "XDG_STATE_HOME": "relative"},
		{"HOME": "/h"},
	} {
		var env []string
		for _, k := range []string{"CORDON_STATE", "HOME", "XDG_STATE_HOME"} {
			t.Setenv(k, c[k])
			if v, ok := c[k]; ok {
				env = append(env, k+"="+v)
			}
		}
		want, err := resolveStateDir("")
		if err != nil {
			t.Fatal(err)
		}
		got, ok := handoff.StateDir("", env, os.Geteuid())
		if !ok || filepath.Clean(got) != want {
			t.Errorf("%v: handoff %q, exec %q", c, got, want)
		}
	}
}

// TestHandoffClientAgainstFakeServer: the caller's side against a server
// that misbehaves (a socket of the caller's own, so it is trusted): a
// connection that ends before "start" ran nothing, and the command runs
// cold, once; after "start", an end without an exit status, or an answer
// that is not the protocol, is an error (125) and the command is not run
// again.
func TestHandoffClientAgainstFakeServer(t *testing.T) {
	for _, c := range []struct {
		name, answer string
		cold         bool
		msg          string
	}{
		{"ends before start", "", true, "closed the connection before starting the command; starting cold"},
		{"declines", "decline busy\n", true, "declined (busy); starting cold"},
		{"ends after start", "start\n", false, "went away before the command finished"},
		{"not the protocol", "hello\n", false, `answered "hello"`},
		{"exit status past 255", "start\nexit 300\n", false, `answered "exit 300"`},
		{"declines after start", "start\ndecline late\n", false, `answered "decline late"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			state := t.TempDir()
			if err := os.Mkdir(filepath.Join(state, "pool"), 0o700); err != nil {
				t.Fatal(err)
			}
			ln, err := net.Listen("unix", filepath.Join(state, "pool", handoff.SocketName))
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			// The "warm process" it names: this binary, with a nonce.
			exe, _ := os.Executable()
			idle := exec.Command(exe)
			idle.Args[0] = "handoff-idle"
			idle.Env = []string{handoff.NonceEnv + "=" + strings.Repeat("5", handoff.NonceLen)}
			if err := idle.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { _ = idle.Process.Kill(); _ = idle.Wait() }()
			got := make(chan []byte, 1)
			go func() {
				conn, err := ln.Accept()
				if err != nil {
					got <- nil
					return
				}
				defer conn.Close()
				_, _ = conn.Write([]byte("ready " + strconv.Itoa(idle.Process.Pid) + "\n"))
				head := make([]byte, len(handoff.Magic)+4)
				if _, err := io.ReadFull(conn, head); err != nil {
					got <- nil
					return
				}
				l, _ := handoff.Header(head)
				body := make([]byte, l)
				_, _ = io.ReadFull(conn, body)
				got <- body
				_, _ = conn.Write([]byte(c.answer))
			}()
			ws := t.TempDir()
			cmd := residentCmd(t, "exec", "--state", state, "--workspace", ".", "--out", "marker", "--", "sh", "-c", "echo ran > marker")
			cmd.Dir = ws
			r := runCmd(t, cmd)
			if body := <-got; body == nil {
				t.Fatal("the fake server got no request")
			}
			_, err = os.Stat(filepath.Join(ws, "marker"))
			ran := err == nil
			if !strings.Contains(r.stderr, c.msg) {
				t.Fatalf("stderr %q does not say %q", r.stderr, c.msg)
			}
			if c.cold && (r.code != 0 || !ran) {
				t.Fatalf("want a cold run: exit %d, marker %v, %s", r.code, ran, r.stderr)
			}
			if !c.cold && (r.code != 125 || ran) {
				t.Fatalf("want exit 125 and no run: exit %d, marker %v, %s", r.code, ran, r.stderr)
			}
		})
	}
}

// TestResidentSigpipe: a served run whose stdout reader goes away ends
// as a cold one does: the caller dies of SIGPIPE at once (not at the
// wall-clock limit), and its sandbox with it.
func TestResidentSigpipe(t *testing.T) {
	state := t.TempDir()
	startResident(t, state, 1)
	journal := filepath.Join(t.TempDir(), "j.jsonl")
	for _, served := range []bool{true, false} {
		waitWarm(t, state)
		cmd := residentCmd(t, "exec", "--state", state, "--journal", journal, "--", "sh", "-c", "while :; do echo y; done")
		if !served {
			cmd.Env = append(cmd.Env, "CORDON_RESIDENT=off")
		}
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(out, make([]byte, 2)); err != nil {
			t.Fatal(err)
		}
		out.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("served %v: the caller outlived its stdout's reader", served)
		}
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGPIPE {
			t.Fatalf("served %v: the caller ended %v, not by SIGPIPE", served, cmd.ProcessState)
		}
		waitFor(t, 10*time.Second, "the program outlived its caller", func() bool {
			return len(findProc("sh\x00-c\x00while :; do echo y; done")) == 0
		})
	}
	j, err := os.ReadFile(journal)
	if err != nil || !bytes.Contains(j, []byte(`"type":"pool.claim"`)) {
		t.Fatalf("the first run was not served by a warm slot: %v\n%s", err, j)
	}
}

// TestResidentAnswerAfterRunEnds: a served run's caller returns only when
// nothing of the run is left and its evidence is complete: the program
// left a loop writing to stdout and a sleep in the background, yet when
// the caller exits they are gone, the journal already ends with the
// command's outcome and verifies, the warm process holds none of the
// caller's streams (its stdout's reader sees the end), and the output
// does not change afterwards.
func TestResidentAnswerAfterRunEnds(t *testing.T) {
	state := t.TempDir()
	startResident(t, state, 1)
	dir := t.TempDir()
	journal := filepath.Join(dir, "j.jsonl")
	const script = "while :; do echo tick-5813; done & sleep 60.5813 & echo started; sleep 0.1; exit 3"
	cmd := residentCmd(t, "exec", "--stats", "--state", state, "--journal", journal, "--", "sh", "-c", script)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	errFile, err := os.Create(filepath.Join(dir, "stderr"))
	if err != nil {
		t.Fatal(err)
	}
	defer errFile.Close()
	cmd.Stdout, cmd.Stderr = w, errFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w.Close()
	var out bytes.Buffer
	eof := make(chan struct{})
	go func() {
		defer close(eof)
		_, _ = io.Copy(&out, r)
	}()
	err = cmd.Wait()
	var ee *exec.ExitError
	code := 0
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	// At once, while the warm process may still be tearing the sandbox
	// down: none of the caller's streams is open in it.
	stderr, _ := os.ReadFile(errFile.Name())
	var warm int
	if i := strings.Index(string(stderr), "(pid "); i >= 0 {
		warm, _ = strconv.Atoi(strings.SplitN(string(stderr[i+5:]), ")", 2)[0])
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(int(r.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	pipe := "pipe:[" + strconv.FormatUint(st.Ino, 10) + "]"
	if fds, err := os.ReadDir("/proc/" + strconv.Itoa(warm) + "/fd"); err == nil {
		for _, fd := range fds {
			if l, _ := os.Readlink("/proc/" + strconv.Itoa(warm) + "/fd/" + fd.Name()); l == pipe {
				t.Fatalf("the warm process (pid %d) still holds the caller's stdout (fd %s) after answering", warm, fd.Name())
			}
		}
	}
	if p := findProc("sh\x00-c\x00" + script); len(p) > 0 {
		t.Fatalf("the program's shell or its background loop outlived the caller: %v", p)
	}
	if p := findProc("sleep\x0060.5813"); len(p) > 0 {
		t.Fatalf("the program's background sleep outlived the caller: %v", p)
	}
	j, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	if code != 3 || warm == 0 || !strings.Contains(string(stderr), "cordon: pool: slot") {
		t.Fatalf("exit %d (want 3), not served by a warm slot? %s", code, stderr)
	}
	snapshot := filepath.Join(dir, "at-exit.jsonl")
	if err := os.WriteFile(snapshot, j, 0o600); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(j, []byte(`"type":"command"`)) {
		t.Fatalf("the journal lacks the command's outcome when the caller returned:\n%s", j)
	}
	if r := runCmd(t, residentCmd(t, "verify", "journal", snapshot)); r.code != 0 {
		t.Fatalf("verify journal (as it was when the caller returned): %s", r.stderr)
	}
	select {
	case <-eof:
	case <-time.After(10 * time.Second):
		t.Fatal("the caller's stdout did not end after it exited")
	}
	got := out.String()
	if !strings.Contains(got, "started\n") || !strings.Contains(got, "tick-5813\n") {
		t.Fatalf("stdout: %.200q", got)
	}
	time.Sleep(200 * time.Millisecond)
	if j2, _ := os.ReadFile(journal); !bytes.Equal(j, j2) {
		t.Fatalf("the journal changed after the caller returned:\n%s\nthen\n%s", j, j2)
	}
}

// TestServedGrantsOnlyForSameBytes: the grant set a warm process parsed
// before its caller came serves an exec only when the exec's grant set
// is byte for byte the one parsed, and only once.
func TestServedGrantsOnlyForSameBytes(t *testing.T) {
	b := append([]byte(nil), defaultExecGrants...)
	gs, err := grant.Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	other := bytes.Replace(b, []byte(`"code"`), []byte(` "code"`), 1) // the same set, other bytes
	if bytes.Equal(other, b) {
		t.Fatal("the test's other bytes are the same")
	}
	s := &servedExec{parsedBytes: b, parsed: gs}
	if got := s.grants(other); got != nil {
		t.Fatal("a grant set of other bytes was served the one parsed ahead")
	}
	if got := s.grants(b); got != nil {
		t.Fatal("the grant set parsed ahead was served after another had asked")
	}
	s = &servedExec{parsedBytes: b, parsed: gs}
	if got := s.grants(b); got != gs {
		t.Fatalf("the same bytes: got %p, want the set parsed ahead %p", got, gs)
	}
	if got := s.grants(b); got != nil {
		t.Fatal("the grant set parsed ahead was served twice")
	}
}

// TestResidentProgramSignalsAsCold: the program of a served run starts
// with the signal dispositions and mask of a cold run's program (the
// warm process started its signal handling before the caller came).
func TestResidentProgramSignalsAsCold(t *testing.T) {
	state := t.TempDir()
	startResident(t, state, 1)
	sig := func(served bool) string {
		t.Helper()
		waitWarm(t, state)
		cmd := residentCmd(t, "exec", "--stats", "--state", state, "--", "cat", "/proc/self/status")
		if !served {
			cmd.Env = append(cmd.Env, "CORDON_RESIDENT=off")
		}
		r := runCmd(t, cmd)
		if r.code != 0 || strings.Contains(r.stderr, servedLine) != served {
			t.Fatalf("served %v: exit %d, %s", served, r.code, r.stderr)
		}
		var lines []string
		for _, l := range strings.Split(r.stdout, "\n") {
			if strings.HasPrefix(l, "SigIgn:") || strings.HasPrefix(l, "SigBlk:") || strings.HasPrefix(l, "SigCgt:") {
				lines = append(lines, l)
			}
		}
		if len(lines) != 3 {
			t.Fatalf("served %v: no signal lines in %q", served, r.stdout)
		}
		return strings.Join(lines, "; ")
	}
	if served, cold := sig(true), sig(false); served != cold {
		t.Fatalf("the served program's signals (%s) differ from a cold one's (%s)", served, cold)
	}
}
