package egress

// Adversarial tests: each attack from the egress proxy issue, against a
// proxy whose resolver is testResolver and whose Dial reaches only the
// test's own loopback servers (it fails the test on any other address).

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// recorderServer sends every connection's bytes (until the client
// half-closes or 1s of quiet) to the returned channel.
func recorderServer(t testing.TB) (string, int, chan []byte) {
	got := make(chan []byte, 16)
	addr, port := listen(t, func(c net.Conn) {
		var b []byte
		buf := make([]byte, 4096)
		for {
			c.SetReadDeadline(time.Now().Add(time.Second))
			n, err := c.Read(buf)
			b = append(b, buf[:n]...)
			if err != nil {
				break
			}
		}
		got <- b
	})
	return addr, port, got
}

// wantDenied checks the n-th record is a denial by rule, with a reason
// containing reason.
func (e *testEnv) wantDenied(n int, rule, reason string) Record {
	e.t.Helper()
	r := e.record(n)
	if r.Allow || r.Rule != rule || !strings.Contains(r.Reason, reason) {
		e.t.Errorf("record %d = %+v\nwant a denial by %s with reason containing %q", n, r, rule, reason)
	}
	return r
}

// TestUnlistedHost: a host no rule names is denied, by CONNECT and by
// plain HTTP, without resolving or dialling it.
func TestUnlistedHost(t *testing.T) {
	echo, port := echoServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	_, resp, body := env.connect(fmt.Sprintf("evil.test:%d", port))
	if resp.StatusCode != 403 || !strings.Contains(body, `"host":"evil.test"`) {
		t.Errorf("CONNECT: got %s %q, want 403 with a hint", resp.Status, body)
	}
	env.wantDenied(1, "default", "no egress rule grants tcp evil.test")
	_, resp, _ = env.send(fmt.Sprintf("GET http://evil.test:%d/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", port))
	if resp.StatusCode != 403 {
		t.Errorf("GET: got %s, want 403", resp.Status)
	}
	env.wantDenied(2, "default", "evil.test")
	env.wantNoDial()
	_ = echo
}

// TestIPLiteral: an IP literal is decided by CIDR rules only; a special
// address needs a CIDR rule inside its special range, so 0.0.0.0/0 does
// not open loopback.
func TestIPLiteral(t *testing.T) {
	echo, port := echoServer(t)
	for _, tc := range []struct {
		name   string
		grants []string
		rule   string // "" when allowed
	}{
		{"no CIDR rule", []string{hostRule("allowed.test", port)}, "default"},
		{"0.0.0.0/0", []string{cidrRule("0.0.0.0/0", port)}, "address"},
		{"127.0.0.0/8 on another port", []string{cidrRule("127.0.0.0/8", port+1)}, "default"},
		{"127.0.0.0/8", []string{cidrRule("127.0.0.0/8", port)}, ""},
		{"127.0.0.1/32", []string{cidrRule("127.0.0.1/32", port)}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newEnv(t, enforcer(t, tc.grants))
			env.allowDial(echo, echo)
			c, resp, body := env.connect(echo)
			if tc.rule == "" {
				if resp.StatusCode != 200 {
					t.Fatalf("got %s %q, want 200", resp.Status, body)
				}
				roundTrip(t, c, "literal")
				return
			}
			if resp.StatusCode != 403 {
				t.Errorf("got %s %q, want 403", resp.Status, body)
			}
			r := env.wantDenied(1, tc.rule, "127.0.0.1")
			if want := fmt.Sprintf(`{"cidr":"127.0.0.1/32","proto":"tcp","ports":[%d,%d]}`, port, port); r.Hint != want {
				t.Errorf("hint %s, want %s", r.Hint, want)
			}
			_, resp, _ = env.send(fmt.Sprintf("GET http://%s/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", echo))
			if resp.StatusCode != 403 {
				t.Errorf("GET: got %s, want 403", resp.Status)
			}
			env.wantNoDial()
		})
	}
}

