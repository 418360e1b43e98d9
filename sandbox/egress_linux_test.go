package sandbox

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/egress"
	"github.com/cordon-dev/cordon/grant"
)

// egressRun runs argv in a sandbox whose grant set allows curl and
// python3 and the given egress entries, with a real egress proxy whose
// resolver knows only the test names and whose dialer reaches only the
// test server.
func egressRun(t *testing.T, srv *httptest.Server, egressJSON string, argv []string) (outcome, []egress.Record) {
	t.Helper()
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	js := fmt.Sprintf(`{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,
"exec":{"allow":[{"name":"curl"},{"name":"python3"},{"name":"sh"},{"name":"tail"}]},"egress":[%s]}`, strings.ReplaceAll(egressJSON, "PORT", fmt.Sprint(port)))
	gs, err := grant.Parse([]byte(js))
	if err != nil {
		t.Fatalf("grants: %v", err)
	}
	var (
		mu      sync.Mutex
		records []egress.Record
	)
	cfg := egress.DefaultConfig(grant.New(gs))
	cfg.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "allowed.test", "evil.test":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "metadata.test":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		}
		return nil, fmt.Errorf("no such host %q", host)
	}
	want := srv.Listener.Addr().String()
	cfg.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr != want {
			return nil, fmt.Errorf("the test dialer reaches only %s, not %s", want, addr)
		}
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}
	cfg.Record = func(r egress.Record) {
		mu.Lock()
		records = append(records, r)
		mu.Unlock()
	}
	proxy, err := egress.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer proxy.Close()
	r := sandboxed(t, argv, func(s *Spec) {
		s.Grants = gs
		s.Egress = proxy
	})
	mu.Lock()
	defer mu.Unlock()
	return r, records
}

func testServer(t *testing.T) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello through the proxy\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestEgressEndToEnd: a sandboxed curl reaches an allowed TLS server on
// the host's loopback through the proxy, and everything else fails.
func TestEgressEndToEnd(t *testing.T) {
	srv := testServer(t)
	port := srv.Listener.Addr().(*net.TCPAddr).Port
	// A host service on an abstract unix socket: network-namespace scoped,
	// so the sandbox must not reach it even with egress on.
	abstract := fmt.Sprintf("cordon-egress-test-%d", time.Now().UnixNano())
	al, err := net.Listen("unix", "@"+abstract)
	if err != nil {
		t.Fatal(err)
	}
	defer al.Close()
	var accepted atomic.Bool
	go func() {
		if c, err := al.Accept(); err == nil {
			accepted.Store(true)
			c.Close()
		}
	}()
	script := fmt.Sprintf(`
curl -sSk https://allowed.test:%[1]d/; echo "allowed rc=$?"
curl -sSk https://evil.test:%[1]d/ 2>&1; echo "evil rc=$?"
curl -sSk https://allowed.test:%[2]d/ 2>&1; echo "other port rc=$?"
curl -sSk https://metadata.test:%[1]d/ 2>&1; echo "metadata rc=$?"
curl -sSk --noproxy '*' https://allowed.test:%[1]d/ 2>&1; echo "no proxy rc=$?"
curl -sSk --noproxy '*' https://127.0.0.1:%[1]d/ 2>&1; echo "direct rc=$?"
python3 -c 'import socket; socket.getaddrinfo("allowed.test", 443)' 2>&1 | tail -n 1; echo "dns rc=$?"
python3 -c '
import socket
for what, family, kind, addr in [("udp dns", socket.AF_INET, socket.SOCK_DGRAM, ("8.8.8.8", 53)),
        ("abstract", socket.AF_UNIX, socket.SOCK_STREAM, "\0%[3]s")]:
    s = socket.socket(family, kind)
    try:
        s.connect(addr); s.send(b"x"); print(what + ": CONNECTED")
    except OSError as e:
        print(what + ": " + type(e).__name__)
'
`, port, port+1, abstract)
	r, records := egressRun(t, srv,
		`{"host":"allowed.test","proto":"tcp","ports":[PORT,PORT]},{"cidr":"127.0.0.1/32","proto":"tcp","ports":[PORT,PORT]},{"host":"metadata.test","proto":"tcp","ports":[PORT,PORT]}`,
		[]string{"sh", "-c", script})
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
	for _, want := range []string{
		"hello through the proxy\nallowed rc=0\n",
		"evil rc=56\n",       // 403 to CONNECT: not granted
		"other port rc=56\n", // granted host, port not granted
		"metadata rc=56\n",   // a granted name resolving to the metadata address
		"no proxy rc=6\n",    // no resolver inside
		"direct rc=7\n",      // Landlock and the network namespace: no route
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	for _, want := range []string{"udp dns: OSError\n", "abstract: ConnectionRefusedError\n"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
	}
	if accepted.Load() {
		t.Errorf("the host's abstract socket accepted a connection from the sandbox")
	}
	if !strings.Contains(r.stdout, "socket.gaierror") {
		t.Errorf("a name resolved inside:\n%s", r.stdout)
	}
	allowed, denied := 0, 0
	for _, rec := range records {
		if rec.Allow {
			allowed++
			if rec.Host != "allowed.test" || rec.Addr != netip.MustParseAddr("127.0.0.1") || rec.BytesUp == 0 || rec.BytesDown == 0 {
				t.Errorf("allowed record %+v", rec)
			}
		} else {
			denied++
		}
	}
	if allowed != 1 || denied != 3 {
		t.Errorf("%d allowed and %d denied records, want 1 and 3: %+v", allowed, denied, records)
	}
}

// TestEgressRebinding: a granted name that resolves to loopback is refused
// unless a CIDR grant names the address.
func TestEgressRebinding(t *testing.T) {
	srv := testServer(t)
	r, records := egressRun(t, srv, `{"host":"allowed.test","proto":"tcp","ports":[PORT,PORT]}`,
		[]string{"curl", "-sSk", fmt.Sprintf("https://allowed.test:%d/", srv.Listener.Addr().(*net.TCPAddr).Port)})
	if r.err != nil {
		t.Fatalf("Run: %v", r.err)
	}
	if r.res.ExitCode != 56 || strings.Contains(r.stdout, "hello") {
		t.Errorf("exit %d, stdout %q: the rebinding was not refused", r.res.ExitCode, r.stdout)
	}
	if len(records) != 1 || records[0].Allow || records[0].Addr != netip.MustParseAddr("127.0.0.1") {
		t.Errorf("records %+v", records)
	}
}
