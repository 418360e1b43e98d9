package egress

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/cordon-dev/cordon/grant"
)

// enforcer builds an Enforcer from egress entries and deny.egress entries
// written as JSON objects.
func enforcer(t testing.TB, egress []string, deny ...string) *grant.Enforcer {
	t.Helper()
	doc := `{"type":"cordon.grants.v1","code":"untrusted","tenancy":"single","confidential":false,"egress":[` +
		strings.Join(egress, ",") + `]`
	if len(deny) > 0 {
		doc += `,"deny":{"egress":[` + strings.Join(deny, ",") + `]}`
	}
	doc += "}"
	set, err := grant.Parse([]byte(doc))
	if err != nil {
		t.Fatalf("grant.Parse(%s): %v", doc, err)
	}
	return grant.New(set)
}

// hostRule and cidrRule write grant entries for tcp on one port.
func hostRule(host string, port int) string {
	return fmt.Sprintf(`{"host":%q,"proto":"tcp","ports":[%d,%d]}`, host, port, port)
}

func cidrRule(cidr string, port int) string {
	return fmt.Sprintf(`{"cidr":%q,"proto":"tcp","ports":[%d,%d]}`, cidr, port, port)
}

// testResolver maps the test names to addresses. Nothing here reaches a
// real resolver.
var testResolver = map[string][]string{
	"allowed.test":   {"127.0.0.1"},
	"other.test":     {"127.0.0.1"},
	"evil.test":      {"127.0.0.1"},
	"rebind.test":    {"127.0.0.1"},
	"metadata.test":  {"169.254.169.254"},
	"metadata6.test": {"fd00:ec2::254"},
	"public.test":    {"93.184.216.34"},
	"mixed.test":     {"93.184.216.34", "127.0.0.1"},
	"mapped.test":    {"::ffff:127.0.0.1"},
	"nat64.test":     {"64:ff9b::7f00:1"},
	"private.test":   {"10.20.99.5"},
	"zero.test":      {"0.0.0.0"},
	"empty.test":     {},
	"corp.test":      {"127.0.0.1"},
	"api.corp.test":  {"127.0.0.1"},
	"evil.corp.test": {"127.0.0.1"},
}

// testEnv is a proxy on a loopback listener whose resolver is testResolver
// and whose Dial reaches only the test's own servers.
type testEnv struct {
	t     *testing.T
	p     *Proxy
	addr  string
	mu    sync.Mutex
	recs  []Record          // guarded by mu
	dials []string          // guarded by mu
	route map[string]string // guarded by mu; address the proxy dials → test server
}

// newEnv starts a proxy deciding by e; opts adjust its Config.
func newEnv(t *testing.T, e *grant.Enforcer, opts ...func(*Config)) *testEnv {
	t.Helper()
	env := &testEnv{t: t, route: map[string]string{}}
	cfg := DefaultConfig(e)
	cfg.IdleTimeout = 5 * time.Second
	cfg.HeaderTimeout = 2 * time.Second
	cfg.DialTimeout = 2 * time.Second
	cfg.Resolver = func(ctx context.Context, host string) ([]netip.Addr, error) {
		addrs, ok := testResolver[host]
		if !ok {
			return nil, &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}
		}
		var out []netip.Addr
		for _, a := range addrs {
			out = append(out, netip.MustParseAddr(a))
		}
		return out, nil
	}
	cfg.Dial = env.dial
	cfg.Record = func(r Record) {
		env.mu.Lock()
		env.recs = append(env.recs, r)
		env.mu.Unlock()
	}
	for _, o := range opts {
		o(&cfg)
	}
	p, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	env.p = p
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	env.addr = ln.Addr().String()
	served := make(chan error, 1)
	go func() { served <- p.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		p.Close()
		if err := <-served; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve returned %v, want ErrClosed", err)
		}
	})
	return env
}

// allowDial lets the proxy dial addr, reaching the test server at real.
func (e *testEnv) allowDial(addr, real string) {
	e.mu.Lock()
	e.route[addr] = real
	e.mu.Unlock()
}

func (e *testEnv) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	e.mu.Lock()
	e.dials = append(e.dials, addr)
	real, ok := e.route[addr]
	e.mu.Unlock()
	if !ok {
		e.t.Errorf("proxy dialled %s %s, which the test does not allow", network, addr)
		return nil, errors.New("test: dial not allowed")
	}
	var d net.Dialer
	return d.DialContext(ctx, network, real)
}

// dialed returns the addresses the proxy dialled.
func (e *testEnv) dialed() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.dials...)
}