// TestRebinding: a listed name that resolves to a special address is
// refused unless a CIDR rule inside that range grants it; every address
// the name resolves to must pass; the proxy dials only the vetted address.
func TestRebinding(t *testing.T) {
	echo, port := echoServer(t)
	for _, tc := range []struct {
		host   string
		grants []string
		deny   []string
		rule   string // "" when allowed
		reason string
	}{
		{"rebind.test", nil, nil, "address", "rebind.test resolves to 127.0.0.1, which is a loopback address"},
		{"rebind.test", []string{cidrRule("0.0.0.0/0", port)}, nil, "address", "loopback"},
		{"rebind.test", []string{cidrRule("127.0.0.1/32", port+1)}, nil, "address", "loopback"},
		{"rebind.test", []string{cidrRule("127.0.0.1/32", port)}, nil, "", ""},
		{"metadata.test", []string{cidrRule("169.254.0.0/16", port), cidrRule("0.0.0.0/0", port)}, nil, "address", "cloud metadata"},
		{"metadata6.test", []string{cidrRule("fc00::/7", port), cidrRule("::/0", port)}, nil, "address", "cloud metadata"},
		{"mixed.test", nil, nil, "address", "127.0.0.1"}, // a public address first, then loopback
		{"mapped.test", nil, nil, "address", "127.0.0.1"},
		{"nat64.test", []string{cidrRule("64:ff9b::/96", port)}, nil, "address", "NAT64 loopback"},
		{"private.test", []string{cidrRule("10.0.0.0/8", port)}, []string{`{"cidr":"10.20.99.0/24"}`}, "deny.egress[0]", "denied network"},
		{"zero.test", []string{cidrRule("0.0.0.0/8", port)}, nil, "address", "unspecified"},
	} {
		t.Run(tc.host+" "+strings.Join(tc.grants, " "), func(t *testing.T) {
			env := newEnv(t, enforcer(t, append([]string{hostRule(tc.host, port)}, tc.grants...), tc.deny...))
			env.allowDial(echo, echo)
			c, resp, body := env.connect(fmt.Sprintf("%s:%d", tc.host, port))
			if tc.rule == "" {
				if resp.StatusCode != 200 {
					t.Fatalf("got %s %q, want 200", resp.Status, body)
				}
				roundTrip(t, c, "rebound")
				if d := env.dialed(); len(d) != 1 || d[0] != echo {
					t.Errorf("dialled %v, want the vetted address %s only", d, echo)
				}
				return
			}
			if resp.StatusCode != 403 || !strings.Contains(body, tc.reason) {
				t.Errorf("got %s %q, want 403 naming %q", resp.Status, body, tc.reason)
			}
			env.wantDenied(1, tc.rule, tc.reason)
			env.wantNoDial()
		})
	}
}

