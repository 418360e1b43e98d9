package egress

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// gitHost is a web server that records, for every request, its method,
// target, whether it carried Authorization, and its body's SHA-256.
func gitHost(t *testing.T) (addr string, got func() []string) {
	t.Helper()
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		seen = append(seen, fmt.Sprintf("%s %s auth=%v body=%x", r.Method, r.URL.RequestURI(), r.Header.Get("Authorization") != "", sha256.Sum256(b)))
		mu.Unlock()
		fmt.Fprint(w, "ok")
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().String(), func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

const (
	testPushRef = "refs/heads/cordon/review/run_x"
	oidZero     = "0000000000000000000000000000000000000000"
	oidOne      = "1111111111111111111111111111111111111111"
)

func pkt(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

func pushReq(body string, extra string) string {
	return fmt.Sprintf("POST http://allowed.test/acme/app.git/git-receive-pack HTTP/1.1\r\nHost: allowed.test\r\n%sContent-Length: %d\r\n\r\n%s", extra, len(body), body)
}

// TestRepository: with a repository configured, the proxy forwards to
// its host and port only git's smart-HTTP requests for exactly its
// path, and a push only when every command updates the push ref or a
// ref below it (red team 16, F1 and F2); the body reaches the server
// unchanged, and the record names what was pushed. Another host on the
// same port is not confined.
func TestRepository(t *testing.T) {
	web, seen := gitHost(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", 80), hostRule("other.test", 80), cidrRule("127.0.0.1/32", 80)}), func(c *Config) {
		c.Repository = &Repository{Host: "allowed.test", Port: 80, Path: "/acme/app.git", PushRef: testPushRef}
		c.Inject = []Injection{{Host: "allowed.test", Port: 80, Path: "/acme/app.git", Header: "Authorization", Value: []byte("Basic x"), Label: "repo"}}
	})
	env.allowDial("127.0.0.1:80", web)

	pack := "PACK" + strings.Repeat("\x00\x01packdata", 20000) // past any read-ahead
	cmds := pkt(oidZero+" "+oidOne+" "+testPushRef+"\x00report-status-v2 side-band-64k quiet object-format=sha1 agent=git/2") +
		pkt(oidOne+" "+oidOne+" "+testPushRef+"/b\n") + "0000"
	allowed := []string{
		"GET http://allowed.test/acme/app.git/info/refs?service=git-upload-pack HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"GET http://allowed.test/acme/app.git/info/refs?service=git-receive-pack HTTP/1.1\r\nHost: allowed.test\r\n\r\n",
		"POST http://allowed.test/acme/app.git/git-upload-pack HTTP/1.1\r\nHost: allowed.test\r\nContent-Length: 4\r\n\r\n0000",
		pushReq(cmds+pack, ""),
		// Chunked, the command list split across chunks.
		"POST http://allowed.test/acme/app.git/git-receive-pack HTTP/1.1\r\nHost: allowed.test\r\nTransfer-Encoding: chunked\r\n\r\n" +
			fmt.Sprintf("7\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n", cmds[:7], len(cmds[7:]+pack), cmds[7:]+pack),
		"GET http://other.test/anything/at/all HTTP/1.1\r\nHost: other.test\r\n\r\n",
	}
	for _, req := range allowed {
		if _, resp, body := env.send(req); resp.StatusCode != 200 {
			t.Errorf("%.80q: %s %q, want 200", req, resp.Status, body)
		}
	}
	got := seen()
	if len(got) != len(allowed) {
		t.Fatalf("the server saw %d requests, want %d: %q", len(got), len(allowed), got)
	}
	wantBody := fmt.Sprintf("body=%x", sha256.Sum256([]byte(cmds+pack)))
	for i, s := range got {
		if wantAuth := i < 5; strings.Contains(s, "auth=true") != wantAuth {
			t.Errorf("request %d: %s (injected: want %v)", i, s, wantAuth)
		}
		if i == 3 || i == 4 {
			if !strings.HasSuffix(s, wantBody) {
				t.Errorf("push %d arrived changed: %s", i, s)
			}
		}
	}
	recs := env.records(len(allowed))
	pushes := 0
	for _, r := range recs {
		if len(r.Pushed) > 0 {
			pushes++
			if want := []string{testPushRef + " " + oidZero + " " + oidOne, testPushRef + "/b " + oidOne + " " + oidOne}; strings.Join(r.Pushed, "|") != strings.Join(want, "|") {
				t.Errorf("record of a push: Pushed %q, want %q", r.Pushed, want)
			}
		}
	}
	if pushes != 2 {
		t.Errorf("%d records name a push, want 2", pushes)
	}

	refused := map[string]string{
		"dot-dot":          "GET http://allowed.test/acme/x/../app.git/info/refs?service=git-upload-pack HTTP/1.1\r\n\r\n",
		"double slash":     "GET http://allowed.test/acme//app.git/info/refs?service=git-upload-pack HTTP/1.1\r\n\r\n",
		"escaped slash":    "GET http://allowed.test/acme%2fapp.git/info/refs?service=git-upload-pack HTTP/1.1\r\n\r\n",
		"escaped byte":     "GET http://allowed.test/acme/app%2egit/info/refs?service=git-upload-pack HTTP/1.1\r\n\r\n",
		"backslash":        "GET http://allowed.test/acme%5capp.git/info/refs?service=git-upload-pack HTTP/1.1\r\n\r\n",
		"another repo":     "GET http://allowed.test/victim/private.git/info/refs?service=git-upload-pack HTTP/1.1\r\n\r\n",
		"path prefix":      "GET http://allowed.test/acme/app.gitx/info/refs?service=git-upload-pack HTTP/1.1\r\n\r\n",
		"upper case":       "GET http://allowed.test/ACME/app.git/info/refs?service=git-upload-pack HTTP/1.1\r\n\r\n",
		"api":              "GET http://allowed.test/api/v4/user HTTP/1.1\r\n\r\n",
		"root":             "GET http://allowed.test/ HTTP/1.1\r\n\r\n",
		"dumb http":        "GET http://allowed.test/acme/app.git/HEAD HTTP/1.1\r\n\r\n",
		"objects":          "GET http://allowed.test/acme/app.git/objects/info/packs HTTP/1.1\r\n\r\n",
		"other service":    "GET http://allowed.test/acme/app.git/info/refs?service=git-upload-archive HTTP/1.1\r\n\r\n",
		"extra query":      "GET http://allowed.test/acme/app.git/info/refs?service=git-upload-pack&x=1 HTTP/1.1\r\n\r\n",
		"no query":         "GET http://allowed.test/acme/app.git/info/refs HTTP/1.1\r\n\r\n",
		"trailing slash":   "GET http://allowed.test/acme/app.git/info/refs/?service=git-upload-pack HTTP/1.1\r\n\r\n",
		"post with query":  "POST http://allowed.test/acme/app.git/git-upload-pack?x HTTP/1.1\r\nContent-Length: 4\r\n\r\n0000",
		"get upload-pack":  "GET http://allowed.test/acme/app.git/git-upload-pack HTTP/1.1\r\n\r\n",
		"put":              "PUT http://allowed.test/acme/app.git/git-receive-pack HTTP/1.1\r\nContent-Length: 4\r\n\r\n0000",
		"delete":           "DELETE http://allowed.test/acme/app.git HTTP/1.1\r\n\r\n",
		"push to main":     pushReq(pkt(oidZero+" "+oidOne+" refs/heads/main\x00report-status")+"0000"+pack, ""),
		"main second":      pushReq(pkt(oidZero+" "+oidOne+" "+testPushRef+"\x00report-status")+pkt(oidZero+" "+oidOne+" refs/heads/main")+"0000", ""),
		"sibling ref":      pushReq(pkt(oidZero+" "+oidOne+" "+testPushRef+"x\x00report-status")+"0000", ""),
		"deletion":         pushReq(pkt(oidOne+" "+oidZero+" "+testPushRef+"\x00report-status delete-refs")+"0000", ""),
		"push options":     pushReq(pkt(oidZero+" "+oidOne+" "+testPushRef+"\x00report-status push-options")+"0000"+pkt("x")+"0000", ""),
		"push cert":        pushReq(pkt("push-cert\x00report-status")+pkt("certificate version 0.1\n")+"0000", ""),
		"caps twice":       pushReq(pkt(oidZero+" "+oidOne+" "+testPushRef+"\x00a")+pkt(oidZero+" "+oidOne+" "+testPushRef+"/b\x00b")+"0000", ""),
		"no commands":      pushReq("0000", ""),
		"empty body":       pushReq("", ""),
		"truncated":        pushReq(pkt(oidZero + " " + oidOne + " " + testPushRef)[:30], ""),
		"upper-case len":   pushReq("003A"+strings.Repeat("a", 54)+"0000", ""),
		"delimiter":        pushReq("0001"+"0000", ""),
		"long line":        pushReq(pkt(oidZero+" "+oidOne+" "+testPushRef+"/"+strings.Repeat("a", 1100))+"0000", ""),
		"too many":         pushReq(strings.Repeat(pkt(oidZero+" "+oidOne+" "+testPushRef+"/c"), maxPushCommands+1)+"0000", ""),
		"mixed oid length": pushReq(pkt(oidZero+" "+strings.Repeat("1", 64)+" "+testPushRef)+"0000", ""),
		"gzip":             pushReq(pkt(oidZero+" "+oidOne+" "+testPushRef)+"0000", "Content-Encoding: gzip\r\n"),
		"ref with space":   pushReq(pkt(oidZero+" "+oidOne+" "+testPushRef+"/a b")+"0000", ""),
		"ref lock":         pushReq(pkt(oidZero+" "+oidOne+" "+testPushRef+"/a.lock")+"0000", ""),
		"no push ref":      "",
	}
	delete(refused, "no push ref")
	before := len(seen())
	for name, req := range refused {
		if _, resp, body := env.send(req); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %s %q, want 403", name, resp.Status, body)
		}
	}
	if _, resp, _ := env.connect("allowed.test:80"); resp.StatusCode != http.StatusForbidden {
		t.Errorf("CONNECT to the repository's host and port: %s, want 403", resp.Status)
	}
	for _, m := range []string{"TRACE", "trace", "TRACK"} {
		if _, resp, _ := env.send(m + " http://other.test/ HTTP/1.1\r\n\r\n"); resp.StatusCode != http.StatusMethodNotAllowed {
			t.Errorf("%s: %s, want 405", m, resp.Status)
		}
	}
	if got := seen(); len(got) != before {
		t.Errorf("refused requests reached the server: %q", got[before:])
	}
	for _, r := range env.records(len(allowed) + len(refused) + 4)[len(allowed):] {
		if r.Allow || r.Status != http.StatusForbidden && r.Status != http.StatusMethodNotAllowed || r.Rule != ruleRepository && r.Rule != ruleRequest {
			t.Errorf("a refusal recorded as %+v", r)
		}
	}
}

