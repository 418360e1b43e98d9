package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestNewRefusesBadConfig(t *testing.T) {
	e := enforcer(t, nil)
	for _, tc := range []struct {
		name string
		mod  func(*Config)
	}{
		{"nil Enforcer", func(c *Config) { c.Enforcer = nil }},
		{"zero MaxConns", func(c *Config) { c.MaxConns = 0 }},
		{"negative MaxConns", func(c *Config) { c.MaxConns = -1 }},
		{"zero IdleTimeout", func(c *Config) { c.IdleTimeout = 0 }},
		{"zero HeaderTimeout", func(c *Config) { c.HeaderTimeout = 0 }},
		{"negative DialTimeout", func(c *Config) { c.DialTimeout = -time.Second }},
		{"zero MaxHeaderBytes", func(c *Config) { c.MaxHeaderBytes = 0 }},
		{"zero Config", func(c *Config) { *c = Config{} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := DefaultConfig(e)
			tc.mod(&cfg)
			if p, err := New(cfg); !errors.Is(err, ErrInvalidConfig) || p != nil {
				t.Errorf("New = %v, %v; want nil, ErrInvalidConfig", p, err)
			}
		})
	}
	if _, err := New(DefaultConfig(e)); err != nil {
		t.Errorf("New(DefaultConfig) = %v", err)
	}
}

// TestConnectTunnel: an allowed CONNECT tunnels both ways with half-close,
// and its Record and the Stats count exactly the bytes each way.
func TestConnectTunnel(t *testing.T) {
	// The server reads until EOF, then answers with 5000 bytes, so the
	// two directions carry different counts.
	addr, port := listen(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		if n == 1000 {
			c.Write(bytes.Repeat([]byte("d"), 5000))
		}
	})
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	env.allowDial(addr, addr)
	c := env.mustConnect(fmt.Sprintf("allowed.test:%d", port))
	if _, err := c.Write(bytes.Repeat([]byte("u"), 1000)); err != nil {
		t.Fatal(err)
	}
	c.Conn.(*net.TCPConn).CloseWrite()
	got, err := io.ReadAll(c)
	if err != nil || len(got) != 5000 {
		t.Fatalf("read %d bytes, %v; want 5000", len(got), err)
	}
	r := env.record(1)
	want := Record{Method: "CONNECT", Host: "allowed.test", Port: port, Addr: netip.MustParseAddr("127.0.0.1"),
		Allow: true, Rule: "egress[0]", Status: 200, BytesUp: 1000, BytesDown: 5000}
	if r.Method != want.Method || r.Host != want.Host || r.Port != want.Port || r.Addr != want.Addr || r.Allow != want.Allow ||
		r.Rule != want.Rule || r.Status != want.Status || r.BytesUp != want.BytesUp || r.BytesDown != want.BytesDown ||
		r.Error != "" || r.Hint != "" {
		t.Errorf("record = %+v\nwant     %+v", r, want)
	}
	if r.Start.IsZero() || r.Duration <= 0 {
		t.Errorf("record Start %v Duration %v, want both set", r.Start, r.Duration)
	}
	if d := env.dialed(); len(d) != 1 || d[0] != addr {
		t.Errorf("dialled %v, want [%s]", d, addr)
	}
	waitFor(t, func() bool { return env.p.Stats().Active == 0 })
	if s := env.p.Stats(); s != (Stats{Conns: 1, BytesUp: 1000, BytesDown: 5000}) {
		t.Errorf("Stats = %+v", s)
	}
}

func waitFor(t testing.TB, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 5s")
		}
	}
}

// TestPublicName: the ordinary case in production — a name rule alone
// allows a name whose addresses are public, and the proxy dials the
// address it resolved, never the name.
func TestPublicName(t *testing.T) {
	echo, port := echoServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("public.test", port)}))
	pinned := fmt.Sprintf("93.184.216.34:%d", port)
	env.allowDial(pinned, echo)
	c := env.mustConnect(fmt.Sprintf("public.test:%d", port))
	roundTrip(t, c, "ping")
	if d := env.dialed(); len(d) != 1 || d[0] != pinned {
		t.Errorf("dialled %v, want [%s]", d, pinned)
	}
	c.Close()
	if r := env.record(1); !r.Allow || r.Addr != netip.MustParseAddr("93.184.216.34") {
		t.Errorf("record = %+v", r)
	}
}

