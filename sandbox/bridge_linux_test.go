package sandbox

import (
	"bufio"
	"context"
	"net"
	"strings"
	"sync/atomic"
	"testing"
)

// fakeEgress answers every connection with one line naming what the
// client sent first, and counts connections.
type fakeEgress struct{ conns atomic.Int64 }

func (f *fakeEgress) ServeConn(ctx context.Context, c net.Conn) {
	defer c.Close()
	f.conns.Add(1)
	line, _ := bufio.NewReader(c).ReadString('\n')
	c.Write([]byte("egress saw " + strings.TrimSpace(line) + "\n"))
}

const egressGrants = `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"python3"},{"name":"env"}]},
"egress":[{"host":"example.com","proto":"tcp","ports":[443,443]}]}`

const bridgeClient = `
import os, socket, sys
def attempt(what, port):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"hello " + what.encode() + b"\n")
        print(what + ": " + s.makefile().readline().strip())
    except OSError as e:
        print(what + ": " + type(e).__name__ + " " + str(e.errno))
attempt("proxy", 3128)
attempt("proxy again", 3128)
attempt("other port", 8080)
print("HTTPS_PROXY=" + os.environ.get("HTTPS_PROXY", ""))
`

func TestEgressBridge(t *testing.T) {
	eg := &fakeEgress{}
	r := sandboxed(t, []string{"python3", "-c", bridgeClient}, withGrants(t, egressGrants), func(s *Spec) { s.Egress = eg })
	r.mustExit(t, 0)
	for _, want := range []string{
		"proxy: egress saw hello proxy\n",
		"proxy again: egress saw hello proxy again\n",
		"other port: PermissionError 13\n", // Landlock: only the forwarder's port
		"HTTPS_PROXY=http://127.0.0.1:3128\n",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s%s", want, r.stdout, r.stderr)
		}
	}
	if n := eg.conns.Load(); n != 2 {
		t.Errorf("egress served %d connections, want 2", n)
	}
}

func TestNoEgressWithoutRules(t *testing.T) {
	eg := &fakeEgress{}
	r := sandboxed(t, []string{"python3", "-c", bridgeClient}, func(s *Spec) { s.Egress = eg })
	r.mustExit(t, 0)
	if !strings.Contains(r.stdout, "proxy: PermissionError 13\n") || !strings.Contains(r.stdout, "HTTPS_PROXY=\n") {
		t.Errorf("a run without egress rules reached the proxy port or got proxy variables:\n%s%s", r.stdout, r.stderr)
	}
	if n := eg.conns.Load(); n != 0 {
		t.Errorf("egress served %d connections without egress rules", n)
	}
}

func TestEgressRulesNeedAProxy(t *testing.T) {
	r := sandboxed(t, []string{"python3", "-c", "pass"}, withGrants(t, egressGrants))
	if r.err == nil || !strings.Contains(r.err.Error(), "no egress proxy") {
		t.Fatalf("egress rules without a proxy: %v", r.err)
	}
}
