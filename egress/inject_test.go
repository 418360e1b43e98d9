package egress

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// authServer is a web server that records the Authorization header of
// every request it gets.
func authServer(t *testing.T) (addr string, port int, got func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Host+" "+strings.Join(r.Header.Values("Authorization"), ","))
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	addr = srv.Listener.Addr().String()
	port = srv.Listener.Addr().(*net.TCPAddr).Port
	return addr, port, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

// TestInjection: the proxy adds the credential for exactly the granted
// host and port, replacing whatever the client sent under that name
// (even a header its Connection header names away), never for another
// host, and records the injection by label, never by value.
func TestInjection(t *testing.T) {
	web, port, seen := authServer(t)
	const secret = "Bearer s3cr3t-value"
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", port), hostRule("other.test", port), cidrRule("127.0.0.1/32", port)}),
		func(c *Config) {
			c.Inject = []Injection{{Host: "allowed.test", Port: port, Header: "Authorization", Value: []byte(secret), Label: `Authorization from secret "gh"`}}
		})
	env.allowDial(web, web)
	for _, req := range []string{
		fmt.Sprintf("GET http://allowed.test:%d/a HTTP/1.1\r\nHost: x\r\n\r\n", port),
		fmt.Sprintf("GET http://allowed.test:%d/b HTTP/1.1\r\nHost: x\r\nAuthorization: mine\r\n\r\n", port),
		fmt.Sprintf("GET http://allowed.test:%d/c HTTP/1.1\r\nHost: x\r\nConnection: Authorization\r\n\r\n", port),
		fmt.Sprintf("GET http://other.test:%d/d HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", port, port),
		fmt.Sprintf("GET http://127.0.0.1:%d/e HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", port, port),
	} {
		if _, resp, body := env.send(req); resp.StatusCode != 200 {
			t.Fatalf("%q: got %s %q", req, resp.Status, body)
		}
	}
	want := []string{
		fmt.Sprintf("allowed.test:%d %s", port, secret),
		fmt.Sprintf("allowed.test:%d %s", port, secret),
		fmt.Sprintf("allowed.test:%d %s", port, secret),
		fmt.Sprintf("other.test:%d ", port),
		fmt.Sprintf("127.0.0.1:%d ", port),
	}
	if got := seen(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("upstream saw\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	recs := env.records(5)
	// A record is emitted after its response is written, so the next
	// request's can come first: order them by when each request began.
	slices.SortFunc(recs, func(a, b Record) int { return a.Start.Compare(b.Start) })
	for i, r := range recs {
		if line := fmt.Sprintf("%+v %v %s", r, r, r.String()); strings.Contains(line, "s3cr3t") {
			t.Errorf("record %d holds the value: %s", i, line)
		}
		if wantLabel := i < 3; (r.Injected != "") != wantLabel || wantLabel && r.Injected != `Authorization from secret "gh"` {
			t.Errorf("record %d: Injected %q", i, r.Injected)
		}
	}
}

// TestInjectionRefused: an injection that could frame or route a
// request, or smuggle a header, or that names its destination loosely,
// is refused by New.
func TestInjectionRefused(t *testing.T) {
	ok := Injection{Host: "api.example.com", Port: 80, Header: "Authorization", Value: []byte("Bearer x")}
	for name, mod := range map[string]func(*Injection){
		"host header":       func(i *Injection) { i.Header = "Host" },
		"content-length":    func(i *Injection) { i.Header = "Content-Length" },
		"proxy header":      func(i *Injection) { i.Header = "Proxy-Authorization" },
		"non-canonical":     func(i *Injection) { i.Header = "authorization" },
		"newline in value":  func(i *Injection) { i.Value = []byte("Bearer x\r\nX-Evil: 1") },
		"empty value":       func(i *Injection) { i.Value = nil },
		"wildcard host":     func(i *Injection) { i.Host = "*.example.com" },
		"upper-case host":   func(i *Injection) { i.Host = "API.example.com" },
		"userinfo host":     func(i *Injection) { i.Host = "user@api.example.com" },
		"no host":           func(i *Injection) { i.Host = "" },
		"port zero":         func(i *Injection) { i.Port = 0 },
		"port out of range": func(i *Injection) { i.Port = 70000 },
	} {
		in := ok
		mod(&in)
		cfg := DefaultConfig(enforcer(t, nil))
		cfg.Inject = []Injection{in}
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: New returned %v, want ErrInvalidConfig", name, err)
		}
	}
	cfg := DefaultConfig(enforcer(t, nil))
	cfg.Inject = []Injection{ok, ok}
	if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("two injections of one header for one host: New returned %v", err)
	}
	cfg.Inject = []Injection{ok}
	if _, err := New(cfg); err != nil {
		t.Errorf("a good injection: %v", err)
	}
}