// roundTrip writes msg into a tunnel to an echo server and reads it back.
func roundTrip(t testing.TB, c io.ReadWriter, msg string) {
	t.Helper()
	if _, err := io.WriteString(c, msg); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
		t.Fatalf("echo = %q, %v; want %q", got, err, msg)
	}
}

// TestServerSpeaksFirst: a protocol whose server talks first works in a
// tunnel; waiting for the client's first bytes (to check for TLS) does not
// hold back the server's.
func TestServerSpeaksFirst(t *testing.T) {
	addr, port := listen(t, func(c net.Conn) {
		io.WriteString(c, "220 banner\r\n")
		io.Copy(c, c)
	})
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	env.allowDial(addr, addr)
	c := env.mustConnect(fmt.Sprintf("allowed.test:%d", port))
	banner := make([]byte, 12)
	if _, err := io.ReadFull(c, banner); err != nil || string(banner) != "220 banner\r\n" {
		t.Fatalf("banner = %q, %v", banner, err)
	}
	roundTrip(t, c, "HELO x\r\n")
}

func TestPlainHTTP(t *testing.T) {
	web, port := webServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	env.allowDial(web, web)
	target := fmt.Sprintf("allowed.test:%d", port)
	c := env.open()

	// The Host header names another host: it is ignored for the decision
	// and replaced by the URL's.
	resp, body := c.exchange(t, "GET http://"+target+"/path?q=1 HTTP/1.1\r\nHost: evil.test\r\n\r\n", "GET")
	if want := "method=GET uri=/path?q=1 host=" + target + " "; resp.StatusCode != 200 || !strings.HasPrefix(body, want) {
		t.Errorf("got %s %q, want 200 %q…", resp.Status, body, want)
	}
	// Keep-alive: the next request on the connection is decided again.
	resp, body = c.exchange(t, "POST http://"+target+" HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello", "POST")
	if want := "method=POST uri=/ host=" + target + " body=5 "; resp.StatusCode != 200 || !strings.HasPrefix(body, want) {
		t.Errorf("got %s %q, want 200 %q…", resp.Status, body, want)
	}
	resp, body = c.exchange(t, "GET http://evil.test:"+fmt.Sprint(port)+"/ HTTP/1.1\r\nHost: "+target+"\r\n\r\n", "GET")
	if resp.StatusCode != 403 || !strings.Contains(body, "evil.test") {
		t.Errorf("got %s %q, want 403 naming evil.test", resp.Status, body)
	}
	wantClosed(t, c, 2*time.Second)
	recs := env.records(3)
	if !recs[0].Allow || !recs[1].Allow || recs[2].Allow || recs[1].Method != "POST" || recs[2].Host != "evil.test" {
		t.Errorf("records = %+v", recs)
	}
	if recs[1].BytesUp < 5 || recs[1].BytesDown == 0 {
		t.Errorf("POST record counts %d up, %d down", recs[1].BytesUp, recs[1].BytesDown)
	}
	if d := env.dialed(); len(d) != 2 {
		t.Errorf("dialled %v, want the web server twice", d)
	}
}

// TestHopByHopHeaders: hop-by-hop and Proxy-* headers, and headers named
// in Connection, do not reach the upstream.
func TestHopByHopHeaders(t *testing.T) {
	web, port := webServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	env.allowDial(web, web)
	_, resp, body := env.send(fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\n"+
		"Proxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\nProxy-Foo: 1\r\nConnection: X-Secret, keep-alive\r\n"+
		"X-Secret: s\r\nKeep-Alive: 5\r\nUpgrade: websocket\r\nTe: trailers\r\nX-Kept: 1\r\n\r\n", port))
	if resp.StatusCode != 200 {
		t.Fatalf("got %s %q", resp.Status, body)
	}
	_, headers, _ := strings.Cut(body, "headers=")
	if headers != "Connection,X-Kept" { // Connection: close is the proxy's own
		t.Errorf("upstream got headers %q, want Connection,X-Kept", headers)
	}
}

func TestHTTP10(t *testing.T) {
	web, port := webServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	env.allowDial(web, web)
	for _, size := range []int{100, 100000} { // the larger one reaches the proxy chunked
		c, resp, body := env.send(fmt.Sprintf("GET http://allowed.test:%d/?size=%d HTTP/1.0\r\n\r\n", port, size))
		if resp.StatusCode != 200 || len(body) != size || len(resp.TransferEncoding) != 0 {
			t.Errorf("size %d: got %s, %d bytes, TE %v", size, resp.Status, len(body), resp.TransferEncoding)
		}
		wantClosed(t, c, 2*time.Second)
	}
}