// TestRepositoryNoPush: without a push ref, no push is forwarded.
func TestRepositoryNoPush(t *testing.T) {
	web, seen := gitHost(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", 80), cidrRule("127.0.0.1/32", 80)}), func(c *Config) {
		c.Repository = &Repository{Host: "allowed.test", Port: 80, Path: "/acme/app.git"}
	})
	env.allowDial("127.0.0.1:80", web)
	if _, resp, _ := env.send(pushReq(pkt(oidZero+" "+oidOne+" "+testPushRef)+"0000", "")); resp.StatusCode != http.StatusForbidden {
		t.Errorf("a push with no push ref: %s", resp.Status)
	}
	if len(seen()) != 0 {
		t.Errorf("the server saw %q", seen())
	}
}

// TestRepositoryRefused: New refuses a repository or an injection path
// that is not in its one plain spelling.
func TestRepositoryRefused(t *testing.T) {
	ok := Repository{Host: "git.example.com", Port: 80, Path: "/acme/app.git", PushRef: testPushRef}
	for name, mod := range map[string]func(*Repository){
		"no path":        func(r *Repository) { r.Path = "" },
		"root":           func(r *Repository) { r.Path = "/" },
		"trailing slash": func(r *Repository) { r.Path = "/acme/app.git/" },
		"dot-dot":        func(r *Repository) { r.Path = "/acme/../app.git" },
		"escape":         func(r *Repository) { r.Path = "/acme%2fapp.git" },
		"query":          func(r *Repository) { r.Path = "/acme/app.git?x" },
		"push ref":       func(r *Repository) { r.PushRef = "heads/x" },
		"push ref dots":  func(r *Repository) { r.PushRef = "refs/heads/../x" },
		"host":           func(r *Repository) { r.Host = "Git.example.com" },
		"port":           func(r *Repository) { r.Port = 0 },
	} {
		r := ok
		mod(&r)
		cfg := DefaultConfig(enforcer(t, nil))
		cfg.Repository = &r
		if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("%s: New returned %v, want ErrInvalidConfig", name, err)
		}
	}
	cfg := DefaultConfig(enforcer(t, nil))
	cfg.Repository = &ok
	if _, err := New(cfg); err != nil {
		t.Errorf("a good repository: %v", err)
	}
	cfg.Repository = nil
	cfg.Inject = []Injection{{Host: "git.example.com", Port: 80, Path: "/a/../b", Header: "Authorization", Value: []byte("x")}}
	if _, err := New(cfg); !errors.Is(err, ErrInvalidConfig) {
		t.Errorf("an injection path with dot-dot: %v", err)
	}
}