// TestSNIAttacks: ClientHellos crafted to get past the SNI check — split
// across records and reads, preceded by another record, with two names,
// with ECH, a TLS-looking version trick, trickled past the timeout — are
// refused, and nothing reaches the server; a split but honest one passes.
func TestSNIAttacks(t *testing.T) {
	rec, port, got := recorderServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}),
		func(c *Config) { c.HeaderTimeout = 300 * time.Millisecond })
	env.allowDial(rec, rec)
	target := fmt.Sprintf("allowed.test:%d", port)
	honest := captureHello(t, &tls.Config{ServerName: "allowed.test"})
	evil := captureHello(t, &tls.Config{ServerName: "evil.test"})
	split := func(b []byte) []byte { return records(b[recordHeaderLen:], 7) }
	for i, tc := range []struct {
		name   string
		pieces [][]byte
		reason string // "" when forwarded
	}{
		{"honest, split into records and reads", chunks(split(honest), 3), ""},
		{"evil, split into records and reads", chunks(split(evil), 3), `SNI "evil.test" does not match`},
		{"alert record first", [][]byte{{21, 3, 3, 0, 2, 1, 0}, evil}, "record of type 21"},
		{"change_cipher_spec first", [][]byte{{20, 3, 3, 0, 1, 1}, evil}, "record of type 20"},
		{"record version trick", [][]byte{append([]byte{22, 5, 0}, evil[3:]...)}, "version"},
		{"two host names", [][]byte{records(helloMsg(sniExt("allowed.test", "evil.test")), 1000)}, "more than one host_name"},
		{"NUL in the name", [][]byte{records(helloMsg(sniExt("allowed.test\x00evil.test")), 1000)}, "does not match"},
		{"KELVIN SIGN", [][]byte{records(helloMsg(sniExt("\u212aallowed.test")), 1000)}, "does not match"},
		{"trailing dot", [][]byte{records(helloMsg(sniExt("allowed.test.")), 1000)}, "does not match"},
		{"ECH", [][]byte{records(helloMsg(sniExt("allowed.test"), ext{extEncryptedHello, []byte{0}}), 1000)}, "Encrypted Client Hello"},
		{"trickled past the timeout", [][]byte{honest[:10], nil, honest[10:]}, "not complete within"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := env.mustConnect(target)
			for _, p := range tc.pieces {
				if p == nil {
					time.Sleep(500 * time.Millisecond)
					continue
				}
				c.Write(p)
				time.Sleep(20 * time.Millisecond)
			}
			c.Conn.(*net.TCPConn).CloseWrite()
			io.Copy(io.Discard, c)
			var seen []byte
			select {
			case seen = <-got:
			case <-time.After(5 * time.Second):
				t.Fatal("the server saw no connection")
			}
			want := bytes.Join(tc.pieces, nil)
			if tc.reason == "" {
				if !bytes.Equal(seen, want) {
					t.Errorf("server got %d bytes, want the %d sent", len(seen), len(want))
				}
				if r := env.record(i + 1); !r.Allow || r.BytesUp != int64(len(want)) {
					t.Errorf("record = %+v", r)
				}
				return
			}
			if len(seen) != 0 {
				t.Errorf("server got %d bytes, want none", len(seen))
			}
			env.wantDenied(i+1, "sni", tc.reason)
		})
	}
}

// chunks splits b into n pieces.
func chunks(b []byte, n int) [][]byte {
	var out [][]byte
	size := (len(b) + n - 1) / n
	for len(b) > 0 {
		k := min(size, len(b))
		out = append(out, b[:k])
		b = b[k:]
	}
	return out
}

// TestChainedConnect: after 200 the tunnel's bytes are never parsed by the
// proxy, so a CONNECT inside a tunnel to an allowed host reaches that host
// as data and opens nothing.
func TestChainedConnect(t *testing.T) {
	rec, port, got := recorderServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	env.allowDial(rec, rec)
	c := env.mustConnect(fmt.Sprintf("allowed.test:%d", port))
	inner := "CONNECT evil.test:443 HTTP/1.1\r\nHost: evil.test:443\r\n\r\nGET http://evil.test/ HTTP/1.1\r\n\r\n"
	io.WriteString(c, inner)
	c.Conn.(*net.TCPConn).CloseWrite()
	back, _ := io.ReadAll(c)
	if len(back) != 0 {
		t.Errorf("client got %q back, want nothing (no proxy reply inside the tunnel)", back)
	}
	if seen := <-got; string(seen) != inner {
		t.Errorf("allowed host got %q, want the inner request verbatim", seen)
	}
	if d := env.dialed(); len(d) != 1 {
		t.Errorf("dialled %v, want only the allowed host", d)
	}
	if recs := env.records(1); len(recs) != 1 || !recs[0].Allow {
		t.Errorf("records = %v, want one allowance", recs)
	}
}