// TestLargeBodies: request and response bodies of 8 MiB stream through,
// with Content-Length and chunked.
func TestLargeBodies(t *testing.T) {
	web, port := webServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	env.allowDial(web, web)
	const size = 8 << 20
	target := fmt.Sprintf("http://allowed.test:%d/", port)

	c := env.open()
	go func() {
		fmt.Fprintf(c.Conn, "PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n", target, size)
		c.Conn.Write(make([]byte, size))
	}()
	resp, body := c.exchange(t, "", "PUT")
	if resp.StatusCode != 200 || !strings.Contains(body, fmt.Sprintf("body=%d ", size)) {
		t.Errorf("PUT with Content-Length: %s %q", resp.Status, body)
	}

	go func() {
		fmt.Fprintf(c.Conn, "POST %s HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n", target)
		chunk := make([]byte, 1<<20)
		for range size / len(chunk) {
			fmt.Fprintf(c.Conn, "%x\r\n", len(chunk))
			c.Conn.Write(chunk)
			io.WriteString(c.Conn, "\r\n")
		}
		io.WriteString(c.Conn, "0\r\n\r\n")
	}()
	resp, body = c.exchange(t, "", "POST")
	if resp.StatusCode != 200 || !strings.Contains(body, fmt.Sprintf("body=%d te=[chunked]", size)) {
		t.Errorf("chunked POST: %s %q", resp.Status, body)
	}

	resp, body = c.exchange(t, fmt.Sprintf("GET %s?size=%d HTTP/1.1\r\nHost: x\r\n\r\n", target, size), "GET")
	if resp.StatusCode != 200 || len(body) != size {
		t.Errorf("large response: %s, %d bytes", resp.Status, len(body))
	}
	recs := env.records(3)
	if recs[0].BytesUp < size || recs[1].BytesUp < size || recs[2].BytesDown < size {
		t.Errorf("records count %d, %d up and %d down; want ≥ %d", recs[0].BytesUp, recs[1].BytesUp, recs[2].BytesDown, size)
	}
}

// TestIdleTimeout: a tunnel with no bytes either way is closed after
// IdleTimeout; one with bytes in only one direction is not.
func TestIdleTimeout(t *testing.T) {
	const idle = 300 * time.Millisecond
	quiet, qport := listen(t, func(c net.Conn) { io.Copy(io.Discard, c) })
	ticker, tport := listen(t, func(c net.Conn) {
		for range 10 {
			time.Sleep(idle / 3)
			if _, err := io.WriteString(c, "t"); err != nil {
				return
			}
		}
	})
	env := newEnv(t, enforcer(t, []string{cidrRule("127.0.0.1/32", qport), cidrRule("127.0.0.1/32", tport)}),
		func(c *Config) { c.IdleTimeout = idle })
	env.allowDial(quiet, quiet)
	env.allowDial(ticker, ticker)

	c := env.mustConnect(quiet)
	start := time.Now()
	wantClosed(t, c, 3*time.Second)
	if d := time.Since(start); d < idle {
		t.Errorf("closed after %s, before the idle timeout %s", d, idle)
	}
	if r := env.record(1); !strings.Contains(r.Error, "no bytes either way") {
		t.Errorf("record Error = %q, want the idle timeout", r.Error)
	}

	// The client sends nothing for 1s while the server sends a byte every
	// 100ms: the tunnel stays open until the server closes it.
	c = env.mustConnect(ticker)
	got, err := io.ReadAll(c)
	if err != nil || string(got) != "tttttttttt" {
		t.Errorf("read %q, %v; want ten ticks and EOF", got, err)
	}
	c.Close()
	if r := env.record(2); r.Error != "" || r.BytesDown != 10 {
		t.Errorf("record = %+v", r)
	}
}

// TestKeepAliveIdle: a keep-alive connection with no next request is
// closed after IdleTimeout, without a record.
func TestKeepAliveIdle(t *testing.T) {
	web, port := webServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}),
		func(c *Config) { c.IdleTimeout = 200 * time.Millisecond })
	env.allowDial(web, web)
	c, resp, _ := env.send(fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", port))
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	wantClosed(t, c, 3*time.Second)
	waitFor(t, func() bool { return env.p.Stats().Active == 0 })
	if recs := env.records(1); len(recs) != 1 {
		t.Errorf("records = %v, want only the request's", recs)
	}
}

