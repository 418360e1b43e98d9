package main

// Red-team tests of the resident pool (docs/security/redteam-pool.md).
// Each asserts the secure behaviour: a test that fails here is an attack
// that succeeded.

import (
	"bufio"
	"bytes"
	"encoding/json"
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

	"github.com/cordon-dev/cordon/sandbox/pool"
)

// rtServe starts 'cordon pool serve' as its own process (the cordon
// binary: this test binary through testscript's PATH) and waits for n
// ready slots. The process is killed when the test ends.
func rtServe(t *testing.T, state string, n int) (*exec.Cmd, pool.Status) {
	t.Helper()
	cmd := exec.Command("cordon", "pool", "serve", "--state", state, "--size", "2")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-exited
	})
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := exec.Command("cordon", "pool", "status", "--state", state).Output()
		if err == nil {
			var st pool.Status
			if err := json.Unmarshal(out, &st); err != nil {
				t.Fatal(err)
			}
			if st.Ready >= n {
				return cmd, st
			}
		}
		select {
		case <-exited:
			t.Fatalf("pool serve exited: %s", stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %d ready slots after 30 s: %s", n, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// exitedWithin reports whether cmd's process is gone (or a zombie)
// within d.
func exitedWithin(pid int, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for time.Now().Before(deadline) {
		st, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return true
		}
		if i := bytes.LastIndexByte(st, ')'); i > 0 && i+2 < len(st) && (st[i+2] == 'Z' || st[i+2] == 'X') {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

// TestRedteamPoolStopWithIdleConnection: a peer that connects and sends
// nothing must not keep the pool server alive after 'cordon pool stop'
// (or SIGTERM): the server reads a request with no deadline and waits
// for every connection before it exits.
func TestRedteamPoolStopWithIdleConnection(t *testing.T) {
	state := t.TempDir()
	cmd, _ := rtServe(t, state, 1)
	idle, err := net.Dial("unix", poolSocket(state))
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	cordonCmd(t, "pool", "stop", "--state", state)
	if !exitedWithin(cmd.Process.Pid, 10*time.Second) {
		t.Errorf("FINDING: 'cordon pool serve' is still running 10 s after 'cordon pool stop', held by a connection that sent nothing")
	}
}

// TestRedteamPoolKill9Reaped: a pool server killed with SIGKILL leaves
// its parked slots' cgroups and run records behind (their inits die with
// it); 'cordon reap' must find and remove them all.
func TestRedteamPoolKill9Reaped(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("needs root: a rootless slot has no cgroup to leave behind (uid %d)", os.Geteuid())
	}
	state := filepath.Join(t.TempDir(), "s")
	cmd, _ := rtServe(t, state, 2)
	before := records(t, state)
	if len(before) < 2 {
		t.Fatalf("a pool of 2 ready slots has %d run records", len(before))
	}
	var cgs []string
	for _, r := range before {
		cgs = append(cgs, r.Cgroups...)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	if !exitedWithin(cmd.Process.Pid, 10*time.Second) {
		t.Fatal("the killed server is still there")
	}
	time.Sleep(200 * time.Millisecond) // the inits die with it (PDEATHSIG)
	out := cordonCmd(t, "reap", "--state", state)
	if rs := records(t, state); len(rs) != 0 {
		t.Errorf("FINDING: after kill -9 of the pool server and 'cordon reap', %d run records remain: %+v\n%s", len(rs), rs, out)
	}
	if !noneExist(cgs) {
		t.Errorf("FINDING: after kill -9 of the pool server and 'cordon reap', cgroups remain: %v\n%s", cgs, out)
	}
}

// rtClaim sends a raw claim (three /dev/null streams) for the pool's key
// and returns the connection and a reader of its replies.
func rtClaim(t *testing.T, state string, key pool.Key, argv []string) (*net.UnixConn, *json.Decoder) {
	t.Helper()
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: poolSocket(state), Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	var fds []int
	for range 3 {
		f, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		fds = append(fds, int(f.Fd()))
	}
	b, _ := json.Marshal(poolRequest{Op: "claim", Key: key, Launch: &poolLaunch{Argv: argv, Workspace: t.TempDir()}})
	if _, _, err := c.WriteMsgUnix(append(b, '\n'), unix.UnixRights(fds...), nil); err != nil {
		t.Fatal(err)
	}
	return c, json.NewDecoder(bufio.NewReader(c))
}

// procWith reports whether a process whose command line contains s runs.
func procWith(s string) bool {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && bytes.Contains(b, []byte(s)) {
			return true
		}
	}
	return false
}

// TestRedteamPoolClaimerDisconnectsMidRun: a claimer that goes away while
// its program runs ends the run: the program does not go on running
// unattended in the server's slot.
func TestRedteamPoolClaimerDisconnectsMidRun(t *testing.T) {
	state := t.TempDir()
	_, st := rtServe(t, state, 1)
	marker := "37.4242"
	c, dec := rtClaim(t, state, st.Key, []string{"sleep", marker})
	enc := json.NewEncoder(c)
	deadline := time.Now().Add(20 * time.Second)
	for !procWith("sleep\x00" + marker) {
		if time.Now().After(deadline) {
			t.Fatal("the claimed program never started")
		}
		c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
		var r poolReply
		if err := dec.Decode(&r); err == nil {
			if r.Error != "" {
				t.Fatalf("claim refused: %s", r.Error)
			}
			if r.Decision != nil || r.Mounts != nil {
				enc.Encode(poolAck{})
			}
		} else if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Fatal(err)
		} else {
			dec = json.NewDecoder(bufio.NewReader(c)) // a timed-out decoder is spent
		}
	}
	c.Close()
	deadline = time.Now().Add(10 * time.Second)
	for procWith("sleep\x00" + marker) {
		if time.Now().After(deadline) {
			t.Fatal("FINDING: the program of a claimer that went away is still running 10 s later")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The pool still serves.
	var out bytes.Buffer
	if code := run([]string{"exec", "--pool", "--state", state, "--", "echo", "next"}, nil, &out, &bytes.Buffer{}); code != 0 || out.String() != "next\n" {
		t.Fatalf("the next claim: exit %d, %q", code, out.String())
	}
}

// TestRedteamPoolHostileRequests: malformed, oversized, fd-less and
// key-less requests are refused, take no slot, and leave the books and
// the server as they were.
func TestRedteamPoolHostileRequests(t *testing.T) {
	state := t.TempDir()
	_, st := rtServe(t, state, 2)
	send := func(b []byte) string {
		c, err := net.Dial("unix", poolSocket(state))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(15 * time.Second))
		go func() { c.Write(b) }()
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line
	}
	for name, req := range map[string][]byte{
		"garbage":         []byte("{\"op\":\n"),
		"unknown field":   []byte(`{"op":"status","x":1}` + "\n"),
		"unknown op":      []byte(`{"op":"evict"}` + "\n"),
		"claim no fds":    []byte(`{"op":"claim","key":{"env":"` + st.Key.Env + `","policy":"` + st.Key.Policy + `"},"launch":{"argv":["true"]}}` + "\n"),
		"claim no launch": []byte(`{"op":"claim","key":{"env":"` + st.Key.Env + `","policy":"` + st.Key.Policy + `"}}` + "\n"),
		"oversized":       append(append([]byte(`{"op":"status","pad":"`), bytes.Repeat([]byte("A"), 2<<20)...), []byte("\"}\n")...),
	} {
		if got := send(req); !strings.Contains(got, `"error"`) {
			t.Errorf("%s: %q, want an error", name, got)
		}
	}
	// A claim under another key and a wall clock beyond the pool's: refused.
	c, dec := rtClaim(t, state, pool.Key{Env: st.Key.Env, Policy: strings.ToUpper(st.Key.Policy)}, []string{"true"})
	var r poolReply
	if err := dec.Decode(&r); err != nil || !r.Mismatch {
		t.Errorf("a claim under a case-changed policy: %+v, %v", r, err)
	}
	c.Close()
	out, err := exec.Command("cordon", "pool", "status", "--state", state).Output()
	if err != nil {
		t.Fatal(err)
	}
	var after pool.Status
	if err := json.Unmarshal(out, &after); err != nil {
		t.Fatal(err)
	}
	if after.Totals.Claims != 0 || after.Totals.Evicted != 0 || !after.Totals.Balanced() {
		t.Errorf("hostile requests changed the books: %s", out)
	}
}

// TestRedteamPoolDirPlanted: a pool directory planted before the server
// starts (open to others, or a symbolic link to another directory) is
// refused, and no socket is made through it.
func TestRedteamPoolDirPlanted(t *testing.T) {
	for name, plant := range map[string]func(dir, elsewhere string) error{
		"mode 0755": func(dir, _ string) error { return os.Mkdir(dir, 0o755) },
		"symlink":   func(dir, elsewhere string) error { return os.Symlink(elsewhere, dir) },
	} {
		state, elsewhere := t.TempDir(), t.TempDir()
		if err := os.Chmod(elsewhere, 0o700); err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(poolSocket(state))
		if err := plant(dir, elsewhere); err != nil {
			t.Fatal(err)
		}
		var errb bytes.Buffer
		done := make(chan int, 1)
		go func() {
			done <- run([]string{"pool", "serve", "--state", state, "--size", "1"}, nil, &bytes.Buffer{}, &errb)
		}()
		select {
		case code := <-done:
			if code != 125 {
				t.Errorf("%s: exit %d: %s", name, code, errb.String())
			}
		case <-time.After(10 * time.Second):
			run([]string{"pool", "stop", "--state", state}, nil, &bytes.Buffer{}, &bytes.Buffer{})
			<-done
			t.Errorf("%s: the server served through a planted pool directory", name)
		}
		if _, err := os.Lstat(filepath.Join(elsewhere, "pool.sock")); err == nil {
			t.Errorf("%s: a socket was made through the planted link", name)
		}
	}
}

// TestRedteamPoolClientChecksServer: root (or any claimer) that claims
// from a pool served by another, unprivileged uid hands that uid its
// standard streams (SCM_RIGHTS: a root terminal, a root-owned output
// file) and believes its answers (decision, exit status). The claimer
// must check the server's credentials as the server checks the
// claimer's: refuse a server that is neither itself nor root before it
// sends anything.
func TestRedteamPoolClientChecksServer(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("needs root: it serves as another uid (uid %d)", os.Geteuid())
	}
	state := t.TempDir()
	for _, d := range []string{filepath.Dir(state), state} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	dir := filepath.Dir(poolSocket(state))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	// A fake pool of uid 65534: it reports how many descriptors the
	// claimer sent, and answers with a forged result.
	srv := exec.Command("/usr/bin/python3", "-c", `import socket,sys,array,os
s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); os.chmod(sys.argv[1],0o666); s.listen(1)
print("ready", flush=True)
c,_=s.accept()
msg,anc,_,_=c.recvmsg(1<<20, socket.CMSG_SPACE(16))
n=0
for lvl,typ,data in anc:
    if typ==socket.SCM_RIGHTS: n+=len(data)//4
print("fds", n, flush=True)
c.sendall(b'{"result":{"ExitCode":0}}\n')
c.close()`, poolSocket(state))
	srv.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	stdout, err := srv.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	r := bufio.NewReader(stdout)
	if l, err := r.ReadString('\n'); err != nil || l != "ready\n" {
		t.Fatalf("fake server: %q, %v", l, err)
	}
	var errb bytes.Buffer
	code := run([]string{"exec", "--pool", "--state", state, "--", "false"}, nil, &bytes.Buffer{}, &errb)
	srv.Process.Signal(syscall.SIGTERM)
	got, _ := r.ReadString('\n')
	if strings.HasPrefix(got, "fds ") && got != "fds 0\n" {
		t.Errorf("FINDING: the claimer sent its streams to a pool of uid 65534 (%s) and took its answer (exit %d for 'false'): %s", strings.TrimSpace(got), code, errb.String())
	}
}