// TestAbsoluteURLConfusion: URLs that read as one host to a person or a
// lax parser and another to the proxy are refused or decided on the host
// the proxy parsed; nothing is dialled.
func TestAbsoluteURLConfusion(t *testing.T) {
	web, port := webServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	env.allowDial(web, web)
	a := fmt.Sprintf("allowed.test:%d", port)
	e := fmt.Sprintf("evil.test:%d", port)
	for _, tc := range []struct {
		uri    string
		status int
	}{
		{"http://" + a + "@" + e + "/", 400},
		{"http://allowed.test@" + e + "/", 400},
		{"http://@" + e + "/", 400},
		{`http://allowed.test\@` + e + "/", 400},
		{"http://" + e + "/http://" + a + "/", 403},
		{"http://" + e + "?@" + a + "/", 403},
		{"http://" + e + "#@" + a + "/", 400},
		{"http://evil%2etest:" + fmt.Sprint(port) + "/", 400},
		{"http://" + e + "%2f@" + a + "/", 400},
		{"https://" + a + "/", 400},
		{"HTTP://" + a + "/", 400},
		{"ftp://" + a + "/", 400},
		{"//" + a + "/", 400},
		{"/", 400},
		{"*", 400},
	} {
		_, resp, body := env.send("GET " + tc.uri + " HTTP/1.1\r\nHost: " + a + "\r\n\r\n")
		if resp.StatusCode != tc.status {
			t.Errorf("GET %s: got %s %q, want %d", tc.uri, resp.Status, body, tc.status)
		}
	}
	env.wantNoDial()
}

// TestPortConfusion: a port written any way but plain decimal, or two
// ports, is refused before any decision.
func TestPortConfusion(t *testing.T) {
	_, port := echoServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	p := fmt.Sprint(port)
	for _, target := range []string{
		"allowed.test:0" + p, "allowed.test:+" + p, "allowed.test:" + p + ":80", "allowed.test:80:" + p,
		"allowed.test:65536", "allowed.test:0", "allowed.test", "allowed.test:", "[allowed.test]:" + p,
		"allowed.test:" + p + "/", "allowed.test:0x" + fmt.Sprintf("%x", port), "127.0.0.1:0" + p, "[127.0.0.1]:" + p,
	} {
		_, resp, body := env.connect(target)
		if resp.StatusCode != 400 {
			t.Errorf("CONNECT %s: got %s %q, want 400", target, resp.Status, body)
		}
	}
	for _, uri := range []string{"http://allowed.test:0" + p + "/", "http://allowed.test:/", "http://allowed.test:" + p + ":80/"} {
		_, resp, body := env.send("GET " + uri + " HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp.StatusCode != 400 {
			t.Errorf("GET %s: got %s %q, want 400", uri, resp.Status, body)
		}
	}
	env.wantNoDial()
}

// TestPortNotGranted: an allowed host on a port its rule does not grant
// is denied, with a hint naming that port.
func TestPortNotGranted(t *testing.T) {
	_, granted := echoServer(t)
	web, other := webServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", granted), cidrRule("127.0.0.1/32", granted)}))
	_, resp, _ := env.connect(fmt.Sprintf("allowed.test:%d", other))
	if resp.StatusCode != 403 {
		t.Errorf("CONNECT: got %s, want 403", resp.Status)
	}
	r := env.wantDenied(1, "default", fmt.Sprintf("allowed.test:%d", other))
	if want := fmt.Sprintf(`{"host":"allowed.test","proto":"tcp","ports":[%d,%d]}`, other, other); r.Hint != want {
		t.Errorf("hint %s, want %s", r.Hint, want)
	}
	_, resp, _ = env.send(fmt.Sprintf("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\n\r\n", other))
	if resp.StatusCode != 403 {
		t.Errorf("GET: got %s, want 403", resp.Status)
	}
	_, resp, _ = env.connect(web)
	if resp.StatusCode != 403 {
		t.Errorf("CONNECT %s: got %s, want 403", web, resp.Status)
	}
	env.wantNoDial()
}