// TestCloseStopsTunnels: Close ends every tunnel and returns once every
// ServeConn call has returned; later connections are refused.
func TestCloseStopsTunnels(t *testing.T) {
	echo, port := echoServer(t)
	env := newEnv(t, enforcer(t, []string{cidrRule("127.0.0.1/32", port)}))
	env.allowDial(echo, echo)
	var tunnels []*clientConn
	for range 3 {
		c := env.mustConnect(echo)
		roundTrip(t, c, "x")
		tunnels = append(tunnels, c)
	}
	done := make(chan struct{})
	go func() { env.p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return")
	}
	for _, c := range tunnels {
		wantClosed(t, c, time.Second)
	}
	if s := env.p.Stats(); s.Active != 0 {
		t.Errorf("Active = %d after Close", s.Active)
	}
	if recs := env.records(3); len(recs) != 3 {
		t.Errorf("records = %d, want 3", len(recs))
	}
	// ServeConn after Close closes the connection at once.
	a, b := net.Pipe()
	go env.p.ServeConn(context.Background(), a)
	b.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := b.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("read after Close = %v, want EOF", err)
	}
}

// TestServeConnContext: cancelling ServeConn's context ends its tunnel.
func TestServeConnContext(t *testing.T) {
	echo, port := echoServer(t)
	env := newEnv(t, enforcer(t, []string{cidrRule("127.0.0.1/32", port)}))
	env.allowDial(echo, echo)
	ctx, cancel := context.WithCancel(context.Background())
	a, b := net.Pipe()
	returned := make(chan struct{})
	go func() { env.p.ServeConn(ctx, a); close(returned) }()
	b.SetDeadline(time.Now().Add(5 * time.Second))
	c := &clientConn{Conn: b, br: bufio.NewReader(b)}
	resp, _ := c.exchange(t, "CONNECT "+echo+" HTTP/1.1\r\n\r\n", "CONNECT")
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	roundTrip(t, c, "ping")
	cancel()
	select {
	case <-returned:
	case <-time.After(5 * time.Second):
		t.Fatal("ServeConn did not return after cancel")
	}
	wantClosed(t, c, time.Second)
}

// TestMaxConnsFlood: with MaxConns tunnels open, further connections get
// 503 and a record each; the open tunnels are unharmed and a slot that
// frees is usable again.
func TestMaxConnsFlood(t *testing.T) {
	const limit, extra = 4, 5
	echo, port := echoServer(t)
	env := newEnv(t, enforcer(t, []string{cidrRule("127.0.0.1/32", port)}), func(c *Config) { c.MaxConns = limit })
	env.allowDial(echo, echo)
	var tunnels []*clientConn
	for range limit {
		tunnels = append(tunnels, env.mustConnect(echo))
	}
	var wg sync.WaitGroup
	for range extra {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", env.addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			cc := &clientConn{Conn: c, br: bufio.NewReader(c)}
			resp, body := cc.exchange(t, "CONNECT "+echo+" HTTP/1.1\r\n\r\n", "CONNECT")
			if resp.StatusCode != 503 {
				t.Errorf("flood connection got %s %q, want 503", resp.Status, body)
			}
		}()
	}
	wg.Wait()
	recs := env.records(extra)
	for _, r := range recs {
		if r.Allow || r.Rule != "limit" || r.Status != 503 {
			t.Errorf("record = %+v, want a 503 limit denial", r)
		}
	}
	if s := env.p.Stats(); s.Active != limit || s.Denied != extra || s.Conns != limit+extra {
		t.Errorf("Stats = %+v", s)
	}
	for _, c := range tunnels {
		roundTrip(t, c, "still here")
	}
	tunnels[0].Close()
	waitFor(t, func() bool { return env.p.Stats().Active == limit-1 })
	roundTrip(t, env.mustConnect(echo), "again")
}

// TestEmptyGrantSet: a grant set without egress rules denies everything.
func TestEmptyGrantSet(t *testing.T) {
	echo, port := echoServer(t)
	env := newEnv(t, enforcer(t, nil))
	for _, raw := range []string{
		"CONNECT allowed.test:443 HTTP/1.1\r\n\r\n",
		"CONNECT " + echo + " HTTP/1.1\r\n\r\n",
		fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", port),
	} {
		c := env.open()
		resp, body := c.exchange(t, raw, strings.Fields(raw)[0])
		if resp.StatusCode != 403 {
			t.Errorf("%q: got %s %q, want 403", raw, resp.Status, body)
		}
	}
	env.wantNoDial()
}

