package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// requireRootFreeze skips where the run can have no cgroup to freeze: the
// rootless CI pass has no delegated cgroup.
func requireRootFreeze(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root: freezing a run needs its cgroup (uid %d)", os.Geteuid())
	}
}

// counting is a program that counts into /work/c in the background until
// a line arrives on its stdin.
const counting = `i=0; (while :; do i=$((i+1)); echo $i >> /work/c; done) & read _; kill $!; wait; echo done`

type frozenExec struct {
	t      *testing.T
	state  string
	dir    string
	record string
	stdin  *io.PipeWriter
	stdout syncBuffer
	stderr syncBuffer
	code   chan int
	id     string
}

// startRecorded starts 'cordon exec --record' of counting in this
// process and waits for its run id.
func startRecorded(t *testing.T, extra ...string) *frozenExec {
	t.Helper()
	fx := &frozenExec{t: t, state: t.TempDir(), dir: t.TempDir(), code: make(chan int, 1)}
	fx.record = filepath.Join(fx.dir, "run.record")
	if code := run([]string{"keygen", "--out", filepath.Join(fx.dir, "key.pem")}, nil, io.Discard, io.Discard); code != 0 {
		t.Fatal("keygen failed")
	}
	r, w := io.Pipe()
	fx.stdin = w
	args := append([]string{"exec", "--state", fx.state, "--record", fx.record, "--key", filepath.Join(fx.dir, "key.pem")}, extra...)
	args = append(args, "--", "sh", "-c", counting)
	go func() { fx.code <- run(args, r, &fx.stdout, &fx.stderr) }()
	t.Cleanup(func() {
		w.Close()
		fx.verb("thaw") // a test that failed with the run frozen
		select {
		case <-fx.code:
		case <-time.After(20 * time.Second):
			t.Error("exec did not end")
		}
	})
	re := regexp.MustCompile(`run ([0-9a-f]{16}): freeze it`)
	deadline := time.Now().Add(20 * time.Second)
	for {
		if m := re.FindStringSubmatch(fx.stderr.String()); m != nil {
			fx.id = m[1]
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no run id: %s", fx.stderr.String())
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Wait for the program to count.
	if _, err := os.Stat(filepath.Join(fx.state, "exec", fx.id+".sock")); err != nil {
		t.Fatal(err)
	}
	return fx
}

// freezeStarted freezes the run once its program has started.
func (fx *frozenExec) freezeStarted() freezeReply {
	deadline := time.Now().Add(20 * time.Second)
	for {
		rep, code, errs := fx.verb("freeze")
		if code == 0 {
			return rep
		}
		if !strings.Contains(errs, "no running program") || time.Now().After(deadline) {
			fx.t.Fatalf("freeze: exit %d: %s (exec: %s)", code, errs, fx.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freezeCounting freezes the run once its program has counted.
func (fx *frozenExec) freezeCounting() freezeReply {
	for range 100 {
		fr := fx.freezeStarted()
		if _, err := os.Stat("/proc/" + strconv.Itoa(fr.PIDs[len(fr.PIDs)-1]) + "/root/work/c"); err == nil {
			return fr
		}
		if _, code, errs := fx.verb("thaw"); code != 0 {
			fx.t.Fatalf("thaw: %s", errs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	fx.t.Fatal("the program never counted")
	return freezeReply{}
}

// verb runs 'cordon freeze|thaw --json' and decodes its answer.
func (fx *frozenExec) verb(op string) (freezeReply, int, string) {
	var out, errb bytes.Buffer
	code := run([]string{op, "--state", fx.state, "--json", fx.id}, nil, &out, &errb)
	var rep freezeReply
	if code == 0 {
		if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
			fx.t.Fatalf("%s: %v: %s", op, err, out.String())
		}
	}
	return rep, code, errb.String()
}

// counter reads how far the program has counted (the size of the file
// it appends to) through a frozen process's root.
func counter(t *testing.T, pid int) int64 {
	t.Helper()
	fi, err := os.Stat("/proc/" + strconv.Itoa(pid) + "/root/work/c")
	if err != nil {
		t.Fatalf("no counter readable through pid %d: %v", pid, err)
	}
	return fi.Size()
}

func recordKinds(t *testing.T, file string) []string {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var s struct {
			Kind     string `json:"kind"`
			IdleUJ   int64  `json:"idle_uj"`
			EnergyUJ int64  `json:"energy_uj"`
		}
		if err := json.Unmarshal([]byte(line), &s); err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, s.Kind)
	}
	return kinds
}

// TestExecFreezeThaw: a recorded run counting in a loop is frozen (its
// counter, read from outside, stops), thawed (it counts again), and exits
// 0; its record is execute, suspend, resume, execute, close, with idle
// energy, and verifies offline against its signed head.
func TestExecFreezeThaw(t *testing.T) {
	requireRootFreeze(t)
	fx := startRecorded(t)
	fr := fx.freezeCounting()
	if fr.State != "frozen" || len(fr.PIDs) == 0 || fr.Snapshot == "" {
		t.Fatalf("freeze answered %+v", fr)
	}
	pid := fr.PIDs[len(fr.PIDs)-1]
	a := counter(t, pid)
	time.Sleep(300 * time.Millisecond)
	if b := counter(t, pid); b != a {
		t.Errorf("the counter moved from %d to %d while frozen", a, b)
	}
	if _, code, errs := fx.verb("freeze"); code == 0 || !strings.Contains(errs, "frozen already") {
		t.Errorf("a second freeze: exit %d, %s; want refused", code, errs)
	}
	th, code, errs := fx.verb("thaw")
	if code != 0 {
		t.Fatalf("thaw: exit %d: %s", code, errs)
	}
	if th.IdleUJ <= 0 || th.ParkedMS < 300 || th.Snapshot != fr.Snapshot {
		t.Errorf("thaw answered %+v; want idle energy, ≥ 300 ms parked and the freeze's snapshot %s", th, fr.Snapshot)
	}
	time.Sleep(300 * time.Millisecond)
	if b := counter(t, pid); b <= a {
		t.Errorf("the counter does not advance after the thaw (%d, then %d)", a, b)
	}
	fx.stdin.Write([]byte("\n"))
	fx.stdin.Close() // os/exec copies a stdin that is not a file until its EOF
	select {
	case code := <-fx.code:
		fx.code <- code
		if code != 0 || !strings.Contains(fx.stdout.String(), "done") {
			t.Fatalf("exec: exit %d, stdout %q, stderr %s", code, fx.stdout.String(), fx.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("exec did not end")
	}
	// freezeCounting may have frozen and thawed before the program counted.
	if got := strings.Join(recordKinds(t, fx.record), ","); !regexp.MustCompile(`^execute(,suspend,resume,execute)+,close$`).MatchString(got) {
		t.Errorf("record kinds %s, want execute,suspend,resume,execute,close", got)
	}
	pub := filepath.Join(fx.dir, "pub.pem")
	var pubOut bytes.Buffer
	if code := run([]string{"pubkey", filepath.Join(fx.dir, "key.pem")}, nil, &pubOut, io.Discard); code != 0 {
		t.Fatal("pubkey failed")
	}
	if err := os.WriteFile(pub, pubOut.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := run([]string{"verify", "record", "--json", "--signed-head", fx.record + ".head", "--pubkey", pub, fx.record}, nil, &out, &errb); code != 0 {
		t.Fatalf("verify record: %s %s", out.String(), errb.String())
	}
	var v struct {
		Valid    bool   `json:"valid"`
		Anchored bool   `json:"anchored"`
		State    string `json:"state"`
		IdleUJ   int64  `json:"idle_uj"`
		EnergyUJ int64  `json:"energy_uj"`
		Parks    int    `json:"parks"`
	}
	if err := json.Unmarshal(out.Bytes(), &v); err != nil {
		t.Fatal(err)
	}
	if !v.Valid || !v.Anchored || v.State != "closed" || v.IdleUJ < th.IdleUJ || v.EnergyUJ <= 0 || v.Parks < 1 {
		t.Errorf("verify record: %s", out.String())
	}
	// The socket is gone with the run: a freeze now is refused.
	if _, code, errs := fx.verb("freeze"); code != 125 || !strings.Contains(errs, "no running 'cordon exec --record' run") {
		t.Errorf("freeze after the run: exit %d, %s", code, errs)
	}
}

// TestExecThawRefusedOutputChanged: an output changed while the run was
// frozen: the thaw is refused, the run killed, and the record closes
// parked (execute, suspend, close) and still verifies.
func TestExecThawRefusedOutputChanged(t *testing.T) {
	requireRootFreeze(t)
	fx := startRecorded(t)
	fr := fx.freezeCounting()
	pid := fr.PIDs[len(fr.PIDs)-1]
	if err := os.WriteFile("/proc/"+strconv.Itoa(pid)+"/root/work/c", []byte("forged\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, code, errs := fx.verb("thaw"); code != 125 || !strings.Contains(errs, "outputs changed while it was frozen") {
		t.Fatalf("thaw after an output changed: exit %d, %s; want refused", code, errs)
	}
	fx.stdin.Close() // os/exec copies a stdin that is not a file until its EOF
	select {
	case code := <-fx.code:
		fx.code <- code
		if code != 125 || !strings.Contains(fx.stderr.String(), "refused") {
			t.Errorf("exec: exit %d: %s", code, fx.stderr.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatal("exec was not killed")
	}
	if got := strings.Join(recordKinds(t, fx.record), ","); !regexp.MustCompile(`^execute(,suspend,resume,execute)*,suspend,close$`).MatchString(got) {
		t.Errorf("record kinds %s", got)
	}
	var out bytes.Buffer
	if code := run([]string{"verify", "record", "--json", fx.record}, nil, &out, io.Discard); code != 0 || !strings.Contains(out.String(), `"state":"closed"`) {
		t.Errorf("verify record: exit %d: %s", code, out.String())
	}
}

// TestFreezeRefusals: an unknown run, a malformed id, and a peer of
// another uid are refused; the run is not frozen by the last.
func TestFreezeRefusals(t *testing.T) {
	requireRootFreeze(t)
	var errb bytes.Buffer
	if code := run([]string{"freeze", "--state", t.TempDir(), "0123456789abcdef"}, nil, io.Discard, &errb); code != 125 || !strings.Contains(errb.String(), "no running 'cordon exec --record' run 0123456789abcdef") {
		t.Errorf("freeze of an unknown run: exit %d, %s", code, errb.String())
	}
	errb.Reset()
	if code := run([]string{"thaw", "../../etc"}, nil, io.Discard, &errb); code != 2 || !strings.Contains(errb.String(), "not a run id") {
		t.Errorf("thaw of a malformed id: exit %d, %s", code, errb.String())
	}

	// A pooled run runs in the pool's process: it cannot be recorded or
	// frozen by this one.
	errb.Reset()
	if code := run([]string{"exec", "--pool", "--record", filepath.Join(t.TempDir(), "r"), "--", "true"}, nil, io.Discard, &errb); code != 2 || !strings.Contains(errb.String(), "--record with --pool") {
		t.Errorf("exec --record --pool: exit %d, %s; want a usage error", code, errb.String())
	}

	fx := startRecorded(t)
	// Open the way for uid 65534, as a careless operator might: the
	// server still checks the peer.
	for _, d := range []string{filepath.Dir(fx.state), fx.state, filepath.Join(fx.state, "exec")} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sock := execSocket(fx.state, fx.id)
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	cl := exec.Command("/usr/bin/python3", "-c", `import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
try: s.sendall(b'{"op":"freeze"}\n')
except BrokenPipeError: pass  # the server answers a refused peer at once
print(s.makefile().readline(), end="")`, sock)
	cl.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	got, err := cl.CombinedOutput()
	if err != nil || !strings.Contains(string(got), "refused: uid 65534 may not freeze or thaw run "+fx.id) {
		t.Errorf("freeze by uid 65534: %q, %v; want refused", got, err)
	}
	// Not frozen: a thaw says so, and a freeze by root works.
	if _, code, errs := fx.verb("thaw"); code != 125 || !strings.Contains(errs, "not frozen") {
		t.Errorf("thaw after the refused freeze: exit %d, %s", code, errs)
	}
	// A socket of another uid is not trusted by the verbs.
	if err := os.Chown(sock, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	if _, code, errs := fx.verb("freeze"); code != 125 || !strings.Contains(errs, "untrusted exec control socket") {
		t.Errorf("freeze through a socket of uid 65534: exit %d, %s", code, errs)
	}
}

// TestExecRecordUnfrozen: a recorded run never frozen is execute, close,
// naming its receipt, and verifies against its signed head; a program
// that never started leaves no record; --key needs --receipt or --record;
// an existing record is never written over.
func TestExecRecordUnfrozen(t *testing.T) {
	dir, state := t.TempDir(), t.TempDir()
	key := filepath.Join(dir, "key.pem")
	if code := run([]string{"keygen", "--out", key}, nil, io.Discard, io.Discard); code != 0 {
		t.Fatal("keygen")
	}
	rec, rcpt := filepath.Join(dir, "r.record"), filepath.Join(dir, "r.jcr")
	var errb bytes.Buffer
	if code := run([]string{"exec", "--state", state, "--record", rec, "--receipt", rcpt, "--key", key, "--", "true"}, nil, io.Discard, &errb); code != 0 {
		t.Fatalf("exec --record: exit %d: %s", code, errb.String())
	}
	if got := strings.Join(recordKinds(t, rec), ","); got != "execute,close" {
		t.Errorf("record kinds %s, want execute,close", got)
	}
	b, err := os.ReadFile(rec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"receipt":"b3:`) {
		t.Errorf("the execute names no receipt: %s", b)
	}
	var pub bytes.Buffer
	run([]string{"pubkey", key}, nil, &pub, io.Discard)
	pubFile := filepath.Join(dir, "pub.pem")
	if err := os.WriteFile(pubFile, pub.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if code := run([]string{"verify", "record", "--signed-head", rec + ".head", "--pubkey", pubFile, rec}, nil, &out, &errb); code != 0 || !strings.Contains(out.String(), "state=closed") {
		t.Errorf("verify record: exit %d: %s %s", code, out.String(), errb.String())
	}
	// Written over: refused.
	errb.Reset()
	if code := run([]string{"exec", "--state", state, "--record", rec, "--", "true"}, nil, io.Discard, &errb); code != 125 || !strings.Contains(errb.String(), "never written over") {
		t.Errorf("exec --record over a record: exit %d: %s", code, errb.String())
	}
	// Never started: no record.
	gone := filepath.Join(dir, "gone.record")
	if code := run([]string{"exec", "--state", state, "--record", gone, "--", "no-such-program-xyz"}, nil, io.Discard, io.Discard); code == 0 {
		t.Error("a missing program ran")
	}
	if _, err := os.Stat(gone); !os.IsNotExist(err) {
		t.Errorf("a program that never started left a record: %v", err)
	}
	errb.Reset()
	if code := run([]string{"exec", "--key", key, "--", "true"}, nil, io.Discard, &errb); code != 2 || !strings.Contains(errb.String(), "--key given without --receipt or --record") {
		t.Errorf("exec --key alone: exit %d: %s", code, errb.String())
	}
}