// TestIPv6Literal: bracketed IPv6 literals are decided as addresses and
// dialled exactly; unbracketed, mapped and zoned forms are refused.
func TestIPv6Literal(t *testing.T) {
	echo, port := echoServer(t)
	v6 := fmt.Sprintf("[::1]:%d", port)
	env := newEnv(t, enforcer(t, []string{cidrRule("::1/128", port), cidrRule("127.0.0.1/32", port), cidrRule("::/0", port)}))
	env.allowDial(v6, echo) // the test's server is on 127.0.0.1: no IPv6 needed
	roundTrip(t, env.mustConnect(v6), "six")
	if d := env.dialed(); len(d) != 1 || d[0] != v6 {
		t.Errorf("dialled %v, want [%s]", d, v6)
	}
	for _, tc := range []struct {
		target string
		status int
	}{
		{fmt.Sprintf("::1:%d", port), 400},
		{fmt.Sprintf("[::ffff:127.0.0.1]:%d", port), 403},
		{fmt.Sprintf("[0:0:0:0:0:0:0:1]:%d", port), 403},
		{fmt.Sprintf("[fe80::1%%25lo]:%d", port), 403},
		{fmt.Sprintf("[2001:db8::1]:%d", port), 403}, // documentation range: ::/0 does not open it
		{fmt.Sprintf("[::]:%d", port), 403},
	} {
		_, resp, body := env.connect(tc.target)
		if resp.StatusCode != tc.status {
			t.Errorf("CONNECT %s: got %s %q, want %d", tc.target, resp.Status, body, tc.status)
		}
	}
	if d := env.dialed(); len(d) != 1 {
		t.Errorf("dialled %v, want only the first tunnel's address", d)
	}

	env = newEnv(t, enforcer(t, []string{cidrRule("127.0.0.1/32", port)}))
	_, resp, _ := env.connect(v6)
	if r := env.record(1); resp.StatusCode != 403 || r.Hint != fmt.Sprintf(`{"cidr":"::1/128","proto":"tcp","ports":[%d,%d]}`, port, port) {
		t.Errorf("ungranted [::1]: got %s, record %+v", resp.Status, r)
	}
}

// TestNonCanonicalHosts: numeric-looking, upper-case, trailing-dot and
// other non-canonical hosts are denied with rule "request", never fixed
// up, resolved or dialled.
func TestNonCanonicalHosts(t *testing.T) {
	_, port := echoServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.0/8", port)}))
	n := 0
	for _, host := range []string{
		"127.1", "2130706433", "0x7f.1", "0x7f000001", "0177.0.0.1", "127.000.000.001", "127.0.0.1.",
		"ALLOWED.test", "Allowed.Test", "allowed.test.", "allowed..test", ".allowed.test", "allowed_test",
		"allowed.test%00", "b\u00fccher.test", "xn--bcher-kva.test.", "-allowed.test",
	} {
		for _, raw := range []string{
			fmt.Sprintf("CONNECT %s:%d HTTP/1.1\r\n\r\n", host, port),
			fmt.Sprintf("GET http://%s:%d/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n", host, port),
		} {
			c := env.open()
			resp, body := c.exchange(t, raw, strings.Fields(raw)[0])
			if resp.StatusCode != 403 && resp.StatusCode != 400 {
				t.Errorf("%q: got %s %q, want 403 or 400", raw, resp.Status, body)
			}
			n++
			if r := env.record(n); r.Allow || r.Rule != "request" || r.Hint != "" {
				t.Errorf("%q: record %+v, want a denial by rule request without a hint", raw, r)
			}
		}
	}
	env.wantNoDial()
}