// TestDenialLine: a denial is one line, sent to the client and available
// as Record.String, naming the grant entry that would allow it.
func TestDenialLine(t *testing.T) {
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", 443)}))
	_, resp, body := env.connect("evil.test:8443")
	r := env.record(1)
	want := `egress: denied CONNECT evil.test:8443: no egress rule grants tcp evil.test:8443 (rule default); ` +
		`to allow it, add to the grant set's "egress": {"host":"evil.test","proto":"tcp","ports":[8443,8443]}`
	if resp.StatusCode != 403 || body != want+"\n" || r.String() != want {
		t.Errorf("got %s\nbody   %q\nrecord %q\nwant   %q", resp.Status, body, r.String(), want)
	}
	if !resp.Close {
		t.Errorf("denial without Connection: close")
	}
}

// TestHintAllows: the hint of every kind of liftable denial is a valid
// grant entry that, added to the grant set, lets the same request
// through the proxy.
func TestHintAllows(t *testing.T) {
	echo, port := echoServer(t)
	for _, tc := range []struct {
		name   string
		grants []string
		target string
	}{
		{"unlisted name", []string{cidrRule("127.0.0.1/32", port)}, fmt.Sprintf("evil.test:%d", port)},
		{"name on another port", []string{hostRule("allowed.test", 1), cidrRule("127.0.0.1/32", port)}, fmt.Sprintf("allowed.test:%d", port)},
		{"address", nil, echo},
		{"name resolving to loopback", []string{hostRule("rebind.test", port)}, fmt.Sprintf("rebind.test:%d", port)},
		{"IPv6 loopback", nil, fmt.Sprintf("[::1]:%d", port)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, enforcer(t, tc.grants))
			if _, resp, body := env.connect(tc.target); resp.StatusCode != 403 {
				t.Fatalf("got %s %q, want 403", resp.Status, body)
			}
			r := env.record(1)
			if r.Hint == "" {
				t.Fatalf("denial %+v has no hint", r)
			}
			env = newEnv(t, enforcer(t, append(tc.grants, r.Hint)))
			env.allowDial(tc.target, echo)
			env.allowDial(fmt.Sprintf("127.0.0.1:%d", port), echo)
			env.allowDial(fmt.Sprintf("[::1]:%d", port), echo)
			roundTrip(t, env.mustConnect(tc.target), "allowed now")
		})
	}
}

// TestDialFailure: an allowed request whose upstream cannot be reached
// gets 502 with the class of failure (the name does not resolve, the
// connection was refused), never the error's text; the Record keeps it.
func TestDialFailure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := ln.Addr().String()
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	env := newEnv(t, enforcer(t, []string{cidrRule("127.0.0.1/32", port), hostRule("empty.test", port), hostRule("unknown.test", port)}))
	env.allowDial(closed, closed)
	for _, tc := range []struct{ target, why string }{
		{closed, "connection refused"},
		{fmt.Sprintf("empty.test:%d", port), "the name does not resolve"},
		{fmt.Sprintf("unknown.test:%d", port), "the name does not resolve"},
	} {
		_, resp, body := env.connect(tc.target)
		want := "egress: cannot reach " + tc.target + ": " + tc.why
		if resp.StatusCode != 502 || strings.TrimSpace(body) != want || strings.Contains(body, "dial") || strings.Contains(body, "lookup") {
			t.Errorf("%s: got %s %q, want 502 %q", tc.target, resp.Status, body, want)
		}
	}
	recs := env.records(3)
	for _, r := range recs {
		if !r.Allow || r.Status != 502 || r.Error == "" {
			t.Errorf("record = %+v, want an allowance that failed", r)
		}
	}
}