// TestInjectionPath: an injection with a path goes only to requests for
// that path or below it, in its one plain spelling.
func TestInjectionPath(t *testing.T) {
	web, seen := gitHost(t)
	env := newEnv(t, enforcer(t, []string{hostRule("allowed.test", 80), cidrRule("127.0.0.1/32", 80)}), func(c *Config) {
		c.Inject = []Injection{{Host: "allowed.test", Port: 80, Path: "/acme/app.git", Header: "Authorization", Value: []byte("Basic x"), Label: "repo"}}
	})
	env.allowDial("127.0.0.1:80", web)
	for target, want := range map[string]bool{
		"/acme/app.git":                   true,
		"/acme/app.git/info/refs?x=%2f..": true,
		"/acme/app.gitx":                  false,
		"/acme/app.git/../../victim.git":  false,
		"/acme/x/../app.git/info/refs":    false,
		"/acme//app.git/info/refs":        false,
		"/acme%2Fapp.git/info/refs":       false,
		"/acme/app.git/%2e%2e/victim.git": false,
		"/":                               false,
		"/victim.git/info/refs":           false,
	} {
		n := len(seen())
		if _, resp, _ := env.send("GET http://allowed.test" + target + " HTTP/1.1\r\n\r\n"); resp.StatusCode != 200 {
			t.Fatalf("%s: %s", target, resp.Status)
		}
		if got := seen()[n]; strings.Contains(got, "auth=true") != want {
			t.Errorf("%s: %s, want injected %v", target, got, want)
		}
	}
}