// TestMalformedRequests: CONNECT with a path, a body or garbage, other
// protocols, and requests that are not HTTP at all are refused with 400 (or
// 408/505), recorded, and never dialled.
func TestMalformedRequests(t *testing.T) {
	_, port := echoServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}),
		func(c *Config) { c.HeaderTimeout = 300 * time.Millisecond })
	a := fmt.Sprintf("allowed.test:%d", port)
	for _, tc := range []struct {
		raw    string
		status int
	}{
		{"CONNECT /path HTTP/1.1\r\n\r\n", 400},
		{"CONNECT http://" + a + "/ HTTP/1.1\r\n\r\n", 400},
		{"CONNECT " + a + "/path HTTP/1.1\r\n\r\n", 400},
		{"CONNECT " + a + " HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello", 400},
		{"CONNECT " + a + " HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"CONNECT " + a + " HTTP/2.0\r\n\r\n", 505},
		{"CONNECT " + a + "\r\n\r\n", 400},
		{"CONNECT  " + a + " HTTP/1.1\r\n\r\n", 400},
		{"GARBAGE\r\n\r\n", 400},
		{"\r\n\r\n", 400},
		{"GET / HTTP/1.1\r\nHost: " + a + "\r\n\r\n", 400},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 505},
		{"\x16\x03\x01\x00\x05hello", 408}, // TLS straight to the proxy: never a complete header
	} {
		_, resp, body := env.send(tc.raw)
		if resp.StatusCode != tc.status {
			t.Errorf("%q: got %s %q, want %d", tc.raw, resp.Status, body, tc.status)
		}
	}
	recs := env.records(13)
	for _, r := range recs {
		if r.Allow || r.Rule != "request" {
			t.Errorf("record %+v, want a denial by rule request", r)
		}
	}
	env.wantNoDial()
}

// TestSmuggling: framing that a proxy and a server could read differently
// is refused before anything is sent upstream.
func TestSmuggling(t *testing.T) {
	web, port := webServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	env.allowDial(web, web)
	req := fmt.Sprintf("POST http://allowed.test:%d/ HTTP/1.1\r\nHost: x\r\n", port)
	smuggled := "0\r\n\r\nGET http://evil.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n"
	for _, raw := range []string{
		req + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n" + smuggled,
		req + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n" + smuggled,
		req + "Content-Length: 5\r\nContent-Length: 5\r\n\r\nhello",
		req + "Content-Length: 5, 5\r\n\r\nhello",
		req + "Content-Length: +5\r\n\r\nhello",
		req + "Content-Length: -1\r\n\r\n",
		req + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n" + smuggled,
		req + "Transfer-Encoding: chunked, identity\r\n\r\n" + smuggled,
		req + "Transfer-Encoding: xchunked\r\n\r\n" + smuggled,
		req + "Transfer-Encoding:\tchunked\x0b\r\n\r\n" + smuggled,
		req + "X-Folded: a\r\n Transfer-Encoding: chunked\r\n\r\n" + smuggled,
		req + "Content-Length : 5\r\n\r\nhello",
		strings.ReplaceAll(req, "\r\n", "\n") + "Content-Length: 5\n\nhello",
		req + "Content-Length: 5\r\nX-Bad: a\x00b\r\n\r\nhello",
	} {
		_, resp, body := env.send(raw)
		if resp.StatusCode != 400 {
			t.Errorf("%q: got %s %q, want 400", raw, resp.Status, body)
		}
	}
	env.wantNoDial()
}

// TestOversizedHeaders: a header over MaxHeaderBytes gets 431 whatever
// makes it large; one just under works.
func TestOversizedHeaders(t *testing.T) {
	web, port := webServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}))
	env.allowDial(web, web)
	uri := fmt.Sprintf("http://allowed.test:%d/", port)
	big := strings.Repeat("a", 20<<10)
	for _, raw := range []string{
		"GET " + uri + " HTTP/1.1\r\nX-Big: " + big + "\r\n\r\n",
		"GET " + uri + strings.Repeat("x", 20<<10) + " HTTP/1.1\r\n\r\n",
		"GET " + uri + " HTTP/1.1\r\n" + strings.Repeat("X-Many: 0123456789abcdef\r\n", 1000) + "\r\n",
		"CONNECT allowed.test:443 HTTP/1.1\r\nX-Big: " + big + "\r\n\r\n",
		"GET " + uri + " HTTP/1.1\r\nX-Endless: " + strings.Repeat("b", 1<<20), // never ends
	} {
		_, resp, _ := env.send(raw)
		if resp.StatusCode != 431 {
			t.Errorf("%.60q…: got %s, want 431", raw, resp.Status)
		}
	}
	for i, r := range env.records(5) {
		if r.Allow || r.Status != 431 {
			t.Errorf("record %d = %+v, want a 431 denial", i, r)
		}
	}
	_, resp, _ := env.send("GET " + uri + " HTTP/1.1\r\nX-Big: " + strings.Repeat("a", 15<<10) + "\r\n\r\n")
	if resp.StatusCode != 200 {
		t.Errorf("15 KiB header: got %s, want 200", resp.Status)
	}
}