// TestMaxRecords: the decision that reaches MaxRecords is followed by one
// denial saying so, and every later connection is closed unread and
// unrecorded.
func TestMaxRecords(t *testing.T) {
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", 1)}), func(c *Config) { c.MaxRecords = 3 })
	for i := 0; i < 3; i++ {
		_, resp, _ := env.connect("evil.test:443")
		if resp.StatusCode != 403 {
			t.Fatalf("connection %d: %s", i, resp.Status)
		}
	}
	for i := 0; i < 5; i++ {
		c := env.open()
		io.WriteString(c, "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\n")
		if _, err := c.br.ReadByte(); err == nil {
			t.Fatalf("connection %d past the cap was answered", i)
		}
	}
	env.records(4)
	time.Sleep(50 * time.Millisecond) // a late fifth record would show now
	recs := env.records(4)
	if len(recs) != 4 {
		t.Fatalf("%d records, want 3 and the cap's: %v", len(recs), recs)
	}
	if last := recs[3]; last.Allow || last.Rule != "limit" || !strings.Contains(last.Reason, "cap of 3 recorded egress decisions") {
		t.Fatalf("cap record %+v", last)
	}
	if st := env.p.Stats(); st.Dropped != 5 || st.Denied != 4 {
		t.Fatalf("stats %+v", st)
	}
	if _, err := New(Config{Enforcer: enforcer(t, nil), MaxConns: 1, IdleTimeout: 1, HeaderTimeout: 1, DialTimeout: 1, MaxHeaderBytes: 1}); !errors.Is(err, ErrInvalidConfig) {
		t.Fatalf("MaxRecords 0 accepted: %v", err)
	}
}

// TestSNI: a TLS tunnel whose ClientHello names the CONNECT host works,
// end to end with certificate verification; one naming another host is
// closed before the server sees it.
func TestSNI(t *testing.T) {
	port, pool, names := tlsServer(t)
	server := fmt.Sprintf("127.0.0.1:%d", port)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), hostRule("other.test", port), cidrRule("127.0.0.1/32", port)}))
	env.allowDial(server, server)
	handshake := func(target, sni string) error {
		c := env.mustConnect(target)
		tc := tls.Client(c, &tls.Config{ServerName: sni, RootCAs: pool, InsecureSkipVerify: sni != "allowed.test" && sni != "ALLOWED.test"})
		defer tc.Close()
		if err := tc.Handshake(); err != nil {
			return err
		}
		roundTrip(t, tc, "over tls")
		return nil
	}
	allowed := fmt.Sprintf("allowed.test:%d", port)
	for i, tc := range []struct {
		target, sni string
		reason      string // of the denial; "" for a tunnel that works
	}{
		{allowed, "allowed.test", ""},
		{allowed, "ALLOWED.test", ""}, // SNI compares without ASCII case
		{allowed, "evil.test", `SNI "evil.test" does not match CONNECT host "allowed.test"`},
		{allowed, "other.test", `SNI "other.test" does not match CONNECT host "allowed.test"`}, // granted too, but not CONNECTed
		{allowed, "allowed.test.evil.test", "does not match"},
		{server, "allowed.test", `SNI "allowed.test" does not match CONNECT host "127.0.0.1"`}, // IP-literal CONNECT, a name in SNI
		{server, "", ""}, // no SNI at all
	} {
		err := handshake(tc.target, tc.sni)
		if (err == nil) != (tc.reason == "") {
			t.Errorf("CONNECT %s with SNI %q: handshake error %v", tc.target, tc.sni, err)
		}
		r := env.record(i + 1)
		switch {
		case tc.reason == "" && !r.Allow:
			t.Errorf("SNI %q: record = %+v, want allowed", tc.sni, r)
		case tc.reason != "" && (r.Allow || r.Rule != "sni" || !strings.Contains(r.Reason, tc.reason) || r.BytesUp != 0):
			t.Errorf("SNI %q: record = %+v, want an sni denial %q with nothing forwarded", tc.sni, r, tc.reason)
		}
	}
	close(names)
	var seen []string
	for n := range names {
		seen = append(seen, n)
	}
	if strings.Join(seen, ",") != "allowed.test,ALLOWED.test," {
		t.Errorf("server saw server names %q, want only the matching ones", seen)
	}
}

// TestRecordConcurrency: Record is called from many connections at once
// (the race detector checks the proxy's side).
func TestRecordConcurrency(t *testing.T) {
	echo, port := echoServer(t)
	env := newEnv(t, enforcer(t, []string{cidrRule("127.0.0.1/32", port)}))
	env.allowDial(echo, echo)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			target := echo
			if i%2 == 1 {
				target = "evil.test:443"
			}
			c, err := net.Dial("tcp", env.addr)
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\n\r\n", target)
			c.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, c)
		}()
	}
	wg.Wait()
	recs := env.records(20)
	denied := 0
	for _, r := range recs {
		if !r.Allow {
			denied++
		}
	}
	if s := env.p.Stats(); denied != 10 || s.Denied != 10 || s.Conns != 20 {
		t.Errorf("denied %d, Stats %+v; want 10 denials of 20", denied, s)
	}
}