// records waits until at least n records arrived and returns them all.
func (e *testEnv) records(n int) []Record {
	e.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		e.mu.Lock()
		recs := append([]Record(nil), e.recs...)
		e.mu.Unlock()
		if len(recs) >= n {
			return recs
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("got %d records, want %d: %v", len(recs), n, recs)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// record waits for the n-th record (1-based) and returns it.
func (e *testEnv) record(n int) Record {
	e.t.Helper()
	return e.records(n)[n-1]
}

// clientConn is a client's connection to the proxy, read through br.
type clientConn struct {
	net.Conn
	br *bufio.Reader
}

func (c *clientConn) Read(b []byte) (int, error) { return c.br.Read(b) }

func (e *testEnv) open() *clientConn {
	e.t.Helper()
	c, err := net.Dial("tcp", e.addr)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return &clientConn{Conn: c, br: bufio.NewReader(c)}
}

// send writes raw bytes to a new connection and reads one response.
func (e *testEnv) send(raw string) (*clientConn, *http.Response, string) {
	e.t.Helper()
	c := e.open()
	resp, body := c.exchange(e.t, raw, "GET")
	return c, resp, body
}

// exchange writes raw and reads one response to a request with method.
func (c *clientConn) exchange(t testing.TB, raw, method string) (*http.Response, string) {
	t.Helper()
	// A request the proxy refuses before its end (a header over the
	// limit that never ends) may meet the proxy's close while it is
	// still being written: the reply sent before the close is still
	// read, and required.
	_, werr := io.WriteString(c.Conn, raw)
	if werr != nil && !errors.Is(werr, syscall.EPIPE) && !errors.Is(werr, syscall.ECONNRESET) {
		t.Fatalf("write request: %v", werr)
	}
	resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read response to %.80q (write: %v): %v", raw, werr, err)
	}
	if method == "CONNECT" && resp.StatusCode == 200 {
		return resp, "" // the tunnel follows
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return resp, string(body)
}

// connect opens a tunnel request for target and returns the response.
func (e *testEnv) connect(target string) (*clientConn, *http.Response, string) {
	e.t.Helper()
	c := e.open()
	resp, body := c.exchange(e.t, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n", "CONNECT")
	return c, resp, body
}

// mustConnect opens a tunnel and fails the test unless it is established.
func (e *testEnv) mustConnect(target string) *clientConn {
	e.t.Helper()
	c, resp, body := e.connect(target)
	if resp.StatusCode != 200 {
		e.t.Fatalf("CONNECT %s: %s %q, want 200", target, resp.Status, body)
	}
	return c
}

// listen starts a loopback TCP server running handle for each connection
// and returns its address and port.
func listen(t testing.TB, handle func(net.Conn)) (string, int) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String(), ln.Addr().(*net.TCPAddr).Port
}

// echoServer echoes every byte until the client half-closes, then
// half-closes too.
func echoServer(t testing.TB) (string, int) {
	return listen(t, func(c net.Conn) {
		io.Copy(c, c)
		c.(*net.TCPConn).CloseWrite()
		io.Copy(io.Discard, c)
	})
}

// webServer is an HTTP server that answers with what it received.
func webServer(t testing.TB) (string, int) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if size := r.URL.Query().Get("size"); size != "" {
			k, _ := strconv.Atoi(size)
			w.Header().Set("X-Request-Host", r.Host)
			w.Write(make([]byte, k))
			return
		}
		var hdr []string
		for k := range r.Header {
			hdr = append(hdr, k)
		}
		fmt.Fprintf(w, "method=%s uri=%s host=%s body=%d te=%v headers=%s", r.Method, r.RequestURI, r.Host, n,
			r.TransferEncoding, strings.Join(sorted(hdr), ","))
	}))
	t.Cleanup(srv.Close)
	u := strings.TrimPrefix(srv.URL, "http://")
	_, p, _ := net.SplitHostPort(u)
	port, _ := strconv.Atoi(p)
	return u, port
}

func sorted(s []string) []string {
	for i := range s {
		for j := i + 1; j < len(s); j++ {
			if s[j] < s[i] {
				s[i], s[j] = s[j], s[i]
			}
		}
	}
	return s
}

// testCert returns a self-signed certificate for allowed.test and a pool
// that trusts it.
func testCert(t testing.TB) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "allowed.test"},
		DNSNames: []string{"allowed.test"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// tlsServer is a TLS echo server with its own certificate for
// allowed.test. It sends the server name of every handshake it completed
// to the returned channel.
func tlsServer(t testing.TB) (int, *x509.CertPool, chan string) {
	cert, pool := testCert(t)
	names := make(chan string, 16)
	cfg := &tls.Config{Certificates: []tls.Certificate{cert}}
	_, port := listen(t, func(c net.Conn) {
		tc := tls.Server(c, cfg)
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		if err := tc.Handshake(); err != nil {
			return
		}
		names <- tc.ConnectionState().ServerName
		io.Copy(tc, tc)
	})
	return port, pool, names
}

// wantNoDial fails the test if the proxy dialled anything.
func (e *testEnv) wantNoDial() {
	e.t.Helper()
	if d := e.dialed(); len(d) > 0 {
		e.t.Errorf("proxy dialled %v, want nothing", d)
	}
}

// wantClosed fails unless the server closes c within d.
func wantClosed(t testing.TB, c net.Conn, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 1024)
	for {
		_, err := c.Read(buf)
		if err == nil {
			continue
		}
		if isTimeout(err) {
			t.Fatalf("connection still open after %s", d)
		}
		return
	}
}