// TestSlowloris: a header trickled in slower than HeaderTimeout gets 408
// and the connection is closed; a connection that sends nothing is closed
// without a record.
func TestSlowloris(t *testing.T) {
	const timeout = 200 * time.Millisecond
	_, port := echoServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), cidrRule("127.0.0.1/32", port)}),
		func(c *Config) { c.HeaderTimeout = timeout })
	c := env.open()
	start := time.Now()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		fmt.Fprintf(c.Conn, "GET http://allowed.test:%d/ HTTP/1.1\r\n", port)
		for {
			select {
			case <-stop:
				return
			case <-time.After(timeout / 4):
			}
			if _, err := io.WriteString(c.Conn, "X-A: 1\r\n"); err != nil {
				return
			}
		}
	}()
	resp, body := c.exchange(t, "", "GET")
	if d := time.Since(start); resp.StatusCode != 408 || d > 5*timeout {
		t.Errorf("got %s %q after %s, want 408 after about %s", resp.Status, body, d, timeout)
	}
	wantClosed(t, c, 2*time.Second)
	if r := env.record(1); r.Status != 408 || r.Allow {
		t.Errorf("record = %+v, want a 408 denial", r)
	}

	silent := env.open()
	wantClosed(t, silent, 5*timeout)
	time.Sleep(timeout)
	if recs := env.records(1); len(recs) != 1 {
		t.Errorf("records = %v, want none for the silent connection", recs[1:])
	}
	env.wantNoDial()
}

// TestWildcardAndDenyRules: a wildcard rule covers names below it, never
// the apex; a deny.egress host rule wins over it and has no hint (no
// grant entry lifts a deny rule); SNI must equal the CONNECT host, not
// merely match the wildcard.
func TestWildcardAndDenyRules(t *testing.T) {
	port, pool, _ := tlsServer(t)
	server := fmt.Sprintf("127.0.0.1:%d", port)
	env := newEnv(t, enforcer(t, []string{hostRule("*.corp.test", port), cidrRule("127.0.0.1/32", port)}, `{"host":"evil.corp.test"}`))
	env.allowDial(server, server)

	c := env.mustConnect(fmt.Sprintf("api.corp.test:%d", port))
	tc := tls.Client(c, &tls.Config{ServerName: "allowed.test", RootCAs: pool})
	if err := tc.Handshake(); err == nil {
		t.Error("SNI allowed.test through a tunnel to api.corp.test: handshake succeeded")
	}
	env.wantDenied(1, "sni", `SNI "allowed.test" does not match CONNECT host "api.corp.test"`)

	_, resp, body := env.connect(fmt.Sprintf("evil.corp.test:%d", port))
	if resp.StatusCode != 403 {
		t.Errorf("denied host: got %s %q", resp.Status, body)
	}
	if r := env.wantDenied(2, "deny.egress[0]", "evil.corp.test"); r.Hint != "" {
		t.Errorf("deny-rule denial has hint %s", r.Hint)
	}
	_, resp, _ = env.connect(fmt.Sprintf("corp.test:%d", port))
	if resp.StatusCode != 403 {
		t.Errorf("apex of a wildcard: got %s, want 403", resp.Status)
	}
	env.wantDenied(3, "default", "corp.test")
	if d := env.dialed(); len(d) != 1 {
		t.Errorf("dialled %v, want only api.corp.test's address", d)
	}
}