// TestCapClosesKeptAliveConnections: a connection admitted before the
// record cap that asks again after it — a kept-alive request — is closed
// without a decision: nothing is dialled or forwarded unrecorded.
func TestCapClosesKeptAliveConnections(t *testing.T) {
	web, port := webServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port)}), func(c *Config) { c.MaxRecords = 3 })
	env.allowDial(web, web)
	target := fmt.Sprintf("allowed.test:%d", port)
	keep := env.open() // admitted before the cap; asks nothing yet
	waitFor(t, func() bool { return env.p.Stats().Active == 1 })
	for i := 0; i < 3; i++ {
		if _, resp, _ := env.connect("evil.test:443"); resp.StatusCode != 403 {
			t.Fatalf("denial %d: %s", i, resp.Status)
		}
	}
	env.records(4) // three denials and the cap's
	io.WriteString(keep, "POST http://"+target+"/exfil HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nsecret")
	if _, err := keep.br.ReadByte(); err == nil {
		t.Fatal("a request after the cap was answered")
	}
	if d := env.dialed(); len(d) != 0 {
		t.Fatalf("dialled %v after the cap", d)
	}
	if recs := env.records(4); len(recs) != 4 || recs[3].Rule != "limit" {
		t.Fatalf("records %v", recs)
	}
}

// TestCloseWaitsForRefusedRecords: Close waits for every ServeConn call,
// also one refused for MaxConns that is still recording its denial, so
// no record is emitted after Close returned.
func TestCloseWaitsForRefusedRecords(t *testing.T) {
	echo, port := echoServer(t)
	inRecord := make(chan struct{})
	release := make(chan struct{})
	env := newEnv(t, enforcer(t, []string{cidrRule("127.0.0.1/32", port)}), func(c *Config) {
		c.MaxConns = 1
		c.Record = func(r Record) {
			if r.Rule == ruleLimit {
				close(inRecord)
				<-release
			}
		}
	})
	env.allowDial(echo, echo)
	hold := env.open()
	io.WriteString(hold, "CONNECT "+echo+" HTTP/1.1\r\nHost: x\r\n\r\n")
	waitFor(t, func() bool { return env.p.Stats().Active == 1 })
	c2, err := net.Dial("tcp", env.addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	<-inRecord
	closed := make(chan struct{})
	go func() { env.p.Close(); close(closed) }()
	select {
	case <-closed:
		t.Errorf("Close returned while the MaxConns denial was still being recorded")
	case <-time.After(time.Second):
	}
	close(release)
	<-closed
}

// TestAllowedTunnelKeepsItsSlot: a tunnel allowed before the cap and
// ended after it keeps the record slot it reserved when it was decided:
// its record (with its bytes) is emitted, and the cap's denial still
// comes last.
func TestAllowedTunnelKeepsItsSlot(t *testing.T) {
	echo, port := echoServer(t)
	env := newEnv(t, enforcer(t, []string{cidrRule("127.0.0.1/32", port)}), func(c *Config) { c.MaxRecords = 3 })
	env.allowDial(echo, echo)
	tun := env.mustConnect(echo)
	io.WriteString(tun, "exfiltrated-secret")
	buf := make([]byte, 18)
	if _, err := io.ReadFull(tun.br, buf); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if _, resp, _ := env.connect("evil.test:443"); resp.StatusCode != 403 {
			t.Fatalf("denial %d: %s", i, resp.Status)
		}
	}
	// Every slot is taken (the tunnel's and two denials): a fourth
	// request is closed undecided.
	c := env.open()
	io.WriteString(c, "CONNECT evil.test:443 HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := c.br.ReadByte(); err == nil {
		t.Fatal("a request past the cap was answered")
	}
	tun.Close()
	recs := env.records(4)
	if len(recs) != 4 {
		t.Fatalf("%d records: %v", len(recs), recs)
	}
	if r := recs[2]; !r.Allow || r.BytesUp != 18 || r.BytesDown != 18 {
		t.Fatalf("the tunnel's record %+v", r)
	}
	if last := recs[3]; last.Rule != "limit" || last.Allow {
		t.Fatalf("last record %+v, want the cap's denial", last)
	}
}
