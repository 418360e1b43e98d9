package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestPoolStopCancelsClaim: 'cordon pool stop' while a claim's program
// runs ends that run, as the claimer's going away does, and the server
// exits: a stop does not wait for a run to end on its own.
func TestPoolStopCancelsClaim(t *testing.T) {
	state := t.TempDir()
	cmd, st := rtServe(t, state, 1)
	marker := "38.4343"
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
			dec = json.NewDecoder(bufio.NewReader(c))
		}
	}
	cordonCmd(t, "pool", "stop", "--state", state)
	if !exitedWithin(cmd.Process.Pid, 10*time.Second) {
		t.Fatal("'cordon pool serve' still runs 10 s after 'cordon pool stop' during a claim")
	}
	if procWith("sleep\x00" + marker) {
		t.Error("the claim's program outlives the stopped server")
	}
}

// TestPoolClientRefusesOpenPoolDir: a pool directory that others can
// write (and so fill with a socket of their own) is refused before
// anything is sent, and --pool-fallback-cold does not run cold past it.
func TestPoolClientRefusesOpenPoolDir(t *testing.T) {
	state := t.TempDir()
	dir := filepath.Dir(poolSocket(state))
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	code := run([]string{"exec", "--pool", "--pool-fallback-cold", "--state", state, "--", "echo", "cold"}, nil, &out, &errb)
	if code != 125 || out.Len() != 0 || !strings.Contains(errb.String(), "untrusted resident pool") {
		t.Fatalf("exec --pool with a pool directory of mode 0777: exit %d, stdout %q, stderr %s", code, out.String(), errb.String())
	}
}
