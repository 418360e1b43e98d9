package egress

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Red team 16 (docs/security/redteam-16.md): attacks on the proxy's
// credential injection.

// traceServer is a web server that records the Authorization header of
// every request, and answers TRACE as RFC 9110 §9.3.8 says: with the
// request it received (headers included) as its body.
func traceServer(t *testing.T) (addr string, got func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+" "+strings.Join(r.Header.Values("Authorization"), ","))
		mu.Unlock()
		if r.Method == "TRACE" {
			w.Header().Set("Content-Type", "message/http")
			fmt.Fprintf(w, "%s %s %s\r\n", r.Method, r.RequestURI, r.Proto)
			r.Header.Write(w)
			return
		}
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// TestRedteam16InjectionTraceEcho: FINDING. TRACE makes any destination
// that implements it (RFC 9110 §9.3.8) an echo of the request: the
// proxy forwards TRACE with the injected credential, and the response
// hands the value back to the sandbox. The secure behaviour: a TRACE to
// a destination with an injection is refused (or not injected), so the
// value never comes back.
func TestRedteam16InjectionTraceEcho(t *testing.T) {
	web, _ := traceServer(t)
	const secret = "Bearer trace-s3cr3t"
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", 80), cidrRule("127.0.0.1/32", 80)}), func(c *Config) {
		c.Inject = []Injection{{Host: "allowed.test", Port: 80, Header: "Authorization", Value: []byte(secret), Label: "Authorization from secret \"t\""}}
	})
	env.allowDial("127.0.0.1:80", web)
	_, resp, body := env.send("TRACE http://allowed.test/ HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
	if strings.Contains(body, "trace-s3cr3t") {
		t.Errorf("TRACE answered %s with the injected value in its body: %q", resp.Status, body)
	}
}

// TestRedteam16InjectionHostVariants: HELD. The credential reaches only
// requests whose absolute URI names exactly the injection's host and
// port: default and explicit port alike; never an upper-case or
// trailing-dot spelling, the address, a Host header that names the
// host, another port, nor the second request of a pipelined or
// keep-alive connection whose first request was injected.
func TestRedteam16InjectionHostVariants(t *testing.T) {
	web, seen := traceServer(t)
	const secret = "Bearer variant-s3cr3t"
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", 80), hostRule("other.test", 80), hostRule("allowed.test", 8080), cidrRule("127.0.0.1/32", 80)}), func(c *Config) {
		c.Inject = []Injection{{Host: "allowed.test", Port: 80, Header: "Authorization", Value: []byte(secret), Label: "Authorization from secret \"t\""}}
	})
	env.allowDial("127.0.0.1:80", web)
	env.allowDial("127.0.0.1:8080", web)
	for _, req := range []string{
		"GET http://allowed.test/a HTTP/1.1\r\nHost: allowed.test\r\n\r\n",                                           // injected
		"GET http://allowed.test:80/b HTTP/1.1\r\nHost: x\r\n\r\n",                                                   // injected
		"GET http://allowed.test/c HTTP/1.0\r\n\r\n",                                                                 // injected, HTTP/1.0
		"GET http://ALLOWED.TEST/d HTTP/1.1\r\nHost: allowed.test\r\n\r\n",                                           // refused or not injected
		"GET http://allowed.test./e HTTP/1.1\r\nHost: allowed.test\r\n\r\n",                                          // refused or not injected
		"GET http://127.0.0.1/f HTTP/1.1\r\nHost: allowed.test\r\n\r\n",                                              // not injected
		"GET http://other.test/g HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n",                                          // not injected
		"GET http://allowed.test:8080/h HTTP/1.1\r\nHost: allowed.test:80\r\n\r\n",                                   // not injected
		"GET http://Allowed.test%2e/i HTTP/1.1\r\nHost: allowed.test\r\n\r\n",                                        // refused
		"GET http://allowed.test%3a80/j HTTP/1.1\r\nHost: allowed.test\r\n\r\n",                                      // refused
		"GET http://other.test/k HTTP/1.1\r\nHost: other.test\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\nx", // not injected
	} {
		c := env.open()
		c.Write([]byte(req))
		c.SetDeadline(time.Now().Add(5 * time.Second))
		http.ReadResponse(c.br, nil)
		c.Close()
	}
	// Pipelined on one connection: an injected request, then one for
	// another host.
	c := env.open()
	c.Write([]byte("GET http://allowed.test/p1 HTTP/1.1\r\nHost: allowed.test\r\n\r\nGET http://other.test/p2 HTTP/1.1\r\nHost: allowed.test\r\nConnection: close\r\n\r\n"))
	for range 2 {
		resp, err := http.ReadResponse(c.br, nil)
		if err != nil {
			break
		}
		resp.Body.Close()
	}
	c.Close()
	injected := 0
	for _, s := range seen() {
		host, auth, _ := strings.Cut(s, " ")
		if !strings.Contains(auth, "variant-s3cr3t") {
			continue
		}
		injected++
		if host != "allowed.test" && host != "allowed.test:80" {
			t.Errorf("the credential reached a request for %q", host)
		}
	}
	if injected != 4 {
		t.Errorf("%d requests carried the credential, want 4 (a, b, c and p1): %q", injected, seen())
	}
}

// TestRedteam16InjectionNotInTunnel: HELD. Plain HTTP sent inside a
// CONNECT tunnel to the injection's own host and port is never parsed,
// so it never carries the credential (the proxy may also refuse a
// tunnel that does not start with a TLS ClientHello).
func TestRedteam16InjectionNotInTunnel(t *testing.T) {
	web, seen := traceServer(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", 80), cidrRule("127.0.0.1/32", 80)}), func(c *Config) {
		c.Inject = []Injection{{Host: "allowed.test", Port: 80, Header: "Authorization", Value: []byte("Bearer tunnel-s3cr3t"), Label: "Authorization from secret \"t\""}}
	})
	env.allowDial("127.0.0.1:80", web)
	c, resp, _ := env.connect("allowed.test:80")
	if resp.StatusCode == 200 {
		c.Write([]byte("TRACE / HTTP/1.1\r\nHost: allowed.test\r\n\r\n"))
		c.SetDeadline(time.Now().Add(3 * time.Second))
		if r, err := http.ReadResponse(c.br, nil); err == nil {
			var b strings.Builder
			r.Write(&b)
			if strings.Contains(b.String(), "tunnel-s3cr3t") {
				t.Errorf("the tunnel's request carried the credential: %q", b.String())
			}
		}
	}
	for _, s := range seen() {
		if strings.Contains(s, "tunnel-s3cr3t") {
			t.Errorf("the upstream saw the credential through a tunnel: %s", s)
		}
	}
}
