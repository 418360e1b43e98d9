package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/sandbox/pool"
)

// startPool runs 'cordon pool serve' in this process until the test ends
// and waits until it has a ready slot.
func startPool(t *testing.T, state string, args ...string) {
	t.Helper()
	var stderr bytes.Buffer
	done := make(chan int, 1)
	go func() {
		done <- run(append([]string{"pool", "serve", "--state", state, "--size", "1"}, args...), nil, &bytes.Buffer{}, &stderr)
	}()
	t.Cleanup(func() {
		run([]string{"pool", "stop", "--state", state}, nil, &bytes.Buffer{}, &bytes.Buffer{})
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("pool serve did not stop")
		}
	})
	deadline := time.Now().Add(20 * time.Second)
	for {
		var out bytes.Buffer
		if run([]string{"pool", "status", "--state", state}, nil, &out, &bytes.Buffer{}) == 0 {
			var st pool.Status
			if err := json.Unmarshal(out.Bytes(), &st); err != nil {
				t.Fatal(err)
			}
			if st.Ready >= 1 {
				return
			}
		}
		select {
		case code := <-done:
			t.Fatalf("pool serve exited %d: %s", code, stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no ready slot after 20 s: %s", stderr.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestExecPool: 'cordon exec --pool' runs the command in a slot of the
// resident pool, with its output, exit status and journal: the journal
// holds the pool.claim entry with a non-zero idle charge before the
// command's entry. Without a pool, --pool is refused unless
// --pool-fallback-cold asks for a cold start; a grant set other than the
// pool's is refused; status and stop report balanced books.
func TestExecPool(t *testing.T) {
	state := t.TempDir()
	startPool(t, state)
	dir := t.TempDir()
	journal := filepath.Join(dir, "j.jsonl")
	var out, errb bytes.Buffer
	code := run([]string{"exec", "--pool", "--state", state, "--journal", journal, "--stats", "--", "sh", "-c", "echo warm; exit 4"}, nil, &out, &errb)
	if code != 4 || out.String() != "warm\n" {
		t.Fatalf("exec --pool: exit %d, stdout %q, stderr %s", code, out.String(), errb.String())
	}
	if !strings.Contains(errb.String(), "cordon: pool: slot ") || !strings.Contains(errb.String(), "(Estimator,") {
		t.Fatalf("--stats does not show the idle charge: %s", errb.String())
	}
	j, err := os.ReadFile(journal)
	if err != nil {
		t.Fatal(err)
	}
	var types []string
	var claim struct {
		Body struct {
			IdleUJ         int64  `json:"idle_uj"`
			IdleProvenance string `json:"idle_provenance"`
		} `json:"body"`
	}
	for _, line := range strings.Split(strings.TrimSpace(string(j)), "\n") {
		var e struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		types = append(types, e.Type)
		if e.Type == "pool.claim" {
			if err := json.Unmarshal([]byte(line), &claim); err != nil {
				t.Fatal(err)
			}
		}
	}
	ci, cc := -1, -1
	for i, ty := range types {
		switch ty {
		case "pool.claim":
			ci = i
		case "command":
			cc = i
		}
	}
	if ci < 0 || cc < ci || claim.Body.IdleUJ <= 0 || claim.Body.IdleProvenance != "Estimator" {
		t.Fatalf("journal entries %v, claim %+v", types, claim.Body)
	}
	if code := run([]string{"verify", "journal", journal}, nil, &bytes.Buffer{}, &errb); code != 0 {
		t.Fatalf("verify journal: %s", errb.String())
	}

	// Another grant set: another policy, refused.
	gf := filepath.Join(dir, "g.json")
	if err := os.WriteFile(gf, []byte(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"true"}]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	if code := run([]string{"exec", "--pool", "--state", state, "--grants", gf, "--", "true"}, nil, &bytes.Buffer{}, &errb); code != 125 || !strings.Contains(errb.String(), "policy") {
		t.Fatalf("a claim under another grant set: exit %d, %s", code, errb.String())
	}

	// No pool: refused, or cold when asked.
	empty := t.TempDir()
	errb.Reset()
	if code := run([]string{"exec", "--pool", "--state", empty, "--", "true"}, nil, &bytes.Buffer{}, &errb); code != 125 || !strings.Contains(errb.String(), "no resident pool") {
		t.Fatalf("--pool without a pool: exit %d, %s", code, errb.String())
	}
	out.Reset()
	errb.Reset()
	if code := run([]string{"exec", "--pool", "--pool-fallback-cold", "--state", empty, "--", "echo", "cold"}, nil, &out, &errb); code != 0 || out.String() != "cold\n" || !strings.Contains(errb.String(), "starting cold") {
		t.Fatalf("--pool-fallback-cold: exit %d, %q, %s", code, out.String(), errb.String())
	}

	var st bytes.Buffer
	if run([]string{"pool", "status", "--state", state}, nil, &st, &errb) != 0 {
		t.Fatal(errb.String())
	}
	var s pool.Status
	if err := json.Unmarshal(st.Bytes(), &s); err != nil {
		t.Fatal(err)
	}
	if s.Totals.Claims != 1 || !s.Totals.Balanced() {
		t.Fatalf("status: %s", st.String())
	}
}

// TestPoolPeerCredentials: a process of another uid that reaches the
// socket (its directory and the socket opened up on purpose here) is
// refused by the server's peer-credential check.
func TestPoolPeerCredentials(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("needs root: it connects as another uid (uid %d)", os.Geteuid())
	}
	state := t.TempDir()
	for _, d := range []string{filepath.Dir(state), state} { // t.TempDir's parent is 0700
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	startPool(t, state)
	sock := poolSocket(state)
	if err := os.Chmod(filepath.Dir(sock), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(sock, 0o666); err != nil {
		t.Fatal(err)
	}
	py, err := exec.LookPath("/usr/bin/python3") // not a shim under a home directory another uid cannot read
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, "-c", `import socket,sys
s=socket.socket(socket.AF_UNIX); s.connect(sys.argv[1])
try: s.sendall(b'{"op":"status"}\n')
except OSError: pass
print(s.recv(4096).decode())`, sock)
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if !strings.Contains(string(out), "uid 65534 may not use the pool") {
		t.Fatalf("another uid got: %s", out)
	}
}

// TestPoolServeRefusesEgress: a grant set with egress rules cannot be
// pooled, and 'cordon pool serve' says so before it prepares anything
// (rather than serving a pool that never fills).
func TestPoolServeRefusesEgress(t *testing.T) {
	dir := t.TempDir()
	gf := filepath.Join(dir, "g.json")
	if err := os.WriteFile(gf, []byte(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"exec":{"allow":[{"name":"true"}]},"egress":[{"host":"example.com","proto":"tcp","ports":[443,443]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	var errb bytes.Buffer
	if code := run([]string{"pool", "serve", "--state", dir, "--grants", gf}, nil, &bytes.Buffer{}, &errb); code != 125 || !strings.Contains(errb.String(), "egress") {
		t.Fatalf("pool serve of egress grants: exit %d, %s", code, errb.String())
	}
	if _, err := os.Stat(poolSocket(dir)); err == nil {
		t.Fatal("a socket was made for a refused pool")
	}
}
